"""Who a client is and what it may do, decided without IO: SASL mechanisms, Kafka's ACLs and their checks.

Kafka's own formats and rules (AclAuthorizer, SCRAM credentials as ZooKeeper mode stores them), so that a
cluster's existing users and ACLs work unchanged (docs/security.md). The stores that read them from ZooKeeper are
in :mod:`zkcoord.zk`; the listeners that use them in :mod:`zkcoord.server`.
"""
