"""URL classification's tables (url-classify's ledger): what each URL was classified as, the
domain-level classification stage 0 reuses, which fetch method works per domain (so a host
that needs JavaScript is not fetched natively again), and the vectors of the similarity index."""

from __future__ import annotations

from django.db import models


class ClassificationSource(models.TextChoices):
    """The stage that decided a classification."""

    CACHE = "cache", "Cache"
    RULES = "rules", "Rules"
    SIMILARITY = "similarity", "Similarity"
    CONTENT = "content", "Content"
    LLM = "llm", "LLM"


class UrlClassification(models.Model):
    """The latest ClassificationResult of a URL in a tenant; re-classifying updates the row."""

    tenant = models.CharField(max_length=100)
    host = models.CharField(max_length=255)
    url = models.TextField()
    url_hash = models.CharField(max_length=64)  # sha256 of the URL as given
    confidence = models.IntegerField()
    domain_type = models.CharField(max_length=50, blank=True, default="")
    page_type = models.CharField(max_length=50, blank=True, default="")
    tactic_type = models.CharField(max_length=50, blank=True, default="")
    channel_bucket = models.CharField(max_length=50, blank=True, default="")
    media_type = models.CharField(max_length=50, blank=True, default="")
    modifiers = models.JSONField(default=list)
    classification_source = models.CharField(max_length=20, choices=ClassificationSource.choices)
    stages_run = models.JSONField(default=list)
    round = models.IntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    fetch_method = models.CharField(max_length=30, blank=True, default="")
    content_signals = models.JSONField(null=True, blank=True)
    instance_id = models.CharField(max_length=100, blank=True, default="")
    # The run's wall time from its start to its result; null for a run that did not measure it.
    duration_ms = models.IntegerField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "url_hash"], name="urlcls_tenant_url")]
        indexes = [
            models.Index(fields=["tenant", "host"], name="urlcls_tenant_host"),
            models.Index(fields=["tenant", "classification_source"], name="urlcls_tenant_source"),
            models.Index(fields=["tenant", "-updated_at"], name="urlcls_tenant_recent"),
        ]


class DomainClassification(models.Model):
    """A host's domain-level classification: stage 0 reuses it at confidence >= 60."""

    tenant = models.CharField(max_length=100)
    host = models.CharField(max_length=255)
    confidence = models.IntegerField()
    domain_type = models.CharField(max_length=50, blank=True, default="")
    tactic_type = models.CharField(max_length=50, blank=True, default="")
    channel_bucket = models.CharField(max_length=50, blank=True, default="")
    media_type = models.CharField(max_length=50, blank=True, default="")
    modifiers = models.JSONField(default=list)
    source = models.CharField(max_length=20, choices=ClassificationSource.choices)
    from_url = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "host"], name="domcls_tenant_host")]


class DomainFetchMethod(models.Model):
    """The cheapest fetch method that last worked for a host; the cascade starts there."""

    tenant = models.CharField(max_length=100)
    host = models.CharField(max_length=255)
    method = models.CharField(max_length=30)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "host"], name="domfetch_tenant_host")]


class UrlVector(models.Model):
    """A confidently classified URL's embedding (little-endian float32, `dim` of them) and its
    labels: the similarity stage's nearest-neighbour index (ingest/classify/neighbours.py)."""

    tenant = models.CharField(max_length=100)
    model = models.CharField(max_length=100)
    url_hash = models.CharField(max_length=64)
    url = models.TextField()
    dim = models.IntegerField()
    vector = models.BinaryField()
    labels = models.JSONField(default=dict)  # the five axes and modifiers of the classification
    confidence = models.IntegerField()
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "model", "url_hash"], name="urlvec_tenant_model_url"),
        ]
        # The index is loaded per (tenant, model) in id order, then followed by id.
        indexes = [models.Index(fields=["tenant", "model", "id"], name="urlvec_load")]
