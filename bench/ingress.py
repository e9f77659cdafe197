"""Ingress benchmark: sustained signed requests with idempotency keys against 2 daphne processes.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rl_bench_ingress \
        .venv/bin/python bench/ingress.py --seconds 10 --threads 16 --runs 3

What it does: migrates its own database, creates a route and an ingress secret, starts two daphne
web processes on loopback (ports 8101 and 8102) serving `bench.ingress:application` (the project's
ASGI app plus a no-op `bench-noop` workflow, so the bench does not depend on the pipelines), then
runs a load generator of threads, each with a keep-alive `http.client` connection to one of the
two processes. Every request is signed (HMAC-SHA256 of timestamp + "." + body) and carries an
Idempotency-Key; a share of requests (`--repeat`) reuses a key already sent, with the same body,
sometimes from two threads at once, so both the replay path and the concurrent-duplicate race
are exercised across processes. No worker runs: the bench measures ingress, not execution.

It prints requests/s, p50/p99 latency, status counts and duplicates created (instances minus
distinct keys: must be 0) per run, then the medians over the runs.
"""

from __future__ import annotations

import argparse
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PORTS = (8101, 8102)
ROUTE = "bench-orders"


def __getattr__(name: str) -> Any:
    """`daphne bench.ingress:application`: the project's ASGI app with the bench workflow."""
    if name != "application":
        raise AttributeError(name)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    from dashboard.asgi import application as app
    from ingest.engine import Workflow

    class BenchNoop(Workflow):
        name = "bench-noop"

        def run(self, event: Any, step: Any) -> Any:
            return None

    return app


def setup_database() -> tuple[str, str]:
    """Migrate, reset the bench rows, create the route and a secret: (token, hmac secret)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from ingest.engine.models import Instance
    from ingest.triggers.models import IdempotencyKey, IngressSecret, TokenBucket
    from ingest.triggers.services import ingress_secret_create, route_upsert

    IdempotencyKey.objects.filter(route=ROUTE).delete()
    Instance.objects.filter(workflow="bench-noop").delete()
    IngressSecret.objects.filter(tenant="bench").delete()
    TokenBucket.objects.filter(key__startswith="ingress:").delete()
    route_upsert(name=ROUTE, workflow="bench-noop", tenant="bench", rate_limit_per_minute=None)
    _, token, secret = ingress_secret_create(tenant="bench")
    return token, secret


def count_created() -> tuple[int, int]:
    from ingest.engine.models import Instance
    from ingest.triggers.models import IdempotencyKey

    return (Instance.objects.filter(workflow="bench-noop").count(),
            IdempotencyKey.objects.filter(route=ROUTE).count())


def start_servers() -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
             "bench.ingress:application"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for port in PORTS
    ]
    deadline = time.monotonic() + 30
    for port in PORTS:
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/api/openapi.json")
                conn.getresponse().read()
                conn.close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    stop_servers(procs)
                    raise SystemExit(f"daphne on port {port} did not start within 30 s") from None
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


class Load:
    """Shared state of one run: keys sent (with their bodies), latencies, statuses."""

    def __init__(self, token: str, secret: str, repeat: float) -> None:
        self.token, self.secret, self.repeat = token, secret, repeat
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
            body = json.dumps({"order": key[:8], "amount": rng.randint(1, 10_000)}).encode()
            self.sent.append((key, body))
            return key, body

    def record(self, key: str, status: int, elapsed: float, instance_id: str | None) -> None:
        with self.lock:
            self.latencies.append(elapsed)
            self.statuses[status] += 1
            if instance_id:
                self.ids_by_key.setdefault(key, set()).add(instance_id)


def headers_for(load: Load, key: str, body: bytes) -> dict[str, str]:
    from ingest.triggers.signing import sign

    stamp = str(int(time.time()))
    return {"Content-Type": "application/json", "Authorization": f"Bearer {load.token}",
            "X-Runledger-Timestamp": stamp, "Idempotency-Key": key,
            "X-Runledger-Signature": sign(secret=load.secret, timestamp=stamp, body=body)}


def client(load: Load, port: int, until: float, seed: int) -> None:
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while time.monotonic() < until:
        key, body = load.pick(rng)
        started = time.perf_counter()
        try:
            conn.request("POST", f"/api/routes/{ROUTE}", body=body,
                         headers=headers_for(load, key, body))
            response = conn.getresponse()
            data = response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            load.record(key, 0, time.perf_counter() - started, None)
            continue
        instance_id = json.loads(data).get("instance_id") if status in (200, 202) else None
        load.record(key, status, time.perf_counter() - started, instance_id)
    conn.close()


def run_once(token: str, secret: str, *, seconds: float, threads: int, repeat: float
             ) -> dict[str, Any]:
    before_instances, _ = count_created()
    load = Load(token, secret, repeat)
    until = time.monotonic() + seconds
    workers = [threading.Thread(target=client, args=(load, PORTS[i % 2], until, i))
               for i in range(threads)]
    started = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.monotonic() - started
    instances, _ = count_created()
    created = instances - before_instances
    distinct = len({k for k, _ in load.sent})
    lat = sorted(load.latencies)
    return {
        "requests": len(lat),
        "rps": len(lat) / elapsed,
        "p50_ms": 1000 * lat[len(lat) // 2] if lat else 0.0,
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else 0.0,
        "statuses": dict(sorted(load.statuses.items())),
        "distinct_keys": distinct,
        "instances_created": created,
        "duplicates_created": created - len(load.ids_by_key),
        "keys_with_two_ids": sum(1 for ids in load.ids_by_key.values() if len(ids) > 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repeat", type=float, default=0.2, help="share of requests reusing a key")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL=postgres://postgres@127.0.0.1:5432/rl_bench_ingress")
    sys.path.insert(0, str(ROOT))
    token, secret = setup_database()
    procs = start_servers()
    results = []
    try:
        for n in range(args.runs):
            result = run_once(token, secret, seconds=args.seconds, threads=args.threads,
                              repeat=args.repeat)
            results.append(result)
            print(f"run {n + 1}: {json.dumps(result)}", flush=True)
    finally:
        stop_servers(procs)
    print(
        f"median of {len(results)} runs, 2 daphne processes, {args.threads} client threads, "
        f"{args.seconds:g} s each: {statistics.median(r['rps'] for r in results):.1f} req/s, "
        f"p50 {statistics.median(r['p50_ms'] for r in results):.1f} ms, "
        f"p99 {statistics.median(r['p99_ms'] for r in results):.1f} ms, "
        f"duplicates created {sum(r['duplicates_created'] for r in results)} (total), "
        f"keys with two instances {sum(r['keys_with_two_ids'] for r in results)}"
    )


if __name__ == "__main__":
    main()
