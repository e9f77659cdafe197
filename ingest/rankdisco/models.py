"""RankDisco's tables. Every row carries its tenant; the children are unique per domain on the
natural key DataForSEO gives them, so a second onboarding updates rows instead of adding them.
Writes go through `ingest.rankdisco.services`; nothing here has logic."""

from __future__ import annotations

from decimal import Decimal

from django.db import models


class OnboardStatus(models.TextChoices):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    COMPLETED_WITH_ERRORS = "completed_with_errors"
    FAILED = "failed"


class Domain(models.Model):
    """One domain of a tenant with its onboarding state."""

    tenant = models.CharField(max_length=100)
    name = models.CharField(max_length=253, help_text="the host name, lower case, without www.")
    onboard_status = models.CharField(max_length=24, choices=OnboardStatus.choices, default=OnboardStatus.PENDING)
    onboard_started_at = models.DateTimeField(null=True, blank=True)
    onboard_completed_at = models.DateTimeField(null=True, blank=True)
    onboard_duration_ms = models.IntegerField(null=True, blank=True)
    onboard_instance_id = models.CharField(max_length=100, blank=True, default="")
    onboard_count = models.IntegerField(default=0, help_text="how many onboardings started")
    # Counters, set by domain-onboard's store steps and its track-all-queued step.
    backlinks_count = models.IntegerField(default=0)
    keywords_count = models.IntegerField(default=0)
    referring_domains_count = models.IntegerField(default=0)
    brand_properties_count = models.IntegerField(default=0)
    urls_queued_for_classification = models.IntegerField(default=0)
    keywords_queued_for_classification = models.IntegerField(default=0)
    classification_started_at = models.DateTimeField(null=True, blank=True)
    classification_completed_at = models.DateTimeField(null=True, blank=True)
    # The last onboarding's WorkflowResult metrics, classifications by source stage included.
    metrics = models.JSONField(default=dict, blank=True)
    errors = models.JSONField(default=list, blank=True)
    cost_usd = models.DecimalField(
        max_digits=14,
        decimal_places=6,
        default=Decimal(0),
        help_text="what the last onboarding spent (its api_costs rows)",
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="rankdisco_domain_tenant_name")]
        indexes = [models.Index(fields=["tenant", "onboard_status"], name="rankdisco_domain_status")]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant})"


class Backlink(models.Model):
    """A link to the domain, keyed by (url_from, url_to) through `key` (their sha256)."""

    tenant = models.CharField(max_length=100)
    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="backlinks")
    key = models.CharField(max_length=64)
    url_from = models.TextField()
    url_to = models.TextField()
    domain_from = models.CharField(max_length=253, blank=True, default="")
    anchor = models.TextField(blank=True, default="")
    dofollow = models.BooleanField(default=False)
    domain_from_rank = models.IntegerField(null=True, blank=True)
    page_from_rank = models.IntegerField(null=True, blank=True)
    spam_score = models.IntegerField(null=True, blank=True)
    first_seen = models.CharField(max_length=40, blank=True, default="")
    last_seen = models.CharField(max_length=40, blank=True, default="")
    is_lost = models.BooleanField(default=False)
    # The url-classify result for url_from (a `ClassificationResult`, as JSON).
    classification_source = models.CharField(max_length=20, blank=True, default="")
    classification = models.JSONField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["domain", "key"], name="rankdisco_backlink_key")]


class KeywordIntent(models.TextChoices):
    """A keyword's search intent, as SEO tools tag keywords."""

    INFORMATIONAL = "informational"
    NAVIGATIONAL = "navigational"
    COMMERCIAL = "commercial"
    TRANSACTIONAL = "transactional"


class IntentSource(models.TextChoices):
    RULES = "rules"
    LLM = "llm", "LLM"


class RankedKeyword(models.Model):
    """A keyword the domain ranks for, with the ranking URL and that URL's spam score, and the
    keyword's search intent (set by domain-onboard's keyword-intent steps; "" until classified)."""

    tenant = models.CharField(max_length=100)
    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="keywords")
    keyword = models.CharField(max_length=500)
    search_volume = models.IntegerField(null=True, blank=True)
    cpc = models.FloatField(null=True, blank=True)
    competition = models.FloatField(null=True, blank=True)
    serp_type = models.CharField(max_length=40, blank=True, default="")
    rank_group = models.IntegerField(null=True, blank=True)
    rank_absolute = models.IntegerField(null=True, blank=True)
    url = models.TextField(blank=True, default="")
    etv = models.FloatField(null=True, blank=True)
    url_spam_score = models.IntegerField(null=True, blank=True)
    classification_source = models.CharField(max_length=20, blank=True, default="")
    classification = models.JSONField(null=True, blank=True)
    intent = models.CharField(max_length=16, choices=KeywordIntent.choices, blank=True, default="")
    intent_source = models.CharField(
        max_length=8,
        choices=IntentSource.choices,
        blank=True,
        default="",
        help_text="rules, or llm when the rules could not decide",
    )
    intent_confidence = models.IntegerField(null=True, blank=True, help_text="0-100")
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["domain", "keyword"], name="rankdisco_keyword_domain")]
        indexes = [models.Index(fields=["domain", "intent"], name="rankdisco_keyword_intent")]


class ReferringDomain(models.Model):
    tenant = models.CharField(max_length=100)
    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="referring_domains")
    referring_domain = models.CharField(max_length=253)
    rank = models.IntegerField(null=True, blank=True)
    backlinks = models.IntegerField(default=0)
    referring_pages = models.IntegerField(default=0)
    spam_score = models.IntegerField(null=True, blank=True)
    first_seen = models.CharField(max_length=40, blank=True, default="")
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["domain", "referring_domain"], name="rankdisco_referring_domain")
        ]


class BrandPropertyKind(models.TextChoices):
    YOUTUBE_CHANNEL = "youtube_channel"
    SOCIAL_PROFILE = "social_profile"


class BrandProperty(models.Model):
    """A YouTube channel or social profile the domain's own pages link to."""

    tenant = models.CharField(max_length=100)
    domain = models.ForeignKey(Domain, on_delete=models.CASCADE, related_name="brand_properties")
    kind = models.CharField(max_length=20, choices=BrandPropertyKind.choices)
    network = models.CharField(max_length=20)
    url = models.CharField(max_length=500)
    found_on = models.TextField(blank=True, default="", help_text="the page that linked to it")
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["domain", "url"], name="rankdisco_brand_property_url")]


class DataForSEOAnswer(models.Model):
    """A DataForSEO task answer kept for re-use (the lookup cache), per tenant, endpoint and task.

    `task_key` is the digest of the task (its target and options); `answer` the task object as
    DataForSEO answered it, `cost` what it was billed, `fetched_by` the idempotency key of the step
    that paid for it. One row per key, refreshed in place once it has expired."""

    tenant = models.CharField(max_length=100)
    endpoint = models.CharField(max_length=200)
    task_key = models.CharField(max_length=64)
    target = models.CharField(max_length=300, blank=True, default="")
    answer = models.JSONField()
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    fetched_by = models.CharField(max_length=500, blank=True, default="")
    fetched_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "endpoint", "task_key"], name="rankdisco_answer_task")]
