"""Pipeline benchmark: 1,000 Gong calls through `gong-ingest` on 2 worker processes (PostgreSQL),
extracting through a fake OpenAI-compatible API that answers in 200 ms.

    .venv/bin/python bench/pipelines.py --calls 1000 --concurrency 8 --runs 3

What it does: creates and migrates its own database (`runledger_bench_pipelines` on the local
PostgreSQL, or DATABASE_URL), starts the fake OpenAI server (tests/fakes) with `delay = 0.2`, and
two `manage.py worker` processes configured through the environment to extract with the
OpenAI-compatible client at the fake's URL (RUNLEDGER_LLM_*), pricing with the price table
(RUNLEDGER_PRICER), embeddings off unless --embeddings. Each run clears the bench tenant's rows,
creates the instances with transcripts inline (create_batch, 100 at a time) and waits until
all have finished.

It prints, per run and as medians: the wall time from the first create to the last completion
against the goal (1.3 × calls × delay ÷ total concurrency), the LLM calls the fake received
(exactly one per call when nothing fails), how long an instance holds its slot (from its first
attempt to its end) split into the LLM step, the other steps' code and the time between steps
(the engine: each step's commit, replay, the next step's start), how much of the wall time the
slots were held, and how the workers' thread-time splits between the LLM calls, the rest of the
step code (fact writes, budgets, costs) and the engine (claiming, replay, ledger writes, idle
gaps between turns).

The headline is CPU per call, workers + PostgreSQL, against the goal of 18 ms: the box is usually
CPU-bound and shared, so the wall time drifts with the load while CPU per call does not. It does
drift with the machine (a CPU-second of one does less than another's), so a `machine:` line first
prices this machine's CPU: a fixed Python loop, and a prepared round trip on both sides. It is
read from /proc: the worker processes and the PostgreSQL backends serving this database (sampled
while the run lasts, so a backend that exits is still counted); this process's own (instance
creation and the fake LLM, which runs the rule extractor to answer) is printed apart. With --profile, py-spy samples
each worker and the report splits the workers' CPU by concern (engine; the pipeline's own steps: facts, prefilter,
signal row; costs, budgets and pricing; the LLM client; other), with each concern's share of
the busy threads and of the time spent waiting on PostgreSQL round trips. With --budgets the
tenant and the workflow have budgets, so every extraction also reserves and settles on two.

The last line sets that CPU against the engine's own: `bench/engine_cpu.py` (22 no-op steps per
instance, shaped like a call's, one instance at a time) runs before the first run and after
each run, on the same database server, from the same checkout. Each run's ratio is its CPU per
call (workers + PostgreSQL) over the mean of the engine's CPU per instance (its process + its
PostgreSQL backends) measured just before and just after it, and the bench prints the median
of the runs' ratios as `gong call = N.Nx the engine's 22-step instance`. A ratio measured in
the same minutes holds on any machine, and through a shared machine's swings of load, where a
figure in milliseconds does not. `--engine-instances 0` skips it.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/runledger_bench_pipelines"
TENANT = "bench"


def ensure_database(url: str) -> None:
    from urllib.parse import urlparse

    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def clear() -> None:
    from django.db.models import Q

    from ingest.engine.models import ApiCost, Budget, DeadLetter, History, Instance
    from ingest.pipelines.models import Fact, FactHead, SignalEvaluation

    History.objects.filter(tenant=TENANT).delete()
    ApiCost.objects.filter(tenant=TENANT).delete()
    DeadLetter.objects.filter(tenant=TENANT).delete()
    Instance.objects.filter(tenant=TENANT).delete()
    Fact.objects.filter(tenant=TENANT).delete()
    FactHead.objects.filter(tenant=TENANT).delete()
    SignalEvaluation.objects.filter(tenant=TENANT).delete()
    Budget.objects.filter(Q(scope="tenant", key=TENANT) | Q(scope="workflow", key="gong-ingest")).delete()
    # Each run writes the same deterministic fact ids again: without a vacuum every run found
    # the previous runs' dead rows in its index scans and got slower (PostgreSQL CPU per call
    # 17 -> 29 -> 33 -> 43 ms over four runs).
    from django.db import connection

    if connection.vendor == "postgresql":
        import psycopg

        from ingest.engine.pg import connection_string

        with psycopg.connect(connection_string(), autocommit=True) as conn:
            conn.execute(
                "VACUUM (ANALYZE) engine_instance, engine_step, engine_attempt, engine_history, "
                "api_costs, ingest_fact, ingest_facthead, ingest_signalevaluation"
            )


def add_budgets() -> None:
    """A day budget for the tenant and a month budget for the workflow, far above what the run
    spends: every extraction reserves on both and settles both, as a metered tenant would."""
    from ingest.engine.services.budgets import budget_upsert

    budget_upsert(scope="tenant", key=TENANT, period="day", limit="1000", policy="fail")
    budget_upsert(scope="workflow", key="gong-ingest", period="month", limit="1000", policy="fail")


def start_workers(n: int, concurrency: int, env: dict[str, str]) -> list[subprocess.Popen[str]]:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "worker",
                "--concurrency",
                str(concurrency),
                "--poll",
                "0.2",
                "--id",
                f"bench-{i}",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(n)
    ]
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "started" not in line:
            raise SystemExit(f"a worker did not start: {line!r}")
    return procs


def stop_workers(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(timeout=120)


def create_instances(calls: list[Any], run: int) -> None:
    from ingest.engine import create_batch
    from ingest.workflows.gong import gong_instance_id, gong_params

    items = []
    for n, call in enumerate(calls):
        call_id = f"{run}{n:06d}"
        params = gong_params(
            {"call_id": call_id, "title": call.title, "started": call.started.isoformat(), "account": call.account},
            call.transcript_text(),
        )
        items.append(
            {"id": gong_instance_id(TENANT, call_id), "params": {**params, "tenant": TENANT}, "tenant": TENANT}
        )
    for i in range(0, len(items), 100):
        create_batch("gong-ingest", items[i : i + 100])


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a process (all its threads) so far, or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def context_switches(pid: int) -> int | None:
    """Voluntary and involuntary context switches of a process's live threads so far, or None
    once it is gone: how often its threads gave up or lost a core (a thread wake-up each)."""
    total = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            text = (task / "status").read_text()
        except OSError:
            continue  # a thread that ended just now
        for line in text.splitlines():
            if "ctxt_switches:" in line:
                total += int(line.rsplit(None, 1)[1])
    return total


class CpuMeter:
    """CPU spent by the workers and by this database's PostgreSQL backends between `start`
    and the last `sample`. Backends come and go (one per worker thread), so each is sampled
    while the run lasts and counted from its first sighting (from 0 if it started since)."""

    def __init__(self, workers: list[int]) -> None:
        self.workers = workers
        self.base: dict[str, dict[int, float]] = {"workers": {}, "postgres": {}}
        self.last: dict[str, dict[int, float]] = {"workers": {}, "postgres": {}}
        self.self_base = self.self_used = 0.0
        self.switch_base: dict[int, int] = {}
        self.switch_last: dict[int, int] = {}

    def _backends(self) -> list[int]:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            return [pid for (pid,) in cursor.fetchall()]

    def _own(self) -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def start(self) -> None:
        self.self_base = self._own()
        for kind, pids in (("workers", self.workers), ("postgres", self._backends())):
            for pid in pids:
                if (cpu := cpu_seconds(pid)) is not None:
                    self.base[kind][pid] = self.last[kind][pid] = cpu
        for pid in self.workers:
            if (switches := context_switches(pid)) is not None:
                self.switch_base[pid] = self.switch_last[pid] = switches

    def sample(self) -> None:
        for kind, pids in (("workers", self.workers), ("postgres", self._backends())):
            for pid in pids:
                if (cpu := cpu_seconds(pid)) is not None:
                    self.last[kind][pid] = cpu
        for pid in self.workers:
            if (switches := context_switches(pid)) is not None:
                self.switch_last[pid] = switches
        self.self_used = self._own() - self.self_base

    def switches(self) -> int:
        return sum(n - self.switch_base.get(pid, 0) for pid, n in self.switch_last.items())

    def used(self, kind: str) -> float:
        return sum(cpu - self.base[kind].get(pid, 0.0) for pid, cpu in self.last[kind].items())


def machine_reference(url: str, rounds: int = 3, trips: int = 2000) -> str:
    """What this machine's CPU does per unit of fixed work, to read CPU per call against: a
    CPU-second here is not one elsewhere (docs/pipelines.md: the same commit measured 17 ms per
    call on one 2-core machine and 44 ms on another). Prints the best of `rounds` of a fixed
    pure-Python loop and of `trips` prepared `SELECT 1` round trips over a fresh connection (this
    process's CPU and its PostgreSQL backend's, per round trip). A call's CPU is Python and round
    trips to PostgreSQL, so where both of these are k times dearer, CPU per call is about k times
    what it is elsewhere."""
    import psycopg

    loops, client, server = [], [], []
    for _ in range(rounds):
        start = time.process_time()
        sum(i * i for i in range(1_000_000))
        loops.append(time.process_time() - start)
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        backend = int(row[0])
        cursor = conn.cursor()
        for _ in range(rounds):
            mine, theirs = time.process_time(), cpu_seconds(backend)
            for _ in range(trips):
                cursor.execute("SELECT 1", prepare=True)
                cursor.fetchone()
            client.append((time.process_time() - mine) / trips)
            after = cpu_seconds(backend)
            if theirs is not None and after is not None:  # None: the database runs on another machine
                server.append((after - theirs) / trips)
    there = (
        f"{min(server) * 1e6:.0f} µs in PostgreSQL"
        if server
        else "PostgreSQL's share not readable (not this machine's)"
    )
    return (
        f"machine: a fixed Python loop {min(loops) * 1000:.0f} ms of CPU; a prepared SELECT 1 "
        f"{min(client) * 1e6:.0f} µs here + {there} (best of {rounds}; "
        f"compare CPU per call between machines through these)"
    )


def transactions() -> int:
    """Transactions committed or rolled back in this database so far (pg_stat_database; a
    backend reports its counts when it goes idle or exits, so read this after the workers stop)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()")
        row = cursor.fetchone()
    return int(row[0]) if row else 0


