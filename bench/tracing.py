"""Tracing overhead: per-step latency with the OTLP exporter on against off, in the same run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_bench_tracing \
        .venv/bin/python bench/tracing.py --rounds 10 --instances 20 --steps 20

What it does: migrates, starts a local OTLP/HTTP receiver on 127.0.0.1 (it answers 200 to
`POST /v1/traces`, as a collector does) and runs a workflow of `--steps` small steps (each
returns a dict) on the engine inline, in alternating rounds with tracing off and on, so both
see the same database, cache and machine load. On: the SDK's TracerProvider with a
BatchSpanProcessor and the OTLP HTTP exporter pointed at the receiver, exactly what
OTEL_EXPORTER_OTLP_ENDPOINT configures in production. A step's latency is the time `step.do`
takes in the workflow (the step's function, its span when on, its durable commit). Prints p50
and p99 per mode, the difference, and how many spans the receiver got.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LATENCIES: list[float] = []


def setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(args: argparse.Namespace) -> dict[str, Any]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from ingest.engine import Workflow, tracing
    from ingest.engine.models import Instance
    from ingest.engine.services.instances import instance_create
    from ingest.engine.worker.turns import run_until_idle
    from tests.fakes.receiver import WebhookReceiver

    steps = args.steps

    class BenchTraced(Workflow):
        name = "bench-tracing"

        def run(self, event: Any, step: Any) -> Any:
            for i in range(steps):
                started = time.perf_counter()
                step.do(f"step-{i}", lambda ctx: {"n": ctx.attempt})
                LATENCIES.append(time.perf_counter() - started)
            return {"steps": steps}

    Instance.objects.filter(workflow="bench-tracing").delete()
    by_mode: dict[str, list[float]] = {"off": [], "on": []}
    with WebhookReceiver(secret=None) as collector:
        provider = TracerProvider()
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=collector.url.replace("/hook", "/v1/traces")))
        )
        for r in range(args.rounds * 2):
            mode = "on" if r % 2 else "off"
            tracing.enable(provider) if mode == "on" else tracing.disable()
            LATENCIES.clear()
            for _ in range(args.instances):
                instance_create(workflow="bench-tracing", params={}, tenant="bench")
            run_until_idle()
            by_mode[mode].extend(LATENCIES)
        tracing.disable()
        provider.shutdown()  # flushes the batch: every span reaches the receiver
        exports = len(collector.received)
    off, on = by_mode["off"], by_mode["on"]
    ms = 1000.0
    return {
        "steps_per_mode": len(on),
        "exports": exports,
        "off_p50_ms": round(statistics.median(off) * ms, 3),
        "on_p50_ms": round(statistics.median(on) * ms, 3),
        "off_p99_ms": round(percentile(off, 0.99) * ms, 3),
        "on_p99_ms": round(percentile(on, 0.99) * ms, 3),
        "overhead_p50_ms": round((statistics.median(on) - statistics.median(off)) * ms, 3),
        "overhead_p99_ms": round((percentile(on, 0.99) - percentile(off, 0.99)) * ms, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds per mode, alternating off and on")
    parser.add_argument("--instances", type=int, default=20, help="instances per round")
    parser.add_argument("--steps", type=int, default=20, help="steps per instance")
    args = parser.parse_args()
    setup()
    print(run(args))


if __name__ == "__main__":
    main()
