"""Ingress benchmark: signed requests, the Gong and Salesforce webhooks and a no-op ceiling,
interleaved in one run against 2 daphne processes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rl_bench_ingress \
        .venv/bin/python bench/ingress.py --seconds 10 --threads 16 --runs 3

What it does: migrates its own database, creates a route, an ingress secret and the bench
tenant's Gong and Salesforce connections, starts two daphne web processes on loopback (ports 8101
and 8102) serving `bench.ingress:application` (the project's ASGI app plus a no-op `bench-noop`
workflow and the no-op view below, so the bench does not depend on the pipelines' code), then
runs a load generator of threads, each with a keep-alive `http.client` connection to one of the
two processes, against each target in turn, the targets' order rotating every round:

- `noop`: the project's ceiling, `POST /api/bench-noop` — a Django view that reads the body and
  answers 202, mounted only by this module, behind the project's middleware (the input guard
  parses the JSON body, the error envelope, the ingress counter, sessions, CSRF, auth);
- `bare`: the same request (same path, same view) served by the project's request handler
  (dashboard/asgi_handler.py) built with no middleware at all, in the same daphne processes:
  `noop`'s CPU per request over `bare`'s is what the project's middleware costs;
- `django`: the same request served by Django's stock ASGI handler with no middleware: how
  Django itself serves a bare view under daphne (a thread started, and another to join it, per
  request), for reference;
- `stock`: the same request through the project's middleware on Django's stock ASGI handler,
  which the project served with before dashboard/asgi_handler.py, for reference;
- `ingress`: `POST /api/routes/{route}`, signed (HMAC-SHA256 of timestamp + "." + body) with an
  Idempotency-Key; a share of requests (`--repeat`) reuses a key already sent, with the same
  body, sometimes from two threads at once, so the replay path and the concurrent-duplicate race
  are exercised across processes;
- `gong`: `POST /hooks/gong/<key>`, a Gong automation rule's post of a call (repeats resend a
  call id: a redelivery);
- `salesforce`: `POST /hooks/salesforce/<key>/cdc`, a Change Data Capture event for one
  opportunity (repeats resend the same event).

No worker runs: the bench measures ingress, not execution. It prints requests/s, p50/p99
latency, web and PostgreSQL CPU per request, status counts and duplicates created (instances
minus distinct keys: must be 0) per target and round, then per target the medians and two
ratios, each to a ceiling measured in the same rounds: the project's (`noop`) and the bare view's
(`bare`); and the project's ceiling's CPU per request over each other ceiling's. Goals: the
project's ceiling costs at most 1.5× the bare view's web CPU per request; ingress and the hooks
reach ≥ 75 % of the project's ceiling's requests/s with a p99 ≤ 1.5× its p99, and create 0
duplicates.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PORTS = (8101, 8102)
ROUTE = "bench-orders"
TENANT = "bench"
GONG_KEY = "bench-gong-hook"
SALESFORCE_KEY = "bench-salesforce-hook"
NOOP_PATH = "/api/bench-noop"
# The ceilings other than `noop` ask for their handler with this header (the path stays the same).
HANDLER_HEADER = "X-Bench-Handler"
CEILINGS = ("noop", "bare", "django", "stock")
TARGETS = (*CEILINGS, "ingress", "gong", "salesforce")
WORKFLOWS = {"ingress": "bench-noop", "gong": "gong-ingest", "salesforce": "salesforce-ingest"}
GOAL_RPS_SHARE, GOAL_P99_TIMES = 0.75, 1.5
GOAL_STACK_CPU_TIMES = 1.5  # the project's ceiling's web CPU per request over the bare view's


def _noop_view(request: Any) -> Any:
    """The ceiling: what the stack costs with nothing behind it (body read, JSON answer)."""
    from django.http import JsonResponse

    return JsonResponse({"received": len(request.body)}, status=202)


def _other_handlers() -> dict[bytes, Any]:
    """`X-Bench-Handler` value → the Django handler that serves it: the project's without any
    middleware (`bare`), Django's stock one without (`django`) and with the project's (`stock`)."""
    from django.core.handlers.asgi import ASGIHandler
    from django.test import override_settings

    from dashboard.asgi_handler import RequestHandler

    with override_settings(MIDDLEWARE=[]):
        handlers = {b"bare": RequestHandler(), b"django": ASGIHandler()}
    return {**handlers, b"stock": ASGIHandler()}


def __getattr__(name: str) -> Any:
    """`daphne bench.ingress:application`: the project's ASGI app with the bench workflow and the
    no-op view mounted under /api/ (so the same middleware runs in front of it), and the other
    ceilings' handlers answering the same request when it names them in `X-Bench-Handler`."""
    if name != "application":
        raise AttributeError(name)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    from django.urls import path
    from django.views.decorators.csrf import csrf_exempt

    from dashboard.asgi import application as app  # sets Django up first
    from ingest.engine import Workflow

    class BenchNoop(Workflow):
        name = "bench-noop"

        def run(self, event: Any, step: Any) -> Any:
            return None

    urlpatterns = import_module("dashboard.urls").urlpatterns
    urlpatterns.insert(0, path(NOOP_PATH.lstrip("/"), csrf_exempt(_noop_view)))
    others = _other_handlers()
    header = HANDLER_HEADER.lower().encode()

    async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
        asked = next((v for k, v in scope.get("headers", ()) if k == header), None)
        await others.get(asked, app)(scope, receive, send)

    return application


