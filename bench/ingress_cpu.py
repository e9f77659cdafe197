"""The CPU one request costs inside a web process: bench/ingress.py's targets served in-process,
one at a time, through the project's middleware, measured with the thread's own CPU clock.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/rl_bench_ingress \
        .venv/bin/python bench/ingress_cpu.py --requests 300 --rounds 3

bench/ingress.py measures the same targets under load through two daphne processes, which on a
busy shared machine moves its requests/s by 2× from one round to the next; this measures only
the CPU the request's own thread spends (Django's test client, so no daphne, no event loop, no
thread hop): the view, the middleware and the client side of its database round trip. It uses
bench/ingress.py's database setup, bodies, signing and no-op view, fresh keys only (no repeats),
and prints per target and round the CPU per request and its ratio to the no-op view's measured
next to it, then the medians. Run it for two checkouts one after the other to compare code.
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("noop", "ingress", "gong", "salesforce")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="requests per target and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL=postgres://postgres@127.0.0.1:5432/rl_bench_ingress")
    os.environ.setdefault(
        "RUNLEDGER_SECRET_KEYS", base64.urlsafe_b64encode(b"runledger-bench-ingress-32-bytes").decode()
    )
    sys.path.insert(0, str(ROOT))
    from bench import ingress

    token, secret = ingress.setup_database()
    ingress.__getattr__("application")  # mounts the no-op view and the bench workflow
    from django.test import Client

    client, rng = Client(), random.Random(1)

    def send(target: str) -> None:
        key = uuid.uuid4().hex
        body = ingress.BODIES[target](key, rng)
        headers = ingress.headers_for(ingress.Load(target, token, secret, 0.0), key, body)
        extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items() if k != "Content-Type"}
        response = client.post(ingress.PATHS[target], data=body, content_type="application/json", **extra)
        if response.status_code not in (200, 202):
            raise SystemExit(f"{target} answered {response.status_code}: {response.content[:300]!r}")

    cpu: dict[str, list[float]] = {t: [] for t in TARGETS}
    ratios: dict[str, list[float]] = {t: [] for t in TARGETS[1:]}
    for n in range(args.rounds):
        order = TARGETS[n % len(TARGETS) :] + TARGETS[: n % len(TARGETS)]
        for target in order:
            for _ in range(20):  # warm: imports, prepared statements, kept credentials
                send(target)
            started = time.thread_time()
            for _ in range(args.requests):
                send(target)
            cpu[target].append(1000 * (time.thread_time() - started) / args.requests)
        line = ", ".join(f"{t} {cpu[t][-1]:.3f} ms" for t in TARGETS)
        for target in TARGETS[1:]:
            ratios[target].append(cpu[target][-1] / cpu["noop"][-1])
        print(f"round {n + 1} (load average {os.getloadavg()[0]:.1f}): CPU per request {line}", flush=True)
    print(f"medians of {args.rounds} rounds of {args.requests} requests per target:")
    for target in TARGETS:
        line = f"  {target:10} {statistics.median(cpu[target]):.3f} ms CPU per request"
        if target != "noop":
            line += f" = {statistics.median(ratios[target]):.2f}× the no-op view's (per round)"
        print(line)


if __name__ == "__main__":
    main()
