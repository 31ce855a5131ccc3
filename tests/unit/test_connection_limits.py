"""max.connections and max.connections.per.ip (with overrides) as both listeners count them."""

import logging

from zkcoord.server.limits import ConnectionLimits


def test_bounds_in_all_and_per_ip_with_overrides_and_releases_count_down(caplog):
    limits = ConnectionLimits("connection", 3, max_connections_per_ip=1, per_ip_overrides={"10.0.0.9": 2})
    with caplog.at_level(logging.WARNING, logger="zkcoord.server.limits"):
        assert limits.admit(("10.0.0.1", 1))
        assert not limits.admit(("10.0.0.1", 2))  # per IP
        assert limits.admit(("10.0.0.9", 3)) and limits.admit(("10.0.0.9", 4))  # its override
        assert not limits.admit(("10.0.0.2", 5))  # in all
        assert not limits.admit(("10.0.0.2", 6), stopping=True)
    assert (limits.open, limits.rejected_total) == (3, 3)
    (logged,) = caplog.records  # one line per interval, whatever the flood
    assert "reason=max_connections_per_ip" in logged.getMessage()
    limits.release(("10.0.0.1", 1))
    assert limits.admit(("10.0.0.2", 7)) and limits.open == 3
