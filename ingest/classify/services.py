"""Writes to URL classification's tables. Keyword-only; each write is idempotent (a step may
run again after a crash or a retry)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
from django.utils import timezone

from ingest.classify.models import (
    DomainClassification,
    DomainFetchMethod,
    UrlClassification,
    UrlVector,
)
from ingest.classify.result import AXIS_NAMES, DOMAIN_AXES, ClassificationResult

__all__ = [
    "domain_classification_upsert", "fetch_method_remember", "url_classification_upsert",
    "url_hash", "url_vector_add",
]  # fmt: skip


def url_hash(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()


def url_classification_upsert(
    *, tenant: str, host: str, result: ClassificationResult, instance_id: str
) -> UrlClassification:
    """Store a URL's ClassificationResult; a URL classified again replaces its row."""
    now = timezone.now()
    values: dict[str, Any] = {
        "host": host, "url": result["url"], "confidence": result["confidence"],
        "modifiers": list(result.get("modifiers") or []),
        "classification_source": result["classification_source"], "stages_run": list(result["stages_run"]),
        "round": result.get("round", 0), "cost_usd": Decimal(str(result.get("cost_usd", 0))),
        "fetch_method": result.get("fetch_method") or "", "content_signals": result.get("content_signals"),
        "instance_id": instance_id, "duration_ms": result.get("duration_ms"), "updated_at": now,
    }  # fmt: skip
    for axis in AXIS_NAMES:
        values[axis] = result.get(axis) or ""
    row, _ = UrlClassification.objects.update_or_create(
        tenant=tenant, url_hash=url_hash(result["url"]), defaults=values, create_defaults={**values, "created_at": now}
    )
    return row


def domain_classification_upsert(
    *, tenant: str, host: str, confidence: int, labels: Mapping[str, Any], modifiers: Sequence[str],
    source: str, from_url: str = "",
) -> DomainClassification:  # fmt: skip
    """Set the host's domain-level classification (stage 0's cache). A weaker classification
    never replaces a stronger one."""
    current = DomainClassification.objects.filter(tenant=tenant, host=host).first()
    if current is not None and current.confidence > confidence:
        return current
    values: dict[str, Any] = {axis: labels.get(axis) or "" for axis in DOMAIN_AXES}
    values |= {"confidence": confidence, "modifiers": list(modifiers), "source": source, "from_url": from_url,
               "updated_at": timezone.now()}  # fmt: skip
    row, _ = DomainClassification.objects.update_or_create(tenant=tenant, host=host, defaults=values)
    return row


def fetch_method_remember(*, tenant: str, host: str, method: str) -> None:
    DomainFetchMethod.objects.update_or_create(
        tenant=tenant, host=host, defaults={"method": method, "updated_at": timezone.now()}
    )


def url_vector_add(
    *, tenant: str, model: str, url: str, vector: Sequence[float], labels: Mapping[str, Any], confidence: int
) -> bool:
    """Add a classified URL to the similarity index; False when it is already there (a URL's
    vector is fixed by its text and the model, so the first row stands)."""
    digest = url_hash(url)
    if UrlVector.objects.filter(tenant=tenant, model=model, url_hash=digest).exists():
        return False
    row = UrlVector(
        tenant=tenant, model=model, url_hash=digest, url=url, dim=len(vector),
        vector=np.asarray(vector, dtype="<f4").tobytes(), labels=dict(labels), confidence=confidence,
        created_at=timezone.now(),
    )  # fmt: skip
    # ignore_conflicts: two workers adding the same URL at once both succeed, one row stays.
    UrlVector.objects.bulk_create([row], ignore_conflicts=True)
    return True
