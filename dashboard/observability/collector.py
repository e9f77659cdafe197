"""The Prometheus collector: metric families built at scrape time from the ledger.

A custom collector, not prometheus-client's multiprocess mode: the work is done by many
processes on many machines (workers, web processes), and what they did is already in the ledger.
Reading it at scrape time gives every web process the same, complete answer; multiprocess mode
would count only what the scraped machine's own processes saw, needs a shared directory, and
loses a worker's counts when its machine goes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone
from prometheus_client import generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from dashboard.observability import gauges, tally
from dashboard.observability.tally import INSTANCE_BUCKETS, LABELS, STEP_BUCKETS, Series
from ingest.engine import ByVendor

PREFIX = "runledger"

# Counter families: (tally series, exposed name, help).
COUNTERS = (
    ("started", "instances_started", "Workflow instances created."),
    (
        "finished",
        "instances_finished",
        "Workflow instances that finished, by outcome (complete, completed_with_errors, errored, terminated).",
    ),
    ("attempts", "step_attempts", "Step attempts that ended (succeeded, retried or failed)."),
    ("failures", "step_failures", "Steps that failed for good (retries exhausted or non-retryable)."),
    ("retries", "step_retries", "Step attempts that failed and were scheduled to retry."),
    ("cost", "cost_usd", "Money spent on outside services, in US dollars."),
)
HISTOGRAMS = (
    ("step_seconds", "step_duration_seconds", "Duration of successful step attempts.", STEP_BUCKETS),
    (
        "instance_seconds",
        "instance_duration_seconds",
        "Time from an instance's creation to its finish, by outcome.",
        INSTANCE_BUCKETS,
    ),
)


def _by_metric(values: dict[Series, float]) -> dict[str, list[tuple[tuple[str, ...], float]]]:
    out: dict[str, list[tuple[tuple[str, ...], float]]] = {}
    for (metric, labels), value in sorted(values.items()):
        out.setdefault(metric, []).append((labels, value))
    return out


def _le(bound: float) -> str:
    return f"{bound:g}"


def _histogram_series(
    grouped: dict[str, list[tuple[tuple[str, ...], float]]], key: str, bounds: Iterable[float]
) -> Iterator[tuple[tuple[str, ...], list[tuple[str, float]], float]]:
    """Each label set of histogram `key` (sorted): its cumulative (le, count) points, the last
    one +Inf, and its sum. The tally keeps one count per bucket, its index the last label."""
    les = [*map(_le, bounds), "+Inf"]
    buckets: dict[tuple[str, ...], list[float]] = {}
    for labels, value in grouped.get(key, []):
        per = buckets.setdefault(labels[:-1], [0.0] * len(les))
        per[int(labels[-1])] += value
    sums = dict(grouped.get(f"{key}_sum", []))
    for labels, counts in sorted(buckets.items()):
        running, points = 0.0, []
        for bound, n in zip(les, counts, strict=True):
            running += n
            points.append((bound, running))
        yield labels, points, sums.get(labels, 0.0)


def counter_families(values: dict[Series, float]) -> Iterator[Metric]:
    grouped = _by_metric(values)
    for key, name, doc in COUNTERS:
        family = CounterMetricFamily(f"{PREFIX}_{name}", doc, labels=list(LABELS[key]))
        for labels, value in grouped.get(key, []):
            family.add_metric(list(labels), value)
        yield family
    for key, name, doc, bounds in HISTOGRAMS:
        histogram = HistogramMetricFamily(f"{PREFIX}_{name}", doc, labels=list(LABELS[f"{key}_sum"]))
        for labels, points, total in _histogram_series(grouped, key, bounds):
            histogram.add_metric(list(labels), points, sum_value=total)
        yield histogram


def _gauge(name: str, doc: str, labels: list[str], rows: dict[tuple[str, ...], float]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=labels)
    for key, value in sorted(rows.items()):
        family.add_metric(list(key), value)
    return family


def gauge_families(ledger: gauges.Ledger, *, now: datetime) -> Iterator[Metric]:
    yield _gauge(
        "instances_active",
        "Unfinished instances by status.",
        ["workflow", "status"],
        {k: float(v) for k, v in ledger.active.items()},
    )
    yield _gauge(
        "runnable_backlog",
        "Instances due to run now that no worker holds.",
        ["workflow"],
        {(k,): float(v) for k, v in ledger.backlog.items()},
    )
    lag = 0.0 if ledger.oldest_ready_at is None else max(0.0, (now - ledger.oldest_ready_at).total_seconds())
    yield GaugeMetricFamily(
        f"{PREFIX}_runnable_oldest_age_seconds",
        "How long the oldest runnable instance has been due (queue lag); 0 when none is.",
        value=lag,
    )
    yield _gauge(
        "instances_sleeping",
        "Instances suspended in step.sleep.",
        ["workflow"],
        {(k,): float(v) for k, v in ledger.sleeping.items()},
    )
    yield _gauge(
        "instances_waiting_event",
        "Instances waiting for an event or an approval.",
        ["workflow"],
        {(k,): float(v) for k, v in ledger.waiting_event.items()},
    )
    yield _gauge(
        "instances_retry_backoff",
        "Instances waiting out a step's retry delay.",
        ["workflow"],
        {(k,): float(v) for k, v in ledger.backing_off.items()},
    )
    yield _gauge(
        "dead_letters_open",
        "Dead letters not yet redriven or discarded.",
        ["workflow"],
        {(k,): float(v) for k, v in ledger.dead_letters.items()},
    )
    yield _gauge(
        "budget_used_ratio",
        "Spent / limit of each enabled budget's current period.",
        ["scope", "key", "period"],
        {k: v for k, v in ledger.budgets.items()},
    )
    yield GaugeMetricFamily(
        f"{PREFIX}_workers_live", "Workers holding a live lease on an instance.", value=len(ledger.slots)
    )
    yield _gauge(
        "worker_slots_in_use",
        "Instances each live worker holds under a lease.",
        ["worker"],
        {(k,): float(v) for k, v in ledger.slots.items()},
    )
    age = -1.0 if ledger.last_claim_at is None else max(0.0, (now - ledger.last_claim_at).total_seconds())
    yield GaugeMetricFamily(
        f"{PREFIX}_worker_last_claim_age_seconds",
        "Seconds since a worker last claimed an instance; -1: none in the last hour.",
        value=age,
    )
    ingress = CounterMetricFamily(
        f"{PREFIX}_ingress_requests", "Ingress requests answered, by route and status.", labels=["route", "status"]
    )
    for (route, status), n in sorted(ledger.ingress.items()):
        ingress.add_metric([route, status], n)
    yield ingress


def _read() -> tuple[tally.Snapshot, gauges.Ledger, datetime, float]:
    """The tally and the ledger's state, read once: (snapshot, ledger, now, seconds it took)."""
    started = time.perf_counter()
    now = timezone.now()
    with transaction.atomic():
        _plan_for_scrape()()
        snapshot = tally.tally_snapshot()
        ledger = gauges.ledger_read(now=now)
    return snapshot, ledger, now, time.perf_counter() - started


