"""domain-onboard benchmark on PostgreSQL: prints its figures; not a test.

    .venv/bin/python bench/rankdisco_onboard.py                     # 100 domains, 2 workers
    .venv/bin/python bench/rankdisco_onboard.py --classify          # and their URLs through url-classify
    .venv/bin/python bench/rankdisco_onboard.py --domains 20 --concurrency 10
    .venv/bin/python bench/rankdisco_onboard.py --intent-llm    # keyword intents the rules leave to a fake LLM

100 domains are onboarded at once (created together) by 2 worker processes against the fake
DataForSEO answering every task in a deterministic 2-5 s (100 items per list) and a fake web
for the brand-property pages. Figures:
  - wall time from the first create to the last onboarding's end;
  - the fakes' own latency along each onboarding's critical path (the three parallel fetches
    answer after the same delay, then the spam-score call), against the onboarding's run time
    (its first claim to its end): the engine's share is the run time the fakes do not explain;
  - with --classify, each domain's backlink and ranking URLs fan out to a rules-only
    url-classify (one instance per URL), so the wall time includes ~200 child instances a domain.
A worker holds one thread per running onboarding during a fetch (the client is synchronous),
so `--concurrency` bounds how many wait on the fake at once.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import engine as base  # noqa: E402 - after the path is set

base.DB_NAME = os.environ.get("BENCH_DB", "runledger_bench_rankdisco")
MODULES = "bench.rankdisco_workflows"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--domains", type=int, default=100)
    # Each slot keeps a database connection (docs/engine-contract.md): 2 x (2 x 16 + 6 + 8) at most.
    parser.add_argument("--concurrency", type=int, default=16, help="instances in flight per worker (default 16)")
    parser.add_argument("--parallel-threads", type=int, default=8, help="RUNLEDGER_PARALLEL_THREADS per worker")
    parser.add_argument("--classify", action="store_true", help="fan each domain's URLs out to url-classify")
    parser.add_argument(
        "--intent-llm",
        action="store_true",
        help="give the tenant an LLM connection (a fake OpenAI-compatible server) for keyword intents",
    )
    args = parser.parse_args()

    if args.intent_llm and not os.environ.get("RUNLEDGER_SECRET_KEYS"):
        from cryptography.fernet import Fernet

        # The connection's API key is stored encrypted; the workers inherit the key.
        os.environ["RUNLEDGER_SECRET_KEYS"] = Fernet.generate_key().decode()
    # Django first: the fakes' package imports the LLM fake, which reads the ledger's models.
    base.setup_django()
    from tests.fakes.classify import FakeClassifyLLM
    from tests.fakes.dataforseo import FakeDataForSEO
    from tests.fakes.zenrows import FakeZenRows

    with FakeDataForSEO(latency=(2.0, 5.0)) as dfs, FakeZenRows() as web, FakeClassifyLLM() as llm:
        if args.intent_llm:
            from ingest.pipelines.services import connection_upsert

            connection_upsert(
                tenant="bench",
                kind="llm",
                base_url=f"{llm.url}/v1",
                secret="sk-fake",
                options={"provider": "openai", "model": "gpt-4o-mini", "service": "openai"},
            )
        # Read by the worker processes `run` starts, which inherit this environment.
        os.environ.update(
            BENCH_DFS_URL=dfs.url,
            BENCH_WEB_URL=web.url,
            BENCH_CLASSIFY="1" if args.classify else "0",
            RUNLEDGER_PARALLEL_THREADS=str(args.parallel_threads),
        )
        os.environ["RUNLEDGER_WORKFLOW_MODULES"] = MODULES  # setup_django set only bench.workflows
        run(args, dfs)


def run(args: argparse.Namespace, dfs: object) -> None:
    from ingest.engine import create_batch
    from ingest.engine.clock import now
    from ingest.engine.models import Instance

    names = [f"site{i:03d}.example" for i in range(args.domains)]
    ids = [f"onboard-bench-{i:03d}" for i in range(args.domains)]
    procs = base.workers(2, args.concurrency, ready=True)
    try:
        started = now()
        for b in range(0, len(ids), 100):
            create_batch(
                "domain-onboard",
                [
                    {"id": i, "tenant": "bench", "params": {"domain": n}}
                    for i, n in zip(ids[b : b + 100], names[b : b + 100], strict=True)
                ],
            )
        deadline = time.monotonic() + 3600
        while (
            Instance.objects.filter(id__in=ids)
            .exclude(status__in=["complete", "completed_with_errors", "errored", "paused"])
            .exists()
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("onboardings not finished after an hour")
            time.sleep(0.2)
    finally:
        base.stop(procs)
    rows = list(Instance.objects.filter(id__in=ids).values("id", "status", "started_at", "ended_at", "params"))
    statuses = {r["status"] for r in rows}
    if statuses != {"complete"}:
        raise RuntimeError(f"onboardings ended {sorted(statuses)}")
    wall = max(r["ended_at"] for r in rows) - started
    runs, fakes = [], []
    for r in rows:
        domain = r["params"]["domain"]
        fake = dfs._delay(domain) + dfs._delay(",".join(_ranking_urls(domain)))  # type: ignore[attr-defined]
        runs.append((r["ended_at"] - r["started_at"]).total_seconds())
        fakes.append(fake)
    engine = [run - fake for run, fake in zip(runs, fakes, strict=True)]
    load = os.getloadavg()
    print(
        f"domain-onboard x {args.domains}, 2 workers x {args.concurrency}, classify={args.classify}, "
        f"intent_llm={args.intent_llm}"
    )
    print(f"  keyword intents: {intent_figures(ids)}")
    print(f"  wall time, first create to last end: {wall.total_seconds():.1f} s")
    print(
        f"  per onboarding: run median {statistics.median(runs):.2f} s, fakes' latency median "
        f"{statistics.median(fakes):.2f} s, engine median {statistics.median(engine):.2f} s"
    )
    print(f"  engine share of run time: {sum(engine) / sum(runs) * 100:.1f}% (sum over onboardings)")
    for name, median in step_medians(ids):
        print(f"    step {name}: median {median:.2f} s")
    print(f"  load average: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


def intent_figures(ids: list[str]) -> str:
    """Keywords by who decided their intent, and what the LLM calls cost, over the run's domains."""
    from django.db.models import Count, Sum

    from ingest.engine.models import ApiCost
    from ingest.rankdisco.models import RankedKeyword

    names = [f"site{i[-3:]}.example" for i in ids]
    by = dict(
        RankedKeyword.objects.filter(domain__tenant="bench", domain__name__in=names)
        .values_list("intent_source")
        .annotate(n=Count("id"))
    )
    spent = ApiCost.objects.filter(instance_id__in=ids, metadata__stage="keyword_intent").aggregate(
        total=Sum("cost"), calls=Count("id")
    )
    return (
        f"{by.get('rules', 0)} by the rules, {by.get('llm', 0)} by the LLM, {by.get('', 0)} without; "
        f"{spent['calls']} LLM calls, ${spent['total'] or 0}"
    )


def step_medians(ids: list[str]) -> list[tuple[str, float]]:
    from ingest.engine.models import Step

    spans: dict[str, list[float]] = {}
    for name, start, end in Step.objects.filter(instance_id__in=ids, ended_at__isnull=False).values_list(
        "name", "started_at", "ended_at"
    ):
        spans.setdefault(name, []).append((end - start).total_seconds())
    return sorted(((n, statistics.median(v)) for n, v in spans.items()), key=lambda x: -x[1])


def _ranking_urls(domain: str) -> list[str]:
    """The ranking URLs the workflow sends to bulk_spam_score, in its order (the fake's latency
    for that task is keyed by them)."""
    from tests.fakes.dataforseo import ranked_keyword

    urls = [ranked_keyword(domain, i)["ranked_serp_element"]["serp_item"]["url"] for i in range(100)]
    return list(dict.fromkeys(urls))


if __name__ == "__main__":
    main()
