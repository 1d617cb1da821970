"""``GET /metrics`` of ``proctor serve``: Prometheus text format (``prometheus-client``).

Counters (``_total``): ``proctor_http_requests{route, code}``, ``proctor_rollouts{status}``
(records returned: ``scored`` or ``error``), ``proctor_rollout_errors{kind}`` (error
records by ``error.kind``), ``proctor_requests_cancelled`` (clients that went away).
Histograms (seconds): ``proctor_request_seconds{route}`` (what a scoring request waited:
queue and scoring), ``proctor_rollout_seconds`` (``timing.total_s`` of each record).
Gauges, read when scraped: ``proctor_rollouts_in_flight`` (holding a sandbox slot),
``proctor_rollouts_queued`` (admitted, not holding one yet), ``proctor_sandbox_slots``
(``--workers``), ``proctor_sandboxes_live`` and ``proctor_sandboxes_peak`` (sandboxes of
the server process open now / at most at once), ``proctor_rollouts_per_minute`` (records
returned in the last minute, or since start when younger), and
``proctor_request_latency_seconds{quantile="0.5"|"0.95"}`` (p50 / p95 of the last
:data:`RECENT` scoring requests).

``GET /v1/live`` (:meth:`ServeMetrics.live`) is the same state as JSON with the last
records returned, for the live page at ``/``.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from proctor.record import RewardRecord

RECENT = 1000
#: Records kept for the live page (``GET /v1/live``), newest first.
RECENT_RECORDS = 100
BUCKETS = (0.5, 1, 2, 4, 6, 8, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ServeMetrics:
    """The server's metrics in a registry of its own (several servers in one process keep
    theirs apart). ``gauges()`` returns the current ``{"in_flight", "queued", "slots",
    "live", "peak"}``. Thread-safe."""

    def __init__(self, gauges: Callable[[], dict[str, int]], clock=time.monotonic) -> None:
        self.registry = CollectorRegistry()
        self._gauges, self._clock = gauges, clock
        self._start = clock()
        self._lock = threading.Lock()
        self._done: deque[float] = deque()  # times records were returned, last minute
        self._latency: deque[float] = deque(maxlen=RECENT)
        self._recent: deque[dict] = deque(maxlen=RECENT_RECORDS)
        self._totals: dict[str, int] = {"scored": 0, "error": 0}
        self._error_kinds: dict[str, int] = {}
        r = self.registry
        self.requests = Counter("proctor_http_requests", "HTTP requests answered",
                                ["route", "code"], registry=r)
        self.rollouts = Counter("proctor_rollouts", "Records returned, by status",
                                ["status"], registry=r)
        self.errors = Counter("proctor_rollout_errors", "Error records returned, by kind",
                              ["kind"], registry=r)
        self.cancelled = Counter("proctor_requests_cancelled",
                                 "Scoring requests cancelled: the client went away",
                                 registry=r)
        self.request_s = Histogram("proctor_request_seconds",
                                   "Wall time of scoring requests (queue and scoring)",
                                   ["route"], buckets=BUCKETS, registry=r)
        self.rollout_s = Histogram("proctor_rollout_seconds",
                                   "Scoring time of one rollout (record timing.total_s)",
                                   buckets=BUCKETS, registry=r)
        r.register(_Live(self))

    def records(self, recs: list[RewardRecord]) -> None:
        """Count records returned to a client: by status, errors by kind, each one's
        ``timing.total_s`` in the rollout histogram, and their return time for
        :meth:`per_minute`."""
        now = self._clock()
        for rec in recs:
            self.rollouts.labels(rec.status).inc()
            if rec.status == "error" and rec.error is not None:
                self.errors.labels(rec.error.kind).inc()
            self.rollout_s.observe(float(rec.timing.get("total_s", 0.0)))
        wall = time.time()
        with self._lock:
            self._done.extend([now] * len(recs))
            for rec in recs:
                self._totals[rec.status] = self._totals.get(rec.status, 0) + 1
                if rec.status == "error" and rec.error is not None:
                    kind = rec.error.kind
                    self._error_kinds[kind] = self._error_kinds.get(kind, 0) + 1
                self._recent.appendleft(_recent_row(rec, wall))

    def request(self, route: str, seconds: float) -> None:
        """Record one scoring request's wall time (``seconds``, queueing included) under its
        ``route``, also for :meth:`quantiles`."""
        self.request_s.labels(route).observe(seconds)
        with self._lock:
            self._latency.append(seconds)

    def per_minute(self) -> float:
        """Records returned in the last 60 s, as a rate per minute; a server younger than a
        minute divides by its age (at least 1 s) instead."""
        now = self._clock()
        with self._lock:
            while self._done and self._done[0] < now - 60:
                self._done.popleft()
            n = len(self._done)
        window = min(60.0, max(1.0, now - self._start))
        return n * 60.0 / window

    def quantiles(self) -> dict[str, float]:
        """p50 and p95 of the recent scoring requests (0.0 before the first)."""
        with self._lock:
            data = sorted(self._latency)
        if not data:
            return {"0.5": 0.0, "0.95": 0.0}
        if len(data) == 1:
            return {"0.5": data[0], "0.95": data[0]}
        q = statistics.quantiles(data, n=100, method="inclusive")
        return {"0.5": q[49], "0.95": q[94]}

    def p50(self) -> float:
        """Median wall time (seconds) of the recent scoring requests; 0.0 before the
        first."""
        return self.quantiles()["0.5"]

    def live(self) -> dict:
        """What the live page shows, read now: the gauges (``in_flight``, ``queued``,
        ``slots``, ``live``, ``peak``), ``per_minute``, ``latency_s`` (p50 / p95 of recent
        requests, seconds), ``totals`` (records returned by status), ``error_kinds``,
        ``uptime_s`` and ``recent``: the last :data:`RECENT_RECORDS` records returned,
        newest first, each ``{rollout_id, task_id, status, reward, gate, reason, error,
        seconds, at}`` (``at``: Unix time it was returned)."""
        gauges = self._gauges()
        with self._lock:
            totals, kinds = dict(self._totals), dict(self._error_kinds)
            recent = list(self._recent)
        return {**gauges, "per_minute": self.per_minute(), "latency_s": self.quantiles(),
                "totals": totals, "error_kinds": kinds,
                "uptime_s": self._clock() - self._start, "recent": recent}

    def text(self) -> bytes:
        """Every metric in the Prometheus text format (:data:`CONTENT_TYPE`), gauges read
        now."""
        return generate_latest(self.registry)


def _recent_row(rec: RewardRecord, at: float) -> dict:
    error = f"{rec.error.kind}: {rec.error.message[:300]}" if rec.error else None
    return {"rollout_id": rec.rollout_id, "task_id": rec.task_id, "status": rec.status,
            "reward": rec.reward, "gate": rec.verdict.gate if rec.verdict else None,
            "reason": rec.reason, "error": error, "seconds": rec.timing.get("total_s"),
            "at": at}


class _Live:
    """Gauges read when scraped."""

    def __init__(self, metrics: ServeMetrics) -> None:
        self.m = metrics

    def collect(self):
        g = self.m._gauges()
        for name, key, doc in (
                ("proctor_rollouts_in_flight", "in_flight", "Rollouts holding a sandbox slot"),
                ("proctor_rollouts_queued", "queued",
                 "Rollouts admitted and not holding a sandbox slot yet"),
                ("proctor_sandbox_slots", "slots", "Server-wide sandbox slots (--workers)"),
                ("proctor_sandboxes_live", "live", "Sandboxes of the server open now"),
                ("proctor_sandboxes_peak", "peak", "Most sandboxes of the server open at once")):
            yield GaugeMetricFamily(name, doc, value=g[key])
        yield GaugeMetricFamily("proctor_rollouts_per_minute",
                                "Records returned in the last minute (since start if younger)",
                                value=self.m.per_minute())
        lat = GaugeMetricFamily("proctor_request_latency_seconds",
                                f"p50 / p95 of the last {RECENT} scoring requests",
                                labels=["quantile"])
        for q, v in self.m.quantiles().items():
            lat.add_metric([q], v)
        yield lat