def _no_jit_no_parallel() -> None:
    """PostgreSQL: the scrape's queries each read tens of thousands of rows at most, but their cost
    estimates (a correlated EXISTS per unfinished instance) pass jit_above_cost: JIT compiling them
    took 600 ms on the 1 M-instance bench, parallel workers' start-up more than they saved. Both
    off for this transaction only."""
    with connection.cursor() as cursor:  # one round trip for both
        cursor.execute(
            "SELECT set_config('jit', 'off', true), set_config('max_parallel_workers_per_gather', '0', true)"
        )


def _as_planned() -> None:
    """SQLite: no JIT, no parallel workers; nothing to turn off."""


_plan_for_scrape = ByVendor[Callable[[], None]](postgresql=_no_jit_no_parallel, sqlite=_as_planned)


def tail_families(
    ledger: gauges.Ledger, snapshot: tally.Snapshot, *, now: datetime, read_seconds: float
) -> Iterator[Metric]:
    """Every family after the counters: the gauges and the scrape's own two."""
    yield from gauge_families(ledger, now=now)
    yield GaugeMetricFamily(
        f"{PREFIX}_metrics_lag_rows",
        "History rows not yet counted by the counters (0 when current).",
        value=snapshot.lag_rows,
    )
    yield GaugeMetricFamily(
        f"{PREFIX}_metrics_read_seconds", "Time this scrape spent reading the ledger.", value=read_seconds
    )