def setup_database() -> tuple[str, str]:
    """Migrate, reset the bench rows, create the route, a secret and the webhook connections:
    (token, hmac secret)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from ingest.engine.models import History, Instance
    from ingest.pipelines.models import Connection
    from ingest.pipelines.services import connection_upsert
    from ingest.triggers.models import IdempotencyKey, IngressSecret, TokenBucket
    from ingest.triggers.services import ingress_secret_create, route_upsert

    IdempotencyKey.objects.filter(route=ROUTE).delete()
    History.objects.filter(tenant=TENANT).delete()
    Instance.objects.filter(workflow="bench-noop").delete()
    Instance.objects.filter(tenant=TENANT).delete()
    IngressSecret.objects.filter(tenant=TENANT).delete()
    Connection.objects.filter(tenant=TENANT).delete()  # encrypted under an earlier run's key
    TokenBucket.objects.filter(key__startswith="ingress:").delete()
    route_upsert(name=ROUTE, workflow="bench-noop", tenant=TENANT, rate_limit_per_minute=None)
    connection_upsert(tenant=TENANT, kind="gong", key="k", secret="s", webhook_key=GONG_KEY)
    connection_upsert(tenant=TENANT, kind="salesforce", webhook_key=SALESFORCE_KEY)
    _, token, secret = ingress_secret_create(tenant=TENANT)
    return token, secret


def count_created(target: str) -> int:
    from ingest.engine.models import Instance

    if target in CEILINGS:
        return 0
    return Instance.objects.filter(workflow=WORKFLOWS[target]).count()


def start_servers() -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "bench.ingress:application"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for port in PORTS
    ]
    deadline = time.monotonic() + 120  # a loaded machine imports slowly
    for port in PORTS:
        while True:
            try:
                # /healthz, not a page: building one (the OpenAPI schema, say) can take longer than
                # the probe's timeout on a loaded machine, every time, and the bench never starts.
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", "/healthz")
                conn.getresponse().read()
                conn.close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    stop_servers(procs)
                    raise SystemExit(f"daphne on port {port} did not start within 120 s") from None
                time.sleep(0.2)
    return procs


def stop_servers(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _order(key: str, rng: random.Random) -> bytes:
    return json.dumps({"order": key[:8], "amount": rng.randint(1, 10_000)}).encode()


def _gong_call(key: str, rng: random.Random) -> bytes:
    meta = {
        "id": str(int(key[:15], 16)),
        "url": "https://app.gong.io/call?id=1",
        "title": f"Discovery call {key[:6]}",
        "started": "2025-03-03T12:00:00+00:00",
        "duration": 1800,
        "primaryUserId": "1001",
        "direction": "Conference",
        "scope": "External",
        "system": "Zoom",
        "media": "Video",
        "language": "eng",
        "isPrivate": False,
    }
    parties = [
        {
            "id": "p1",
            "emailAddress": "ada@bench.example",
            "name": "Ada",
            "speakerId": "1001",
            "affiliation": "Internal",
            "methods": ["Invitee"],
        },
        {
            "id": "p2",
            "emailAddress": "bob@acme.example",
            "name": "Bob",
            "speakerId": "2002",
            "affiliation": "External",
            "methods": ["Invitee"],
        },
    ]
    return json.dumps(
        {
            "callData": {"metaData": meta, "parties": parties, "context": [{"system": "Salesforce", "objects": []}]},
            "isTest": False,
        }
    ).encode()


def _cdc_event(key: str, rng: random.Random) -> bytes:
    header = {
        "entityName": "Opportunity",
        "recordIds": [f"006BENCH{key[:10].upper()}"],
        "changeType": "UPDATE",
        "changeOrigin": "com/salesforce/api/rest/62.0",
        "transactionKey": key,
        "sequenceNumber": 1,
        "commitTimestamp": 1741003200000,
        "commitNumber": 10648790,
        "commitUser": "005RM000001vI54YAE",
        "changedFields": ["StageName", "Amount"],
        "nulledFields": [],
        "diffFields": [],
    }
    return json.dumps(
        {
            "data": {
                "schema": "bench",
                "payload": {
                    "ChangeEventHeader": header,
                    "StageName": "Negotiation/Review",
                    "Amount": float(rng.randint(1, 100_000)),
                },
                "event": {"replayId": 1},
            },
            "channel": "/data/OpportunityChangeEvent",
        }
    ).encode()


BODIES: dict[str, Callable[[str, random.Random], bytes]] = {
    "noop": _order,
    "bare": _order,
    "django": _order,
    "stock": _order,
    "ingress": _order,
    "gong": _gong_call,
    "salesforce": _cdc_event,
}
PATHS = {
    **{c: NOOP_PATH for c in CEILINGS},
    "ingress": f"/api/routes/{ROUTE}",
    "gong": f"/hooks/gong/{GONG_KEY}",
    "salesforce": f"/hooks/salesforce/{SALESFORCE_KEY}/cdc",
}


class Load:
    """Shared state of one run of one target: keys sent (with their bodies), latencies, statuses."""

    def __init__(self, target: str, token: str, secret: str, repeat: float) -> None:
        self.target, self.token, self.secret, self.repeat = target, token, secret, repeat
        self.lock = threading.Lock()
        self.sent: list[tuple[str, bytes]] = []
        self.latencies: list[float] = []
        self.statuses: Counter[int] = Counter()
        self.ids_by_key: dict[str, set[str]] = {}

    def pick(self, rng: random.Random) -> tuple[str, bytes]:
        with self.lock:
            if self.sent and rng.random() < self.repeat:
                # Recent keys: likely still in flight on the other process (the real race).
                return self.sent[-rng.randint(1, min(len(self.sent), 8))]
            key = uuid.uuid4().hex
            body = BODIES[self.target](key, rng)
            self.sent.append((key, body))
            return key, body

    def record(self, key: str, status: int, elapsed: float, ids: list[str]) -> None:
        with self.lock:
            self.latencies.append(elapsed)
            self.statuses[status] += 1
            if ids:
                self.ids_by_key.setdefault(key, set()).update(ids)


def headers_for(load: Load, key: str, body: bytes) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if load.target in CEILINGS[1:]:
        return {**headers, HANDLER_HEADER: load.target}
    if load.target != "ingress":
        return headers
    from ingest.triggers.signing import sign

    stamp = str(int(time.time()))
    return {
        **headers,
        "Authorization": f"Bearer {load.token}",
        "X-Runledger-Timestamp": stamp,
        "Idempotency-Key": key,
        "X-Runledger-Signature": sign(secret=load.secret, timestamp=stamp, body=body),
    }


def instance_ids(data: bytes) -> list[str]:
    """The instances an answer names: `instance_id` (ingress, Gong) or started + already
    processed (Salesforce CDC)."""
    answer = json.loads(data)
    if "instance_id" in answer:
        return [answer["instance_id"]]
    return [*answer.get("started", []), *answer.get("already_processed", [])]


def client(load: Load, port: int, until: float, seed: int) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while time.monotonic() < until:
        key, body = load.pick(rng)
        started = time.perf_counter()
        try:
            conn.request("POST", PATHS[load.target], body=body, headers=headers_for(load, key, body))
            response = conn.getresponse()
            data = response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            load.record(key, 0, time.perf_counter() - started, [])
            continue
        ids = instance_ids(data) if status in (200, 202) else []
        load.record(key, status, time.perf_counter() - started, ids)
    conn.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def backends() -> list[int]:
    """This database's PostgreSQL backends other than ours (the web processes' connections)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return [pid for (pid,) in cursor.fetchall()]


