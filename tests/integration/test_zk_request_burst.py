"""A node's kazoo client (:func:`zkcoord.zk.session.make_kazoo_client`) under a burst of concurrent requests, as a
thousand members joining at once make: each JoinGroup reads ZooKeeper."""

import gevent

from zkcoord.zk.session import make_kazoo_client

BURST = 2_000  # well over the few hundred wake-up bytes kazoo's socket pair buffers
BOUND_S = 60.0  # how long the test waits at most; a healthy client answers the burst in about a second


def test_every_request_of_a_burst_is_answered_and_the_client_serves_the_next_ones(zk_connect):
    client = make_kazoo_client(zk_connect, 10_000)
    client.start(timeout=15)
    try:
        burst = [gevent.spawn(client.exists, f"/absent-{index}") for index in range(BURST)]
        gevent.joinall(burst, timeout=BOUND_S)
        failed = [repr(call.exception) for call in burst if call.dead and not call.successful()]
        assert failed == []
        assert all(call.dead for call in burst)
        later = gevent.spawn(client.create, "/after-the-burst")
        later.join(timeout=BOUND_S)
        assert later.successful(), later.exception
        assert client.exists("/after-the-burst") is not None
    finally:
        # Bounded: a client wedged by the burst never sends its close, and the failure must show, not a hang.
        stopping = gevent.spawn(client.stop)
        stopping.join(timeout=BOUND_S)
        if stopping.dead:
            client.close()
