"""`url-classify`: the URL classification pipeline (the workflow, its stages' step
bodies, the clients it talks to). Importing it registers the workflow."""

from __future__ import annotations

from ingest.workflows.url_classify.workflow import WORKFLOW, UrlClassify, url_classify_start

__all__ = ["WORKFLOW", "UrlClassify", "url_classify_start"]
