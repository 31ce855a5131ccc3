"""Serving a Prometheus registry at ``/metrics`` over HTTP, for a coordinator node and a consumer alike, with
``/healthz`` (the process answers) and ``/readyz`` (the process says it can serve) for supervisors' probes.

IO: gevent's WSGI server on the calling thread's hub; imported lazily by whoever serves metrics.
"""

import json
from collections.abc import Callable

from prometheus_client import CollectorRegistry


def serve_metrics(registry: CollectorRegistry, host: str, port: int, readiness: Callable[[], dict] | None = None):
    """Serve ``registry`` at ``http://host:port/metrics`` on a gevent WSGI server; returns the started server.

    ``/healthz`` answers 200 while the process answers at all. ``/readyz`` answers ``readiness()`` as JSON, with
    200 when its ``ready`` is true and 503 otherwise (always 200 without a ``readiness``).
    """
    from gevent.pywsgi import WSGIServer
    from prometheus_client import make_wsgi_app

    metrics = make_wsgi_app(registry)

    def app(environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path not in ("/healthz", "/readyz"):
            return metrics(environ, start_response)
        state = readiness() if path == "/readyz" and readiness is not None else {"ready": True}
        status = "200 OK" if state.get("ready") else "503 Service Unavailable"
        body = json.dumps(state, sort_keys=True).encode()
        start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    server = WSGIServer((host, port), app, log=None)
    server.start()
    return server
