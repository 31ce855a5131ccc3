"""Fault injection and fault campaigns (issue 18): a loopback proxy that cuts or stalls connections, a log
directory whose disk the nemesis can fill, and an fsync the nemesis can slow (docs/faults.md, "Fault injection").

Threads, not gevent: the campaign that drives these runs on plain threads.
"""