class LedgerCollector(Collector):
    """Reads the tally and the ledger once per scrape and yields every family."""

    def collect(self) -> Iterator[Metric]:
        snapshot, ledger, now, seconds = _read()
        yield from counter_families(snapshot.values)
        yield from tail_families(ledger, snapshot, now=now, read_seconds=seconds)


class _Families(Collector):
    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def registry() -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(LedgerCollector())
    return reg


def exposition() -> bytes:
    """What `generate_latest(registry())` answers, byte for byte, made faster: the counters and
    histograms (most of a scrape's samples: a series per workflow, step, tenant and service, a
    line per histogram bucket) are written by `counter_text`, which renders each series' name
    and labels once per process; the gauges go through prometheus-client as they are."""
    snapshot, ledger, now, seconds = _read()
    tail = generate_latest(_Families(tail_families(ledger, snapshot, now=now, read_seconds=seconds)))
    return counter_text(snapshot.values).encode() + tail


# ---- the counters' text ----------------------------------------------------------------------

_PREFIXES: dict[tuple[str, tuple[str, ...], tuple[str, ...]], str] = {}
_PREFIXES_MAX = 100_000  # series are bounded (docs/observability.md); this only caps the cache


def _help(doc: str) -> str:
    return doc.replace("\\", r"\\").replace("\n", r"\n")


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _line(name: str, names: tuple[str, ...], values: tuple[str, ...], value: float) -> str:
    """A sample line as prometheus-client's text format writes it (labels sorted by name)."""
    key = (name, names, values)
    prefix = _PREFIXES.get(key)
    if prefix is None:
        labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(zip(names, values, strict=True)))
        prefix = f"{name}{{{labels}}}" if labels else name
        if len(_PREFIXES) < _PREFIXES_MAX:
            _PREFIXES[key] = prefix
    return f"{prefix} {floatToGoString(value)}\n"  # type: ignore[no-untyped-call]


def counter_text(values: dict[Series, float]) -> str:
    """`counter_families(values)` in the Prometheus text format, as generate_latest writes it."""
    grouped = _by_metric(values)
    out: list[str] = []
    for key, name, doc in COUNTERS:
        full = f"{PREFIX}_{name}_total"
        out.append(f"# HELP {full} {_help(doc)}\n# TYPE {full} counter\n")
        names = LABELS[key]
        out.extend(_line(full, names, labels, value) for labels, value in grouped.get(key, []))
    for key, name, doc, bounds in HISTOGRAMS:
        full = f"{PREFIX}_{name}"
        out.append(f"# HELP {full} {_help(doc)}\n# TYPE {full} histogram\n")
        names = LABELS[f"{key}_sum"]
        bucket_names = (*names, "le")
        for labels, points, total in _histogram_series(grouped, key, bounds):
            out.extend(_line(f"{full}_bucket", bucket_names, (*labels, bound), n) for bound, n in points)
            out.append(_line(f"{full}_count", names, labels, points[-1][1]))
            out.append(_line(f"{full}_sum", names, labels, total))
    return "".join(out)
