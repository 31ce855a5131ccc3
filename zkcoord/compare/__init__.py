"""The same workload under the legacy ZooKeeper rebalance and under the coordinator's, traced for analysis.

``zkcoord compare run`` (zkcoord.compare.runner) writes traces (docs/traces.md); ``zkcoord pipeline
rebalance-report`` (zkcoord.pipeline) turns them into the report. docs/compare.md tells how to read it.
"""
