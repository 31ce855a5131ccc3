"""Serving a Prometheus registry at ``/metrics`` over HTTP, for a coordinator node and a consumer alike.

IO: gevent's WSGI server on the calling thread's hub; imported lazily by whoever serves metrics.
"""

from prometheus_client import CollectorRegistry


def serve_metrics(registry: CollectorRegistry, host: str, port: int):
    """Serve ``registry`` at ``http://host:port/metrics`` on a gevent WSGI server; returns the started server."""
    from gevent.pywsgi import WSGIServer
    from prometheus_client import make_wsgi_app

    server = WSGIServer((host, port), make_wsgi_app(registry), log=None)
    server.start()
    return server