def cpu_now(servers: list[int]) -> dict[str, dict[int, float]]:
    return {
        "web": {pid: cpu_seconds(pid) for pid in servers},
        "postgres": {pid: cpu_seconds(pid) for pid in backends()},
    }


def cpu_used(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]], kind: str) -> float:
    """CPU between two samples; a backend that started since counts from 0 (one that started and
    ended between the samples is missed: with a connection per request most of PostgreSQL's
    CPU would be, which is why the web processes pool their connections)."""
    return sum(cpu - before[kind].get(pid, 0.0) for pid, cpu in after[kind].items())


def run_once(
    target: str, token: str, secret: str, *, seconds: float, threads: int, repeat: float, servers: list[int]
) -> dict[str, Any]:
    before_instances = count_created(target)
    cpu_before = cpu_now(servers)
    load = Load(target, token, secret, repeat)
    until = time.monotonic() + seconds
    workers = [threading.Thread(target=client, args=(load, PORTS[i % 2], until, i)) for i in range(threads)]
    started = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.monotonic() - started
    cpu_after = cpu_now(servers)
    created = count_created(target) - before_instances
    lat = sorted(load.latencies)
    named = {i for ids in load.ids_by_key.values() for i in ids}
    return {
        "target": target,
        "load": round(os.getloadavg()[0], 2),
        "requests": len(lat),
        "rps": len(lat) / elapsed,
        "p50_ms": 1000 * lat[len(lat) // 2] if lat else 0.0,
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else 0.0,
        "cpu_web_ms": 1000 * cpu_used(cpu_before, cpu_after, "web") / max(1, len(lat)),
        "cpu_pg_ms": 1000 * cpu_used(cpu_before, cpu_after, "postgres") / max(1, len(lat)),
        "statuses": dict(sorted(load.statuses.items())),
        "distinct_keys": len({k for k, _ in load.sent}),
        "instances_created": created,
        "duplicates_created": created - len(named) if target not in CEILINGS else 0,
        "keys_with_two_ids": sum(1 for ids in load.ids_by_key.values() if len(ids) > 1),
    }


def cpu_share(rounds: list[dict[str, Any]], ceiling: list[dict[str, Any]]) -> float:
    """Median over rounds of a target's web + PostgreSQL CPU per request over the ceiling's web CPU
    per request in the same round."""
    return statistics.median(
        (r["cpu_web_ms"] + r["cpu_pg_ms"]) / c["cpu_web_ms"] for r, c in zip(rounds, ceiling, strict=True)
    )


def report(results: list[dict[str, Any]], *, threads: int, seconds: float) -> None:
    by_target = {t: [r for r in results if r["target"] == t] for t in TARGETS}
    med = {
        t: {
            k: statistics.median(r[k] for r in rs)
            for k in ("rps", "p50_ms", "p99_ms", "load", "cpu_web_ms", "cpu_pg_ms")
        }
        for t, rs in by_target.items()
        if rs
    }
    ceiling, bare = med["noop"], med["bare"]
    print(
        f"medians of {len(by_target['noop'])} interleaved rounds, 2 daphne processes, {threads} "
        f"client threads, {seconds:g} s per target and round:"
    )
    for target, m in med.items():
        rs = by_target[target]
        line = (
            f"  {target:10} {m['rps']:7.1f} req/s  p50 {m['p50_ms']:6.1f} ms  p99 "
            f"{m['p99_ms']:6.1f} ms  CPU/request web {m['cpu_web_ms']:.2f} ms + PostgreSQL "
            f"{m['cpu_pg_ms']:.2f} ms  (load average {m['load']:.1f})"
        )
        if target not in CEILINGS:
            share, times = m["rps"] / ceiling["rps"], m["p99_ms"] / ceiling["p99_ms"]
            dupes = sum(r["duplicates_created"] + r["keys_with_two_ids"] for r in rs)
            met = share >= GOAL_RPS_SHARE and times <= GOAL_P99_TIMES and dupes == 0
            line += (
                f"\n{'':13}= {share:.0%} of the project's ceiling's req/s "
                f"({m['rps'] / bare['rps']:.0%} of the bare view's), p99 {times:.2f}× the "
                f"ceiling's; duplicates {dupes}; goal (≥ {GOAL_RPS_SHARE:.0%}, ≤ "
                f"{GOAL_P99_TIMES:g}×, 0 duplicates) {'met' if met else 'missed'}"
                # CPU per request moves far less than requests/s when other work shares the machine.
                f"\n{'':13}  web + PostgreSQL CPU per request {cpu_share(rs, by_target['noop']):.2f}× the "
                "ceiling's web CPU (median of per-round ratios)"
            )
        print(line)
    for other, what in (
        ("bare", "the bare view's"),
        ("django", "Django's stock handler's bare view's"),
        ("stock", "the same middleware's on Django's stock handler"),
    ):
        # Per round as well, so a ratio compares two targets measured next to each other.
        rounds = [n["cpu_web_ms"] / b["cpu_web_ms"] for n, b in zip(by_target["noop"], by_target[other], strict=True)]
        stack = ceiling["cpu_web_ms"] / med[other]["cpu_web_ms"]
        line = (
            f"  the project's ceiling costs {stack:.2f}× {what} web CPU per request (per round: "
            f"{', '.join(f'{r:.2f}' for r in rounds)}) at {ceiling['rps'] / med[other]['rps']:.0%} "
            "of its req/s"
        )
        if other == "bare":
            line += (
                f"; goal for the middleware ≤ {GOAL_STACK_CPU_TIMES:g}× "
                f"{'met' if stack <= GOAL_STACK_CPU_TIMES else 'missed'}"
            )
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3, help="rounds; each runs every target once")
    parser.add_argument("--repeat", type=float, default=0.2, help="share of requests reusing a key")
    parser.add_argument(
        "--targets",
        default=",".join(TARGETS),
        help="comma-separated subset of " + ", ".join(TARGETS) + " (noop and bare always run)",
    )
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL=postgres://postgres@127.0.0.1:5432/rl_bench_ingress")
    # The connections' webhook keys are encrypted at rest: a fixed bench key (its rows hold
    # nothing secret), the same every run so the previous run's rows can be read and replaced.
    os.environ.setdefault(
        "RUNLEDGER_SECRET_KEYS", base64.urlsafe_b64encode(b"runledger-bench-ingress-32-bytes").decode()
    )
    targets = [*CEILINGS, *[t for t in args.targets.split(",") if t in TARGETS and t not in CEILINGS]]
    sys.path.insert(0, str(ROOT))
    token, secret = setup_database()
    procs = start_servers()
    results = []
    try:
        for n in range(args.runs):
            for target in targets[n % len(targets) :] + targets[: n % len(targets)]:
                result = run_once(
                    target,
                    token,
                    secret,
                    seconds=args.seconds,
                    threads=args.threads,
                    repeat=args.repeat,
                    servers=[p.pid for p in procs],
                )
                results.append(result)
                print(f"round {n + 1}: {json.dumps(result)}", flush=True)
    finally:
        stop_servers(procs)
    report(results, threads=args.threads, seconds=args.seconds)


if __name__ == "__main__":
    main()
