"""The probe endpoints beside /metrics: /healthz always answers, /readyz says 503 while the process cannot serve."""

import json
import socket
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from zkcoord.metrics_http import serve_metrics


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get(port: int, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.parametrize("ready", [True, False])
def test_readyz_answers_the_readiness_it_is_given(ready):
    import gevent

    port = free_port()
    state = {"ready": ready, "zookeeper": "CONNECTED" if ready else "SUSPENDED"}
    server = serve_metrics(CollectorRegistry(), "127.0.0.1", port, readiness=lambda: state)
    try:
        answers = gevent.get_hub().threadpool.spawn(lambda: [get(port, p) for p in ("/healthz", "/readyz")]).get()
    finally:
        server.stop()
    (health_status, _), (ready_status, body) = answers
    assert health_status == 200
    assert ready_status == (200 if ready else 503) and json.loads(body) == state
