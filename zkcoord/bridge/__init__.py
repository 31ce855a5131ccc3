"""Mixed groups: coordinator members taking part in a Kafka 0.8.2 ZooKeeper group (docs/migration.md).

:mod:`zkcoord.bridge.core` is pure: who a coordinator member is in the 0.8.2 group, what 0.8.2 assigns it,
whether it may join, and the ordered plans (flush before release, claim before handing partitions over,
owners before registration) that the node's runtime (:mod:`zkcoord.server.bridge`) carries out in ZooKeeper.
"""