ENGINE_MEDIANS = re.compile(r"^medians: .* total ([0-9.]+) ms")


def engine_reference(url: str, *, instances: int, runs: int) -> float:
    """`bench/engine_cpu.py` of this checkout on the bench's database: its lines, indented, and
    its median CPU per instance (process + PostgreSQL backends), in seconds."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "engine_cpu.py"), "--instances", str(instances), "--runs", str(runs)],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"bench/engine_cpu.py failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    lines = done.stdout.splitlines()
    print("\n".join(f"  engine: {line}" for line in lines), flush=True)
    for line in lines:
        if found := ENGINE_MEDIANS.match(line):
            return float(found.group(1)) / 1000
    raise SystemExit(f"bench/engine_cpu.py printed no medians line:\n{done.stdout}")


def wait_finished(total: int, timeout: float, meter: CpuMeter) -> None:
    from ingest.engine.models import Instance

    deadline = time.monotonic() + timeout
    next_sample = 0.0
    while True:
        done = Instance.objects.filter(tenant=TENANT, status__in=["complete", "errored", "terminated"]).count()
        if done >= total or time.monotonic() >= next_sample:
            meter.sample()
            next_sample = time.monotonic() + 0.5
        if done >= total:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {done} of {total} instances finished within {timeout:g} s")
        time.sleep(0.25)  # the wall time comes from the ledger's timestamps, not from this loop


# ---- where the workers' time goes (py-spy) ------------------------------------------------------

COSTS = (
    "ingest/engine/costs/",
    "ingest/engine/runtime/context.py",
    "ingest/pipelines/pricing.py",
    "ingest/pipelines/pricer.py",
    "ingest/sources/usage.py",
    "reservation (ingest/workflows/providers.py",
)
LLM = (
    "ingest/sources/llm/",
    "ingest/sources/http.py",
    "_metered (ingest/workflows/providers.py",
    "extract (ingest/workflows/providers.py",
)
CONCERNS = (
    "engine: claim, replay, step ledger",
    "pipeline: facts, prefilter, signal row",
    "costs, budgets, pricing",
    "LLM client",
    "other: idle loops, notify thread",
)


def concern(stack: str) -> str:
    """A sample's concern: costs when any frame is cost code (it runs inside the llm-extract
    step and calls the pricer and the engine's history), else its innermost project frame's."""
    if any(mark in stack for mark in COSTS):
        return CONCERNS[2]
    ours = [frame for frame in stack.split(";") if "(ingest/" in frame]
    if not ours:
        return CONCERNS[4]
    if any(mark in ours[-1] for mark in LLM):
        return CONCERNS[3]
    return CONCERNS[0] if "(ingest/engine/" in ours[-1] else CONCERNS[1]


def py_spy() -> Path | None:
    """py-spy beside this Python (the `bench` extra installs it), else on the PATH."""
    spy = Path(sys.executable).parent / "py-spy"
    if spy.exists():
        return spy
    found = shutil.which("py-spy")
    return Path(found) if found else None


def profile_start(pids: list[int], folder: str) -> list[subprocess.Popen[bytes]]:
    """Two samplers per worker: `--gil` samples the thread holding the GIL (Python's CPU), the
    other every thread that is not idle (running, or inside psycopg waiting for PostgreSQL)."""
    spy = py_spy()
    assert spy is not None  # checked before anything starts (main)
    return [
        subprocess.Popen(
            [
                str(spy),
                "record",
                "--nonblocking",
                "-r",
                "100",
                "-f",
                "raw",
                "-p",
                str(pid),
                *gil,
                "-o",
                f"{folder}/{kind}-{pid}.raw",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for pid in pids
        for kind, gil in (("cpu", ["--gil"]), ("busy", []))
    ]


def profile_stop(spies: list[subprocess.Popen[bytes]]) -> None:
    for spy in spies:
        spy.send_signal(signal.SIGINT)
    for spy in spies:
        spy.wait(timeout=60)


def profile_read(folder: str) -> dict[str, collections.Counter[str]]:
    """Samples per concern: "cpu" (GIL holder), "busy" (non-idle threads) and "db" (busy
    samples whose innermost frame is psycopg's: a round trip to PostgreSQL)."""
    counts: dict[str, collections.Counter[str]] = {k: collections.Counter() for k in ("cpu", "busy", "db")}
    for raw in Path(folder).glob("*.raw"):
        kind = raw.name.split("-", 1)[0]
        for line in raw.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            if not n.isdigit():
                continue  # a line py-spy cut short when it was stopped
            counts[kind][concern(stack)] += int(n)
            if kind == "busy" and "(psycopg/" in stack.rsplit(";", 1)[-1]:
                counts["db"][concern(stack)] += int(n)
    return counts


def profile_report(counts: dict[str, collections.Counter[str]], worker_cpu: float) -> str:
    """The workers' CPU per call split by the GIL samples' shares (Python's CPU; the rest of
    the process's CPU, psycopg's C code and the kernel's, is assumed to follow the same split)."""
    cpu, busy = sum(counts["cpu"].values()) or 1, sum(counts["busy"].values()) or 1
    lines = [f"  {'where the workers spend it':40} {'CPU/call':>9} {'CPU':>6} {'busy':>6} {'in DB':>6}"]
    for name in CONCERNS:
        share = counts["cpu"][name] / cpu
        lines.append(
            f"  {name:40} {share * worker_cpu * 1000:6.1f} ms {share:6.1%} "
            f"{counts['busy'][name] / busy:6.1%} {counts['db'][name] / busy:6.1%}"
        )
    lines.append(
        f"  (CPU: py-spy --gil samples, {cpu}; busy: samples of non-idle threads, {busy}; in DB: "
        "of those, inside psycopg, i.e. waiting on a PostgreSQL round trip)"
    )
    return "\n".join(lines)


def seconds(a: Any, b: Any) -> float:
    return (b - a).total_seconds()


def measure(calls: int, concurrency: int) -> dict[str, float]:
    from django.db.models import Max, Min

    from ingest.engine.models import Attempt, Instance

    instances = Instance.objects.filter(tenant=TENANT)
    span = instances.aggregate(first=Min("created_at"), last=Max("ended_at"))
    wall = seconds(span["first"], span["last"])
    ended = dict(instances.values_list("id", "ended_at"))
    attempts: dict[str, list[tuple[Any, Any, str]]] = collections.defaultdict(list)
    for instance_id, name, started, finished in Attempt.objects.filter(step__instance__tenant=TENANT).values_list(
        "step__instance_id", "step__name", "started_at", "ended_at"
    ):
        if finished is not None:
            attempts[instance_id].append((started, finished, name))
    llm = other = gaps = held = 0.0
    for instance_id, rows in attempts.items():
        rows.sort()
        held += seconds(rows[0][0], ended[instance_id])
        for i, (started, finished, name) in enumerate(rows):
            if name == "llm-extract":
                llm += seconds(started, finished)
            else:
                other += seconds(started, finished)
            if i:
                gaps += seconds(rows[i - 1][1], started)
    thread_time = wall * concurrency
    errored = instances.exclude(status="complete").count()
    n = len(attempts) or 1
    return {
        "wall": wall,
        "llm_share": llm / thread_time,
        "steps_share": other / thread_time,
        "engine_share": 1 - (llm + other) / thread_time,
        "errored": errored,
        "steps": sum(len(rows) for rows in attempts.values()) / calls,
        "held": held / n,
        "llm": llm / n,
        "other": other / n,
        "gaps": gaps / n,
        "occupancy": held / thread_time,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8, help="instances in flight per worker")
    parser.add_argument("--delay", type=float, default=0.2, help="the fake LLM's answer time, seconds")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--embeddings", action="store_true", help="embed facts with WordLlama too")
    parser.add_argument(
        "--budgets",
        action="store_true",
        help="give the tenant and the workflow budgets, so every extraction reserves and settles",
    )
    parser.add_argument(
        "--profile", action="store_true", help="sample the workers with py-spy and split their CPU by concern"
    )
    parser.add_argument(
        "--engine-instances",
        type=int,
        default=300,
        help="instances of bench/engine_cpu.py, run before the first run and after each, to price a call against "
        "(0: skip it)",
    )
    parser.add_argument("--engine-runs", type=int, default=1, help="runs of bench/engine_cpu.py each time (median)")
    args = parser.parse_args()
    if args.profile and py_spy() is None:
        parser.error(
            "--profile samples the workers with py-spy, which is not installed: .venv/bin/pip install -e '.[bench]'"
        )

    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    if not url.startswith("postgres"):
        raise SystemExit("the pipeline bench runs on PostgreSQL (several worker processes); set DATABASE_URL")
    ensure_database(url)
    setup_django()
    from django.db import connection

    from ingest.demo.corpus import demo_calls
    from tests.fakes import FakeOpenAI
    from tests.fakes.llm import CHAT

    corpus = demo_calls(seed=11, count=args.calls)
    total = args.workers * args.concurrency
    goal = 1.3 * args.calls * args.delay / total
    print(
        f"{args.calls} calls, {args.workers} workers × {args.concurrency} = {total} in flight, LLM answers in "
        f"{args.delay * 1000:.0f} ms; ideal {args.calls * args.delay / total:.2f} s, goal ≤ {goal:.2f} s"
    )
    print(machine_reference(url))
    engine: list[float] = []
    if args.engine_instances:
        print("the engine's 22-step instance, before run 1:", flush=True)
        engine.append(engine_reference(url, instances=args.engine_instances, runs=args.engine_runs))
        connection.close()  # its runs deleted and created rows; the next query starts afresh
    results: list[dict[str, float]] = []
    with FakeOpenAI() as fake:
        fake.delay = args.delay
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "RUNLEDGER_LLM_PROVIDER": "openai",
            "RUNLEDGER_LLM_BASE_URL": f"{fake.url}/v1",
            "RUNLEDGER_LLM_API_KEY": fake.api_key or "",
            "RUNLEDGER_LLM_MODEL": "gpt-4o-mini",
            "RUNLEDGER_PRICER": "ingest.pipelines.pricer.price_usage",
            "RUNLEDGER_EMBEDDINGS": "wordllama" if args.embeddings else "off",
            "RUNLEDGER_LOG_LEVEL": "WARNING",
        }
        for run in range(1, args.runs + 1):
            clear()
            if args.budgets:
                add_budgets()
            connection.close()
            procs = start_workers(args.workers, args.concurrency, env)
            meter = CpuMeter([p.pid for p in procs])
            folder = tempfile.mkdtemp(prefix="bench-pipelines-") if args.profile else ""
            spies: list[subprocess.Popen[bytes]] = []
            try:  # whatever fails from here on, the workers are stopped
                spies = profile_start([p.pid for p in procs], folder) if args.profile else []
                before = fake.count(CHAT)
                load = os.getloadavg()[0]
                meter.start()
                xacts = transactions()
                create_instances(corpus, run)
                wait_finished(args.calls, timeout=max(600.0, goal * 20), meter=meter)
            finally:
                try:
                    profile_stop(spies)
                finally:
                    stop_workers(procs)
            xacts = transactions() - xacts
            result = measure(args.calls, total)
            result |= {
                "llm_calls": fake.count(CHAT) - before,
                "load": load,
                "cpu_workers": meter.used("workers") / args.calls,
                "cpu_postgres": meter.used("postgres") / args.calls,
                "cpu_bench": meter.self_used / args.calls,
                "switches": meter.switches() / args.calls,
                "xacts": xacts / args.calls,
            }
            results.append(result)
            print(f"run {run}: " + summary(result, goal, args.calls))
            if args.profile:
                print(
                    profile_report(profile_read(folder), result["cpu_workers"]) + f"\n  (py-spy's raw stacks: {folder})"
                )
            if args.engine_instances:
                print(f"the engine's 22-step instance, after run {run}:", flush=True)
                engine.append(engine_reference(url, instances=args.engine_instances, runs=args.engine_runs))
                connection.close()
                result["ratio"] = (result["cpu_workers"] + result["cpu_postgres"]) / statistics.mean(engine[-2:])
                print(ratio_line(result, engine[-2:]), flush=True)
    med = {k: statistics.median(r[k] for r in results) for k in results[0]}
    print(f"median of {len(results)}: " + summary(med, goal, args.calls))
    if args.engine_instances:
        print(
            f"median of {len(results)}: gong call = {med['ratio']:.1f}x the engine's 22-step instance (runs: "
            + ", ".join(f"{r['ratio']:.2f}" for r in results)
            + f"; engine per instance {', '.join(f'{e * 1000:.1f}' for e in engine)} ms)"
        )


def ratio_line(result: dict[str, float], engine: list[float]) -> str:
    """A run's CPU per call (workers + PostgreSQL) over the engine's CPU per instance just before
    and just after it (their mean)."""
    call = result["cpu_workers"] + result["cpu_postgres"]
    return (
        f"  gong call = {result['ratio']:.2f}x the engine's 22-step instance (CPU per call {call * 1000:.1f} ms; "
        f"engine per instance {' then '.join(f'{e * 1000:.1f}' for e in engine)} ms, mean "
        f"{statistics.mean(engine) * 1000:.1f} ms)"
    )


# Workers + PostgreSQL per call: steadier than wall time, but a slower machine's CPU-second does less
# (docs/pipelines.md).
CPU_GOAL_MS = 18.0


def summary(r: dict[str, float], goal: float, calls: int) -> str:
    cpu = (r["cpu_workers"] + r["cpu_postgres"]) * 1000
    return (
        f"CPU per call {cpu:.1f} ms (workers {r['cpu_workers'] * 1000:.1f} + PostgreSQL "
        f"{r['cpu_postgres'] * 1000:.1f}) vs goal ≤ {CPU_GOAL_MS:g} ms: "
        f"{'met' if cpu <= CPU_GOAL_MS else 'missed'}; load average {r['load']:.1f} at start\n  "
        f"wall {r['wall']:.2f} s vs goal {goal:.2f} s ({r['wall'] / (goal / 1.3):.2f}× ideal, goal "
        f"{'met' if r['wall'] <= goal else 'missed'}; load average {r['load']:.1f} at start); "
        f"LLM calls {r['llm_calls']:.0f} for {calls} calls; errored {r['errored']:.0f}; "
        f"{r['steps']:.1f} attempts/call\n"
        f"  CPU per call: workers {r['cpu_workers'] * 1000:.1f} ms, PostgreSQL {r['cpu_postgres'] * 1000:.1f} ms, "
        f"bench + fake LLM {r['cpu_bench'] * 1000:.1f} ms; the workers' threads switched {r['switches']:.0f} times "
        f"per call; {r['xacts']:.1f} transactions per call (the bench's own included)\n"
        f"  per call, first attempt to end: {r['held'] * 1000:.0f} ms = LLM step {r['llm'] * 1000:.0f} + other steps "
        f"{r['other'] * 1000:.0f} + between steps {r['gaps'] * 1000:.0f} (the engine: commits, replay) + "
        f"{(r['held'] - r['llm'] - r['other'] - r['gaps']) * 1000:.0f} to the instance's end; slots held "
        f"{r['occupancy']:.0%} of the wall time\n"
        f"  thread-time: LLM step {r['llm_share']:.0%}, other steps {r['steps_share']:.0%}, "
        f"engine + idle {r['engine_share']:.0%}"
    )


if __name__ == "__main__":
    main()
