"""``zkcoord lag serve``: the latest evaluation of every group over HTTP, Burrow's paths and Prometheus' metrics.

``/v3/kafka/<cluster>/consumer`` lists the groups, ``.../consumer/<group>/status`` a group's status with the
partitions that are not OK, ``.../consumer/<group>/lag`` with every partition (404 and NOTFOUND for a group not
watched); ``/metrics`` has kafka_exporter's names. A native thread observes and evaluates every ``--interval``
seconds (kazoo and kafka-python block); the gevent WSGI server answers from the newest evaluation it left.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading

from kazoo.exceptions import KazooException

from zkcoord.cli.common import EXIT_OK
from zkcoord.errors import ZkcoordError
from zkcoord.lag import GroupLag, GroupStatus, report

_GROUP_PATH = re.compile(r"^/v3/kafka/(?P<cluster>[^/]+)/consumer/(?P<group>[^/]+)/(?P<view>status|lag)$")
_LIST_PATH = re.compile(r"^/v3/kafka/(?P<cluster>[^/]+)/consumer/?$")


class LatestEvaluation:
    """The newest evaluation, replaced whole (one assignment), so a reader never sees half of one."""

    def __init__(self, cluster: str, lags: list[GroupLag]):
        self.cluster = cluster
        self.lags = {lag.group_id: lag for lag in lags}

    def collect(self):
        """The prometheus_client collector protocol: the metric families of the newest evaluation."""
        return report.metric_families(list(self.lags.values()))

    def document(self, path: str) -> tuple[int, object] | None:
        """Burrow's answer for ``path``; None for a path that is not Burrow's (the metrics)."""
        lags = self.lags
        if (match := _LIST_PATH.match(path)) is not None:
            if match["cluster"] != self.cluster:
                return 404, _error(f"cluster {match['cluster']} not found")
            return 200, {"error": False, "message": "consumer list returned", "consumers": sorted(lags)}
        if (match := _GROUP_PATH.match(path)) is None:
            return None
        if match["cluster"] != self.cluster:
            return 404, _error(f"cluster {match['cluster']} not found")
        lag = lags.get(match["group"]) or GroupLag(match["group"], GroupStatus.NOTFOUND, ())
        document = report.group_json(self.cluster, lag, show_all=match["view"] == "lag")
        found = lag.status != GroupStatus.NOTFOUND
        return (200 if found else 404), {
            "error": not found,
            "message": "consumer status returned" if found else "cluster or consumer not found",
            "status": document,
        }


def _error(message: str) -> dict:
    return {"error": True, "message": message}


def serve(evaluation, first: list[GroupLag], args: argparse.Namespace) -> int:
    """Serve until Ctrl-C or SIGTERM; each evaluation's failure is one line on stderr, the last good one stays."""
    import gevent
    from prometheus_client import CollectorRegistry

    from zkcoord.metrics_http import serve_metrics

    latest = LatestEvaluation(args.cluster, first)
    registry = CollectorRegistry()
    registry.register(_Delegate(lambda: latest))
    stop = threading.Event()

    def evaluate_forever() -> None:
        nonlocal latest
        while not stop.wait(args.interval):
            try:
                latest = LatestEvaluation(args.cluster, evaluation.run())
            except (ZkcoordError, KazooException, OSError) as error:
                print(f"warning: evaluation failed, serving the previous one: {error}", file=sys.stderr, flush=True)

    server = serve_metrics(registry, args.host, args.port, documents=lambda path: latest.document(path))
    interrupted = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda number, _: (interrupted.append(number), stop.set()))
    evaluator = threading.Thread(target=evaluate_forever, name="lag-evaluation", daemon=True)
    evaluator.start()
    print(f"serving consumer lag on http://{args.host}:{server.server_port}/metrics", flush=True)
    try:
        while not stop.is_set():
            gevent.sleep(0.2)
    finally:
        server.stop()
        stop.set()
        evaluator.join(timeout=args.timeout / 1000.0 + args.interval)
    if signal.SIGINT in interrupted:
        raise KeyboardInterrupt
    return EXIT_OK


class _Delegate:
    """A registered collector that reads whichever evaluation is newest when scraped."""

    def __init__(self, latest):
        self._latest = latest

    def collect(self):
        return self._latest().collect()
