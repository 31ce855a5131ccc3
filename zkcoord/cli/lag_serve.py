"""``zkcoord lag serve``: the latest evaluation of every group over HTTP, Burrow's paths and Prometheus' metrics.

``/v3/kafka/<cluster>/consumer`` lists the groups, ``.../consumer/<group>/status`` a group's status with the
partitions that are not OK, ``.../consumer/<group>/lag`` with every partition (404 and NOTFOUND for a group not
watched); ``/metrics`` has kafka_exporter's names; ``/readyz`` fails while the numbers are stale; other paths
are 404. A native thread observes and evaluates every ``--interval`` seconds (kazoo and kafka-python block); the
gevent WSGI server answers from the newest evaluation it left.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
import time
import traceback

from kazoo.exceptions import KazooException
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from zkcoord.cli.common import EXIT_OK
from zkcoord.errors import ZkcoordError
from zkcoord.lag import GroupLag, GroupStatus, report

# A group id may hold "/" (sent as %2F, which WSGI decodes): the group is all between "consumer/" and the view.
_GROUP_PATH = re.compile(r"^/v3/kafka/(?P<cluster>[^/]+)/consumer/(?P<group>.+)/(?P<view>status|lag)$")
_LIST_PATH = re.compile(r"^/v3/kafka/(?P<cluster>[^/]+)/consumer/?$")


class LatestEvaluation:
    """The newest evaluation, replaced whole (one assignment), so a reader never sees half of one."""

    def __init__(self, cluster: str, lags: list[GroupLag]):
        self.cluster = cluster
        self.lags = {lag.group_id: lag for lag in lags}

    def collect(self):
        """The prometheus_client collector protocol: the metric families of the newest evaluation."""
        return report.metric_families(list(self.lags.values()))

    def document(self, path: str) -> tuple[int, object]:
        """Burrow's answer for ``path``; 404 for a path that is not Burrow's (nor /metrics, /healthz, /readyz)."""
        lags = self.lags
        if (match := _LIST_PATH.match(path)) is not None:
            if match["cluster"] != self.cluster:
                return 404, _error(f"cluster {match['cluster']} not found")
            return 200, {"error": False, "message": "consumer list returned", "consumers": sorted(lags)}
        if (match := _GROUP_PATH.match(path)) is None:
            return 404, _error(f"no such path: {path}")
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


STALE_INTERVALS = 3  # /readyz fails when the last good evaluation is older than this many intervals (and a timeout)


class EvaluationHealth:
    """How the evaluation thread is doing: when it last succeeded, how often it failed, whether it runs."""

    def __init__(self, interval_s: float, timeout_s: float, thread: threading.Thread):
        self.last_success = time.time()  # the first evaluation, before serving
        self.failures = 0
        self._stale_after = STALE_INTERVALS * interval_s + timeout_s
        self._thread = thread

    def collect(self):
        yield GaugeMetricFamily(
            "zkcoord_lag_last_success_timestamp_seconds",
            "When the last evaluation succeeded (Unix time); the series keep its values while evaluations fail",
            value=self.last_success,
        )
        yield CounterMetricFamily(
            "zkcoord_lag_evaluation_failures", "Evaluations that failed since the start", value=self.failures
        )

    def readiness(self) -> dict:
        age = time.time() - self.last_success
        alive = self._thread.is_alive()
        return {"ready": alive and age <= self._stale_after, "evaluating": alive, "last_success_age_s": round(age, 3)}


def serve(evaluation, first: list[GroupLag], args: argparse.Namespace) -> int:
    """Serve until Ctrl-C or SIGTERM; each evaluation's failure is logged, the last good one stays."""
    import gevent
    from prometheus_client import CollectorRegistry

    from zkcoord.metrics_http import serve_metrics

    latest = LatestEvaluation(args.cluster, first)
    stop = threading.Event()

    def evaluate_forever() -> None:
        nonlocal latest
        while not stop.wait(args.interval):
            try:
                latest = LatestEvaluation(args.cluster, evaluation.run())
                health.last_success = time.time()
            except (ZkcoordError, KazooException, OSError) as error:
                health.failures += 1
                print(f"warning: evaluation failed, serving the previous one: {error}", file=sys.stderr, flush=True)
            except Exception:  # a bug or a client library's surprise must not stop the evaluations for good
                health.failures += 1
                print("warning: evaluation failed, serving the previous one:", file=sys.stderr)
                traceback.print_exc(file=sys.stderr)
                sys.stderr.flush()

    evaluator = threading.Thread(target=evaluate_forever, name="lag-evaluation", daemon=True)
    health = EvaluationHealth(args.interval, args.timeout / 1000.0, evaluator)
    registry = CollectorRegistry()
    registry.register(_Delegate(lambda: latest))
    registry.register(health)
    server = serve_metrics(
        registry, args.host, args.port, readiness=health.readiness, documents=lambda path: latest.document(path)
    )
    interrupted = []
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum in previous:
        signal.signal(signum, lambda number, _: (interrupted.append(number), stop.set()))
    evaluator.start()
    print(f"serving consumer lag on http://{args.host}:{server.server_port}/metrics", flush=True)
    try:
        while not stop.is_set():
            gevent.sleep(0.2)
    finally:
        server.stop()
        stop.set()
        evaluator.join(timeout=args.timeout / 1000.0 + args.interval)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if signal.SIGINT in interrupted:
        raise KeyboardInterrupt
    return EXIT_OK


class _Delegate:
    """A registered collector that reads whichever evaluation is newest when scraped."""

    def __init__(self, latest):
        self._latest = latest

    def collect(self):
        return self._latest().collect()
