"""The Prometheus collector: metric families built at scrape time from the ledger.

A custom collector, not prometheus-client's multiprocess mode: the work is done by many
processes on many machines (workers, web processes), and what they did is already in the ledger.
Reading it at scrape time gives every web process the same, complete answer; multiprocess mode
would count only what the scraped machine's own processes saw, needs a shared directory, and
loses a worker's counts when its machine goes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from dashboard.observability import gauges, tally
from dashboard.observability.tally import INSTANCE_BUCKETS, LABELS, STEP_BUCKETS, Series

PREFIX = "runledger"

# Counter families: (tally series, exposed name, help).
COUNTERS = (
    ("started", "instances_started", "Workflow instances created."),
    ("finished", "instances_finished", "Workflow instances that finished, by outcome (complete, completed_with_errors, errored, terminated)."),
    ("attempts", "step_attempts", "Step attempts that ended (succeeded, retried or failed)."),
    ("failures", "step_failures", "Steps that failed for good (retries exhausted or non-retryable)."),
    ("retries", "step_retries", "Step attempts that failed and were scheduled to retry."),
    ("cost", "cost_usd", "Money spent on outside services, in US dollars."),
)
HISTOGRAMS = (
    ("step_seconds", "step_duration_seconds", "Duration of successful step attempts.", STEP_BUCKETS),
    ("instance_seconds", "instance_duration_seconds",
     "Time from an instance's creation to its finish, by outcome.", INSTANCE_BUCKETS),
)


def _by_metric(values: dict[Series, float]) -> dict[str, list[tuple[tuple[str, ...], float]]]:
    out: dict[str, list[tuple[tuple[str, ...], float]]] = {}
    for (metric, labels), value in sorted(values.items()):
        out.setdefault(metric, []).append((labels, value))
    return out


def _le(bound: float) -> str:
    return f"{bound:g}"


def counter_families(values: dict[Series, float]) -> Iterator[Metric]:
    grouped = _by_metric(values)
    for key, name, doc in COUNTERS:
        family = CounterMetricFamily(f"{PREFIX}_{name}", doc, labels=list(LABELS[key]))
        for labels, value in grouped.get(key, []):
            family.add_metric(list(labels), value)
        yield family
    for key, name, doc, bounds in HISTOGRAMS:
        histogram = HistogramMetricFamily(f"{PREFIX}_{name}", doc, labels=list(LABELS[f"{key}_sum"]))
        buckets: dict[tuple[str, ...], list[float]] = {}
        for labels, value in grouped.get(key, []):
            per = buckets.setdefault(labels[:-1], [0.0] * (len(bounds) + 1))
            per[int(labels[-1])] += value
        sums = dict(grouped.get(f"{key}_sum", []))
        for labels, counts in sorted(buckets.items()):
            running, points = 0.0, []
            for bound, n in zip([*map(_le, bounds), "+Inf"], counts, strict=True):
                running += n
                points.append((bound, running))
            histogram.add_metric(list(labels), points, sum_value=sums.get(labels, 0.0))
        yield histogram


def _gauge(name: str, doc: str, labels: list[str], rows: dict[tuple[str, ...], float]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=labels)
    for key, value in sorted(rows.items()):
        family.add_metric(list(key), value)
    return family


def gauge_families(ledger: gauges.Ledger, *, now: datetime) -> Iterator[Metric]:
    yield _gauge("instances_active", "Unfinished instances by status.", ["workflow", "status"],
                 {k: float(v) for k, v in ledger.active.items()})
    yield _gauge("runnable_backlog", "Instances due to run now that no worker holds.", ["workflow"],
                 {(k,): float(v) for k, v in ledger.backlog.items()})
    lag = 0.0 if ledger.oldest_ready_at is None else max(0.0, (now - ledger.oldest_ready_at).total_seconds())
    yield GaugeMetricFamily(f"{PREFIX}_runnable_oldest_age_seconds",
                            "How long the oldest runnable instance has been due (queue lag); 0 when none is.",
                            value=lag)
    yield _gauge("instances_sleeping", "Instances suspended in step.sleep.", ["workflow"],
                 {(k,): float(v) for k, v in ledger.sleeping.items()})
    yield _gauge("instances_waiting_event", "Instances waiting for an event or an approval.", ["workflow"],
                 {(k,): float(v) for k, v in ledger.waiting_event.items()})
    yield _gauge("instances_retry_backoff", "Instances waiting out a step's retry delay.", ["workflow"],
                 {(k,): float(v) for k, v in ledger.backing_off.items()})
    yield _gauge("dead_letters_open", "Dead letters not yet redriven or discarded.", ["workflow"],
                 {(k,): float(v) for k, v in ledger.dead_letters.items()})
    yield _gauge("budget_used_ratio", "Spent / limit of each enabled budget's current period.",
                 ["scope", "key", "period"], {k: v for k, v in ledger.budgets.items()})
    yield GaugeMetricFamily(f"{PREFIX}_workers_live", "Workers holding a live lease on an instance.",
                            value=len(ledger.slots))
    yield _gauge("worker_slots_in_use", "Instances each live worker holds under a lease.", ["worker"],
                 {(k,): float(v) for k, v in ledger.slots.items()})
    age = -1.0 if ledger.last_claim_at is None else max(0.0, (now - ledger.last_claim_at).total_seconds())
    yield GaugeMetricFamily(f"{PREFIX}_worker_last_claim_age_seconds",
                            "Seconds since a worker last claimed an instance; -1: none in the last hour.",
                            value=age)
    ingress = CounterMetricFamily(f"{PREFIX}_ingress_requests", "Ingress requests answered, by route and status.",
                                  labels=["route", "status"])
    for (route, status), n in sorted(ledger.ingress.items()):
        ingress.add_metric([route, status], n)
    yield ingress


class LedgerCollector(Collector):
    """Reads the tally and the ledger once per scrape and yields every family."""

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        now = timezone.now()
        with transaction.atomic():
            if connection.vendor == "postgresql":
                # The scrape's queries each read tens of thousands of rows at most, but their cost
                # estimates (a correlated EXISTS per unfinished instance) pass jit_above_cost: JIT
                # compiling them took 600 ms on the 1 M-instance bench, parallel workers' start-up
                # more than they saved. Both off for this transaction only.
                with connection.cursor() as cursor:  # one round trip for both
                    cursor.execute("SELECT set_config('jit', 'off', true), "
                                   "set_config('max_parallel_workers_per_gather', '0', true)")
            snapshot = tally.tally_snapshot()
            ledger = gauges.ledger_read(now=now)
        yield from counter_families(snapshot.values)
        yield from gauge_families(ledger, now=now)
        yield GaugeMetricFamily(f"{PREFIX}_metrics_lag_rows",
                                "History rows not yet counted by the counters (0 when current).",
                                value=snapshot.lag_rows)
        yield GaugeMetricFamily(f"{PREFIX}_metrics_read_seconds",
                                "Time this scrape spent reading the ledger.", value=time.perf_counter() - started)


def registry() -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(LedgerCollector())
    return reg
