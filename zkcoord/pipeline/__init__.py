"""PySpark jobs over comparison traces, ZooKeeper offset exports and offsets logs.

Run them through ``zkcoord pipeline ...`` (or ``python -m zkcoord.pipeline``): each job runs in a process of
its own that imports neither gevent nor kazoo, because py4j and a monkey-patched socket module do not mix.
Nothing here imports the runtime or the server; log segments are decoded with the log's own record codec.
"""
