"""The pipelines' workflows, one module each, with the steps they share (`common`), the
extractor a tenant's LLM connection picks (`providers`) and the webhooks that start them
(`hooks`). Importing this package registers every workflow with the engine (IngestConfig.ready
does so in every process: web, worker, scheduler)."""

from __future__ import annotations

from ingest.workflows.domain_onboard import DomainOnboard, domain_onboard_start
from ingest.workflows.gong import GongIngest, gong_ingest_start
from ingest.workflows.reconcile import ConnectionsReconcile
from ingest.workflows.salesforce import SalesforceIngest, salesforce_ingest_start
from ingest.workflows.url_classify import UrlClassify, url_classify_start

__all__ = [
    "ConnectionsReconcile",
    "DomainOnboard",
    "GongIngest",
    "SalesforceIngest",
    "UrlClassify",
    "domain_onboard_start",
    "gong_ingest_start",
    "salesforce_ingest_start",
    "url_classify_start",
]
