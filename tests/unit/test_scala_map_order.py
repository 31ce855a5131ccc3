"""Scala map iteration order (legacy-zk-protocol.md §4.3) against vectors from REAL Scala 2.11 collections.

``tests/data/scala-2.11-map-order.json`` was produced by ``tools/scala_map_order/generate.sh`` running
``Generate.scala`` on Scala 2.11.12 (Debian's scala-library); its ``produced_by`` field says how and when.
"""

import json
from pathlib import Path

import pytest

from zkcoord.assign.java import immutable_map_order, mutable_hashmap_order
from zkcoord.assign.legacy import roundrobin_listing, topic_partition_hash

VECTORS = json.loads((Path(__file__).parents[1] / "data" / "scala-2.11-map-order.json").read_text())
CASES = VECTORS["cases"]


def _roundrobin_topic_order(keys):
    """Immutable Map, then mutable.HashMap M0, M1 and M2, as in ``roundrobin_listing``."""
    topics = immutable_map_order(keys)
    for _ in range(3):
        topics = mutable_hashmap_order(topics)
    return topics


def test_vectors_came_from_scala_2_11():
    assert "Scala 2.11." in VECTORS["produced_by"]
    assert len(CASES) >= 100


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{len(c['keys'])}keys" for i, c in enumerate(CASES)])
def test_matches_real_scala(case):
    keys = case["keys"]
    assert immutable_map_order(keys) == case["immutable_order"]
    assert mutable_hashmap_order(keys) == case["mutable_order"]
    assert _roundrobin_topic_order(keys) == case["roundrobin_topic_order"]
    # One partition per topic: ties on the "[t,0]" hash keep Scala's M2 order (stable sort).
    expected = sorted(((t, 0) for t in case["roundrobin_topic_order"]), key=lambda c: topic_partition_hash(*c))
    assert roundrobin_listing(dict.fromkeys(keys, 1), dict.fromkeys(keys, 1)) == expected
