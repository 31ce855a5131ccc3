"""Reading the output of Kafka 0.8.2.2's VerifyConsumerRebalance (zkcoord.testing.jvm_member); no JVM here.

The lines are the tool's own, captured from a run against a real group (KAFKA-3952 makes it report failure
for every group that has partitions).
"""

from zkcoord.model import TopicPartition
from zkcoord.testing.jvm_member import read_verification

LOG = "[2026-11-26 07:08:57,449] ERROR {} (kafka.tools.VerifyConsumerRebalance$)"


def _errors(*messages: str) -> str:
    return "".join(LOG.format(message) + "\n" for message in messages)


def test_the_type_mismatches_of_kafka_3952_are_explained_and_the_owners_read():
    report = read_verification(
        "Rebalance operation failed !\n",
        _errors(
            "No owner for partition [t,0]",
            "Owner g_d1-0 for partition [t,0] is not a valid member of consumer group g",
            "No owner for partition [t,1]",
            "Owner g_d1-1 for partition [t,1] is not a valid member of consumer group g",
        ),
    )
    assert not report.successful and report.verified
    assert report.owners == {TopicPartition("t", 0): "g_d1-0", TopicPartition("t", 1): "g_d1-1"}
    assert report.unowned == [] and report.unexplained == []


def test_a_partition_without_an_owner_znode_is_reported_unowned():
    report = read_verification(
        "Rebalance operation failed !\n",
        _errors(
            "No owner for partition [t,0]",
            "Owner g_d1-0 for partition [t,0] is not a valid member of consumer group g",
            "No owner for partition [t,1]",
            "No owner for partition [t,1]",
        ),
    )
    assert report.unowned == [TopicPartition("t", 1)] and not report.verified


def test_other_complaints_are_unexplained():
    report = read_verification("Rebalance operation failed !\n", _errors("No owners for any partitions for topic t"))
    assert report.unexplained and not report.verified


def test_success_and_a_tool_that_never_finished():
    assert read_verification("Rebalance operation successful !\n", "").verified
    assert not read_verification("", "Exception in thread main java.lang.NoClassDefFoundError\n").verified
