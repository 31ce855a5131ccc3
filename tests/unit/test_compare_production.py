"""Which record sources a comparison run takes, checked before anything starts."""

import pytest

from zkcoord.compare.production import source_kind
from zkcoord.compare.runner import CompareOptions, compare_run
from zkcoord.errors import SourceError


def test_a_comparison_reads_the_synthetic_source_or_a_kafka_broker():
    assert source_kind("synthetic") == "synthetic"
    assert source_kind("kafka:bootstrap=127.0.0.1:9092") == "kafka"
    assert source_kind("kafka:bootstrap=a:9092,b:9092,client_id=compare") == "kafka"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("synthetic:rate=5", "takes no settings"),
        ("kafka", "bootstrap=HOST:PORT"),
        ("kafka:client_id=x", "bootstrap=HOST:PORT"),
        ("tansu:bootstrap=h:1", "a comparison reads 'synthetic' or 'kafka:bootstrap=HOST:PORT'"),
    ],
)
def test_other_specs_are_refused_saying_what_to_give(spec, message):
    with pytest.raises(SourceError, match=message):
        source_kind(spec)


def test_a_run_refuses_a_bad_source_before_starting_anything(tmp_path):
    with pytest.raises(ValueError, match="takes no settings"):
        compare_run(CompareOptions(out=tmp_path / "a", scenarios=["kill"], source="synthetic:rate=5"))
    with pytest.raises(ValueError, match="needs the broker's ZooKeeper"):
        compare_run(CompareOptions(out=tmp_path / "b", scenarios=["kill"], source="kafka:bootstrap=127.0.0.1:1"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
