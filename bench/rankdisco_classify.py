"""url-classify benchmark: 10,000 URLs through the four stages against the fakes.

    DATABASE_URL=postgres://… .venv/bin/python bench/rankdisco_classify.py --urls 10000

The corpus is what a backlink and ranking profile holds (deterministic per --seed): platform
URLs the rules know (YouTube, GitHub, Reddit, news…, from the fake DataForSEO's backlink
sources), many pages of a few hundred company sites (the first confident page of a site puts
its domain in the cache), and one-off pages of unknown blogs and shops (similarity, content,
LLM). Some company sites are bot-protected (ZenRows basic gets through), a few only let ZenRows
premium through, a few are gone. Native fetches go through the fake web (RUNLEDGER_FETCH_PROXY),
ZenRows and the LLM (gpt-4o-mini prices) are the fakes; embeddings are WordLlama (offline).

The instances are created in batches of 100 (with `--pack K`, one parent per 100 URLs fanning
them out to url-classify, K URLs a carrier instance: the product's domain-onboard path) and run
in this process with the engine's clock
advanced over the LLM's 30 s backoffs (`run_until_idle`), one thread. It prints URLs per
second, the share of URLs each stage decided and the share that ran each stage, the cost per
URL, and the ledger's cost total reconciled to the cent against what the fakes reported
(ZenRows' X-Request-Cost sum, the LLM's usage priced at the list price).
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TENANT = "bench-classify"
PAGES = ("/", "/pricing", "/docs/getting-started", "/blog/{w}-{w2}", "/product/{w}", "/about", "/{w}/{w2}",
         "/login", "/careers/{w}-engineer", "/{w}-vs-{w2}", "/2024/05/{w}-{w2}", "/how-to-{w}")  # fmt: skip
KINDS = ("blog", "shop", "news", "docs", "review", "studio", "labs", "store")


def corpus(size: int, seed: int) -> tuple[list[str], set[str], set[str], set[str]]:
    from tests.fakes.dataforseo import WORDS, source_url

    rng = random.Random(seed)
    sites = [f"www.{rng.choice(WORDS)}{i}.com" for i in range(300)]
    protected = set(rng.sample(sites, 30))
    premium_only = set(rng.sample(sorted(set(sites) - protected), 9))
    gone = set(rng.sample(sorted(set(sites) - protected - premium_only), 6))
    urls: list[str] = []
    while len(urls) < size:
        roll = rng.random()
        if roll < 0.45:
            urls.append(source_url(rng))
        elif roll < 0.85:
            page = rng.choice(PAGES).format(w=rng.choice(WORDS), w2=rng.choice(WORDS))
            urls.append(f"http://{rng.choice(sites)}{page}")
        else:
            page = rng.choice(PAGES).format(w=rng.choice(WORDS), w2=rng.choice(WORDS))
            urls.append(f"http://{rng.choice(WORDS)}-{rng.choice(KINDS)}{rng.randint(1, 10**6)}.net{page}")
    return urls, protected, premium_only, gone


def setup(database: str) -> None:
    os.environ["DATABASE_URL"] = database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def clear() -> None:
    from ingest.classify.models import (
        DomainClassification,
        DomainFetchMethod,
        UrlClassification,
        UrlVector,
    )
    from ingest.engine.models import ApiCost, History, Instance

    for model in (History, ApiCost, Instance, UrlClassification, DomainClassification, DomainFetchMethod, UrlVector):
        model.objects.filter(tenant=TENANT).delete()


def register_fan_out() -> None:
    """The parent `--pack` creates per 100 URLs: a fan-out to url-classify, `pack` URLs a carrier."""
    from ingest.engine import Workflow

    class ClassifyFanOut(Workflow):
        name = "bench-classify-fan-out"

        def run(self, event: Any, step: Any) -> int:
            p = event.payload
            settled = step.fan_out("classify", "url-classify", p["urls"], pack=p["pack"], timeout="1 day")
            return sum(1 for s in settled if s.ok)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--pack", type=int, default=0, help="URLs per carrier instance; 0: an instance per URL")
    args = parser.parse_args(argv)
    database = os.environ.get("DATABASE_URL") or f"sqlite:///{tempfile.gettempdir()}/runledger_bench_classify.sqlite3"
    setup(database)
    register_fan_out()

    from django.db.models import Count, Sum

    from ingest.classify.models import UrlClassification
    from ingest.engine import create, create_batch
    from ingest.engine.models import ApiCost, FanOutItem, Instance
    from ingest.engine.worker.turns import run_until_idle
    from ingest.pipelines.pricing import DEFAULT_PRICES, cost_for
    from ingest.pipelines.selectors import config_cache_clear
    from ingest.sources.llm import usage_from_openai
    from tests.fakes.classify import FakeClassifyLLM, FakeWeb

    urls, protected, premium_only, gone = corpus(args.urls, args.seed)
    clear()
    with FakeWeb(protected=protected, premium_only=premium_only, gone=gone) as web, FakeClassifyLLM() as llm:
        # The LLM from the environment (a tenant connection would need the secrets key).
        os.environ |= {
            "RUNLEDGER_FETCH_PROXY": web.url,
            "RUNLEDGER_ZENROWS_API_KEY": "zr-key",
            "RUNLEDGER_ZENROWS_BASE_URL": f"{web.url}/v1/",
            "RUNLEDGER_EMBEDDINGS": "wordllama",
            "RUNLEDGER_LLM_PROVIDER": "openai",
            "RUNLEDGER_LLM_BASE_URL": f"{llm.url}/v1",
            "RUNLEDGER_LLM_API_KEY": "sk-fake",
            "RUNLEDGER_LLM_MODEL": "gpt-4o-mini",
        }
        config_cache_clear()
        from ingest.workflows.url_classify.clients import embedder_choice

        embedder_choice().embedder.embed(["warm up"])  # type: ignore[union-attr]  # load WordLlama outside the timing
        started = time.perf_counter()
        for i in range(0, len(urls), 100):
            batch = [{"url": u} for u in urls[i : i + 100]]
            if args.pack:
                create("bench-classify-fan-out", params={"urls": batch, "pack": args.pack}, tenant=TENANT)
            else:
                create_batch("url-classify", [{"params": p, "tenant": TENANT} for p in batch])
            run_until_idle(advance_clock=True)
        elapsed = time.perf_counter() - started

        statuses = dict(Instance.objects.filter(tenant=TENANT).values_list("status").annotate(n=Count("id")))
        # Every run's own result (a URL met twice has two; its UrlClassification row keeps the latest).
        if args.pack:
            results = FanOutItem.objects.filter(fan_out__instance__tenant=TENANT).values_list("result", flat=True)
        else:
            results = Instance.objects.filter(tenant=TENANT, workflow="url-classify").values_list("output", flat=True)
        outputs = [o for o in results if o]
        decided = collections.Counter(o["classification_source"] for o in outputs)
        ran: collections.Counter[str] = collections.Counter(s for o in outputs for s in o["stages_run"])
        fetched = collections.Counter(o["fetch_method"] for o in outputs if o["fetch_method"])
        results_total = sum((Decimal(str(o["cost_usd"])) for o in outputs), Decimal(0))
        distinct = UrlClassification.objects.filter(tenant=TENANT).count()
        ledger = ApiCost.objects.filter(tenant=TENANT).aggregate(t=Sum("cost"))["t"] or Decimal(0)
        by_service = dict(ApiCost.objects.filter(tenant=TENANT).values_list("service").annotate(t=Sum("cost")))
        now = ApiCost.objects.filter(tenant=TENANT).latest("created_at").created_at
        llm_billed = sum((cost_for(usage_from_openai(u, service="openai", model="gpt-4o-mini"), DEFAULT_PRICES, now)
                          for u in llm.usages), Decimal(0))  # fmt: skip
        fakes = web.billed + llm_billed

    total = len(urls)
    print(f"database: {database.split('://')[0]}; load average before/after: {load_before} / {load_average()}")
    print(f"urls: {total:,} ({distinct:,} distinct), instances: {statuses}, pack: {args.pack or 'none'}")
    print(f"throughput: {total / elapsed:,.1f} URLs/s ({elapsed:.1f} s, one process, one thread, "
          f"{1000 * elapsed / total:.2f} ms per URL)")  # fmt: skip
    print(
        "decided by (classification_source): "
        + ", ".join(f"{s} {decided[s] / total:.1%}" for s in ("cache", "rules", "similarity", "content", "llm"))
    )
    print(
        "ran (stages_run): "
        + ", ".join(f"{s} {ran[s] / total:.1%}" for s in ("cache", "rules", "similarity", "content", "llm"))
    )
    print("fetched by: " + ", ".join(f"{m} {n}" for m, n in sorted(fetched.items())))
    print(
        f"cost: ${ledger:.6f} in api_costs ("
        + ", ".join(f"{k} ${v:.6f}" for k, v in sorted(by_service.items()))
        + f"); ${ledger / total:.6f} per URL"
    )
    print(
        f"fakes reported: ${fakes:.6f} (ZenRows X-Request-Cost ${web.billed:.6f}, LLM usage priced ${llm_billed:.6f})"
    )
    print(
        f"reconciled: ledger - fakes = ${ledger - fakes:.6f} "
        f"({'to the cent' if abs(ledger - fakes) < Decimal('0.005') else 'MISMATCH'}); "
        f"results' cost_usd sum ${results_total:.6f}"
    )


load_before = load_average()

if __name__ == "__main__":
    main()
