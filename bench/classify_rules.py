"""URL rules benchmark: how many URLs a second stage 1 of url-classify (the rules engine) takes.

    .venv/bin/python bench/classify_rules.py --urls 100000 --runs 5

The corpus mixes what a backlink and ranking profile holds: the fake DataForSEO's backlink
sources (YouTube, GitHub, Reddit, news, blogs, stores, throwaway domains…, deterministic per
seed), every example URL of the rules file, and ranking URLs of company sites (pricing, docs,
blog posts). It loads and compiles the rules once (timed apart), then classifies the corpus
`--runs` times in one thread and prints URLs per second (median and best), microseconds per
URL, and what share of the URLs the rules decide at or above the pipeline's early exit (70)
and what share no rule matches at all.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ingest.classify.matcher import RulesMatcher  # noqa: E402
from ingest.classify.rules import load_rules  # noqa: E402
from ingest.classify.taxonomy import PIPELINE_MIN_CONFIDENCE  # noqa: E402
from tests.fakes.dataforseo import WORDS, source_url  # noqa: E402

PAGES = ("/", "/pricing", "/docs/getting-started", "/blog/{w}-{w2}", "/product/{w}", "/about",
         "/{w}/{w2}", "/login", "/careers/{w}-engineer", "/{w}-vs-{w2}", "/2024/05/{w}-{w2}")  # fmt: skip


def corpus(size: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    examples = [example.url for rule in load_rules() for example in rule.examples]
    urls: list[str] = []
    while len(urls) < size:
        roll = rng.random()
        if roll < 0.6:
            urls.append(source_url(rng))
        elif roll < 0.8:
            page = rng.choice(PAGES).format(w=rng.choice(WORDS), w2=rng.choice(WORDS))
            urls.append(f"https://www.{rng.choice(WORDS)}{rng.randint(1, 999)}.com{page}")
        else:
            urls.append(rng.choice(examples))
    return urls


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--urls", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    load_rules.cache_clear()
    matcher = RulesMatcher(load_rules())
    compile_ms = (time.perf_counter() - started) * 1000
    urls = corpus(args.urls, args.seed)

    rates = []
    for _ in range(args.runs):
        started = time.perf_counter()
        results = [matcher.classify(url) for url in urls]
        rates.append(len(urls) / (time.perf_counter() - started))

    decided = sum(1 for r in results if r.confidence >= PIPELINE_MIN_CONFIDENCE) / len(results)
    unmatched = sum(1 for r in results if not r.rules) / len(results)
    median = statistics.median(rates)
    print(f"rules: {len(matcher.rules)} (loaded and compiled in {compile_ms:.1f} ms)")
    print(f"corpus: {len(urls):,} URLs, {args.runs} runs, one thread")
    print(f"throughput: {median:,.0f} URLs/s median, {max(rates):,.0f} best "
          f"({1e6 / median:.1f} µs per URL)")  # fmt: skip
    print(f"decided by rules (confidence >= {PIPELINE_MIN_CONFIDENCE}): {decided:.1%}; "
          f"no rule matched: {unmatched:.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
