"""What bench/rankdisco_onboard.py's worker processes import (RUNLEDGER_WORKFLOW_MODULES):
domain-onboard's clients pointed at the bench's fake DataForSEO and fake web (BENCH_DFS_URL,
BENCH_WEB_URL) and, in place of the shipped `url-classify`, a rules-only one for its fan-out
with BENCH_CLASSIFY=1, or none with BENCH_CLASSIFY=0 (domain-onboard then skips classification:
it classifies only when a `url-classify` is registered)."""

from __future__ import annotations

import os
from typing import Any

import requests

from ingest.classify.matcher import rules_classify
from ingest.engine import Workflow
from ingest.engine import workflow as registry
from ingest.sources.dataforseo import DataForSEOClient
from ingest.sources.zenrows import NativeFetcher
from ingest.workflows.domain_onboard import OnboardClients, clients_install


class SiteSession(requests.Session):
    """A native fetch of https://host/path reads the fake web's /site/host/path."""

    def request(self, method: Any, url: Any, *args: Any, **kwargs: Any) -> requests.Response:
        base = os.environ["BENCH_WEB_URL"]
        text = str(url)
        if not text.startswith(base):
            rest = text.split("/", 3)
            text = f"{base}/site/{rest[2]}/{rest[3] if len(rest) > 3 else ''}"
        return super().request(method, text, *args, **kwargs)


def bench_clients() -> OnboardClients:
    return OnboardClients(
        dataforseo=DataForSEOClient(login="dfs-login", password="dfs-password", base_url=os.environ["BENCH_DFS_URL"]),
        native=NativeFetcher(session=SiteSession()),
    )


if os.environ.get("BENCH_DFS_URL"):
    clients_install(bench_clients)

# The app registers the shipped url-classify in every process (IngestConfig.ready); the bench
# takes its name away, so "without classification" classifies nothing and "with" runs the
# rules-only stand-in below, not the shipped four stages.
registry._registry.pop("url-classify", None)

if os.environ.get("BENCH_CLASSIFY") == "1":

    class RulesOnlyUrlClassify(Workflow):
        """Stage 1 only: the URL rules' answer as a ClassificationResult."""

        name = "url-classify"

        def run(self, event: Any, step: Any) -> dict[str, Any]:
            url = str(event.payload["url"])
            rules = step.do("rules", lambda ctx: rules_classify(url).as_dict())
            return {
                "url": url,
                "confidence": rules["confidence"],
                "domain_type": rules["domain_type"],
                "page_type": rules["page_type"],
                "modifiers": rules["modifiers"],
                "classification_source": "rules",
                "stages_run": ["rules"],
                "round": 0,
                "cost_usd": 0.0,
            }
