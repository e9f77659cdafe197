"""Circuit breaker benchmark on PostgreSQL. Prints its figures; not a test.

    .venv/bin/python bench/breaker.py                 # 3 repeats, medians
    BENCH_DB=my_bench .venv/bin/python bench/breaker.py --calls 5000 --rounds 200

Figures:
  (a) the cost of a guarded call in each state, per call (median of the repeats' medians):
      closed with no row (a key that never failed: one read), closed with a row (one read),
      open (fail fast: one read and a raised CircuitOpen, no call, no write);
  (b) the half-open guarantee: `--rounds` times, an open breaker past its cooldown and
      `--threads` threads released at once from a barrier, each asking to call; the probes
      observed per round (must be exactly 1 every round) and the refusals.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import engine as base  # noqa: E402 - after the path is set

base.DB_NAME = os.environ.get("BENCH_DB", "runledger_bench_breaker")


def per_call_us(fn, calls: int) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1e6


def call_costs(calls: int) -> dict[str, float]:
    from ingest.engine.breaker import BreakerPolicy
    from ingest.engine.errors import CircuitOpen
    from ingest.engine.models import BreakerTransition, CircuitBreaker
    from ingest.engine.services.breakers import breaker_admit, breaker_record

    BreakerTransition.objects.all().delete()
    CircuitBreaker.objects.all().delete()
    policy = BreakerPolicy(threshold=3, window=timedelta(minutes=1), cooldown=timedelta(hours=1))

    def guarded(key: str) -> None:
        with contextlib.suppress(CircuitOpen):  # open: the call is refused, as intended
            breaker_record(breaker_admit(key=key, policy=policy), ok=True)

    no_row = per_call_us(lambda: guarded("never-failed"), calls)
    breaker_record(breaker_admit(key="one-failure", policy=policy), ok=False)
    with_row = per_call_us(lambda: guarded("one-failure"), calls)
    for _ in range(3):
        breaker_record(breaker_admit(key="down", policy=policy), ok=False)
    assert CircuitBreaker.objects.get(key="down").state == "open"
    open_us = per_call_us(lambda: guarded("down"), calls)
    return {"closed_no_row_us": no_row, "closed_with_row_us": with_row, "open_fail_fast_us": open_us}


def probe_race(rounds: int, threads: int) -> dict[str, object]:
    from django.db import connection

    from ingest.engine.breaker import BreakerPolicy
    from ingest.engine.errors import CircuitOpen
    from ingest.engine.models import CircuitBreaker
    from ingest.engine.services.breakers import breaker_admit, breaker_record

    policy = BreakerPolicy(
        threshold=1, window=timedelta(minutes=1), cooldown=timedelta(milliseconds=1), probe_timeout=timedelta(hours=1)
    )
    CircuitBreaker.objects.filter(key="race").delete()
    breaker_record(breaker_admit(key="race", policy=policy), ok=False)
    probes_per_round: list[int] = []
    refused_per_round: list[int] = []
    for _ in range(rounds):
        # Open, its cooldown over: the next callers race for the one probe.
        CircuitBreaker.objects.filter(key="race").update(state="open", probe_started_at=None)
        time.sleep(0.002)
        barrier = threading.Barrier(threads)
        outcome: list[str] = []
        lock = threading.Lock()

        def caller(barrier: threading.Barrier, outcome: list[str], lock: threading.Lock) -> None:
            barrier.wait()
            try:
                ticket = breaker_admit(key="race", policy=policy)
                result = "probe" if ticket.probe else "go"
            except CircuitOpen:
                result = "refused"
            with lock:
                outcome.append(result)

        workers = [threading.Thread(target=caller, args=(barrier, outcome, lock)) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        probes_per_round.append(outcome.count("probe"))
        refused_per_round.append(outcome.count("refused"))
    connection.close()
    return {
        "rounds": rounds,
        "threads": threads,
        "probes_min": min(probes_per_round),
        "probes_max": max(probes_per_round),
        "rounds_with_exactly_one_probe": probes_per_round.count(1),
        "refused_median": statistics.median(refused_per_round),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    base.setup_django()
    runs = [call_costs(args.calls) for _ in range(args.repeats)]
    costs = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    race = probe_race(args.rounds, args.threads)
    print(
        json.dumps({"call_cost_median_us": costs, "half_open_race": race, "loadavg_1m": os.getloadavg()[0]}, indent=2)
    )


if __name__ == "__main__":
    main()
