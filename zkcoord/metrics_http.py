"""Serving a Prometheus registry at ``/metrics`` over HTTP, for a coordinator node and a consumer alike, with
``/healthz`` (the process answers) and ``/readyz`` (the process says it can serve) for supervisors' probes.

IO: gevent's WSGI server on the calling thread's hub; imported lazily by whoever serves metrics.
"""

import json
from collections.abc import Callable
from http import HTTPStatus

from prometheus_client import CollectorRegistry


def serve_metrics(
    registry: CollectorRegistry,
    host: str,
    port: int,
    readiness: Callable[[], dict] | None = None,
    documents: Callable[[str], tuple[int, object] | None] | None = None,
):
    """Serve ``registry`` at ``http://host:port/metrics`` on a gevent WSGI server; returns the started server.

    ``/healthz`` answers 200 while the process answers at all. ``/readyz`` answers ``readiness()`` as JSON, with
    200 when its ``ready`` is true and 503 otherwise (always 200 without a ``readiness``). ``documents(path)``, when
    given, answers other paths: ``(HTTP status, JSON value)``, or None for the metrics.
    """
    from gevent.pywsgi import WSGIServer
    from prometheus_client import make_wsgi_app

    metrics = make_wsgi_app(registry)

    def app(environ, start_response):
        # WSGI hands the percent-decoded path over as latin-1 characters: its bytes are the URL's UTF-8.
        path = environ.get("PATH_INFO", "").encode("latin-1").decode("utf-8", "replace")
        if path in ("/healthz", "/readyz"):
            state = readiness() if path == "/readyz" and readiness is not None else {"ready": True}
            answer = (200, state) if state.get("ready") else (503, state)
        else:
            answer = documents(path) if documents is not None and path != "/metrics" else None
        if answer is None:
            return metrics(environ, start_response)
        code, document = answer
        body = json.dumps(document, sort_keys=True).encode()
        status = f"{code} {HTTPStatus(code).phrase}"
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    server = WSGIServer((host, port), app, log=None)
    server.start()
    return server
