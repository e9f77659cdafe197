"""The pipelines' tables: facts and their embeddings, keyword lists, signal evaluations, prices
and the per-tenant connections to Gong, Salesforce and the LLM provider.

Writes go through `ingest.pipelines.services` (facts: `ingest.pipelines.fact_writes`), reads
through `ingest.pipelines.selectors`; nothing here has logic.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Upper

from ingest.engine.models import EncryptedTextField


class SourceAuthority(models.TextChoices):
    """Where a fact came from, which decides who wins a conflict: the more authoritative source."""

    GONG_ENGAGEMENT = "GongEngagement", "Gong call (engagement only)"
    GONG_CALL = "GongCall", "Gong call transcript"
    SFDC_FREE_TEXT = "SfdcFreeText", "Salesforce free text"
    SFDC_CUSTOM_FIELD = "SfdcCustomField", "Salesforce field"
    SFDC_OPPORTUNITY_STAGE = "SfdcOpportunityStage", "Salesforce opportunity stage fields"


class Fact(models.Model):
    """One fact about a deal. The id is `Fact.key(source)` (ingest.extraction): the same fact
    from the same source always gets the same id, so persisting it twice is a no-op."""

    id = models.CharField(primary_key=True, max_length=32)
    # No index of its own: the indexes below lead with the tenant (migration 0008).
    tenant = models.CharField(max_length=100)
    subject = models.CharField(max_length=300)
    predicate = models.CharField(max_length=100)
    object = models.JSONField()
    confidence = models.FloatField()
    source_authority = models.CharField(max_length=30, choices=SourceAuthority.choices)
    source_ref = models.CharField(max_length=200, help_text="e.g. gong:call:7123… or sfdc:Opportunity:006…")
    evidence = models.TextField(blank=True, default="")
    observed_at = models.DateTimeField(help_text="when the source said it (call start, record change)")
    ordinal = models.IntegerField(default=0, help_text="position in its batch: later wins a tie")
    valid = models.BooleanField(default=True)
    # On PostgreSQL the constraint is checked at once, not deferred to COMMIT (migration 0006);
    # Django does not model that, so an AlterField here must re-apply it. Indexed only where
    # set (`fact_superseded_by` below, migration 0013).
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes", db_index=False
    )
    instance_id = models.CharField(
        max_length=100, blank=True, default="", help_text="the workflow instance that wrote it"
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        # Each index costs every fact's insert an entry (migration 0013 dropped one no query used).
        indexes = [
            # The rivals of a new fact (same tenant, subject in any case, predicate, still valid):
            # without it each persist scanned every valid fact of its predicate.
            models.Index(F("tenant"), Upper("subject"), F("predicate"), name="fact_rivals", condition=Q(valid=True)),
            models.Index(fields=["tenant", "source_ref"], name="fact_tenant_source"),
            # A deleted fact's losers, for the reference's check and SET NULL: only the
            # superseded and outranked facts have an entry.
            models.Index(fields=["superseded_by"], name="fact_superseded_by", condition=Q(superseded_by__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.subject} {self.predicate} {self.object}"


class FactHead(models.Model):
    """The fact that currently wins a single-valued (tenant, subject, predicate), with what it
    is ranked by, so a new fact is ranked against one row found by its key.

    Written only by `ingest.pipelines.fact_writes.fact_insert_or_supersede` and its batch,
    `facts_insert_or_supersede`, which also lock this row to serialise the writers of a key. A
    head whose fact is gone or no longer valid (deleted, or edited by hand) is resolved again
    from the facts themselves by the next write of its key.
    """

    tenant = models.CharField(max_length=100)
    subject_key = models.CharField(max_length=300, help_text="the subject in upper case: subjects match in any case")
    predicate = models.CharField(max_length=100)
    fact_id = models.CharField(max_length=32, help_text="the valid fact of the key")
    source_authority = models.CharField(max_length=30, choices=SourceAuthority.choices)
    observed_at = models.DateTimeField()
    ordinal = models.IntegerField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "subject_key", "predicate"], name="fact_head_key"),
        ]

    def __str__(self) -> str:
        return f"{self.subject_key} {self.predicate} → {self.fact_id}"


class KeywordList(models.Model):
    """The keyword prefilter of a tenant: a call mentioning none of them is engagement only."""

    tenant = models.CharField(max_length=100, unique=True)
    keywords = models.JSONField(default=list, help_text="case-insensitive words or phrases")
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.tenant}: {len(self.keywords)} keywords"


class SignalEvaluation(models.Model):
    """One row per ingested batch with the ids of the facts it committed (replay and audit)."""

    instance_id = models.CharField(max_length=100, unique=True)
    tenant = models.CharField(max_length=100, db_index=True)
    workflow = models.CharField(max_length=200)
    source_ref = models.CharField(max_length=200)
    fact_ids = models.JSONField(default=list)
    fact_count = models.IntegerField(default=0)
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.instance_id}: {self.fact_count} facts"


class FactEmbedding(models.Model):
    """A fact's vector as little-endian float32 bytes (`dim` of them), searched by cosine."""

    fact = models.OneToOneField(Fact, primary_key=True, on_delete=models.CASCADE, related_name="embedding")
    tenant = models.CharField(max_length=100, db_index=True)
    model = models.CharField(max_length=100)
    dim = models.IntegerField()
    vector = models.BinaryField()
    text = models.TextField()
    created_at = models.DateTimeField()


class Price(models.Model):
    """A price row (USD) from `effective_from` on, until a newer row for the service and model.

    Token prices are per million tokens; an empty model prices the whole service. When this
    table has no matching row, `ingest.pipelines.pricing.DEFAULT_PRICES` applies.
    """

    service = models.CharField(max_length=100)
    model = models.CharField(max_length=200, blank=True, default="")
    effective_from = models.DateTimeField()
    input_per_million = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal("0"))
    cached_input_per_million = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal("0"))
    output_per_million = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal("0"))
    per_call = models.DecimalField(max_digits=14, decimal_places=8, default=Decimal("0"))
    per_item = models.DecimalField(max_digits=14, decimal_places=8, default=Decimal("0"))
    note = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["service", "model", "effective_from"], name="price_unique_from"),
        ]
        ordering = ["service", "model", "-effective_from"]

    def __str__(self) -> str:
        return f"{self.service}/{self.model or '*'} from {self.effective_from:%Y-%m-%d}"


class ConnectionKind(models.TextChoices):
    GONG = "gong", "Gong"
    SALESFORCE = "salesforce", "Salesforce"
    LLM = "llm", "LLM provider"
    DATAFORSEO = "dataforseo", "DataForSEO"
    ZENROWS = "zenrows", "ZenRows"


class Connection(models.Model):
    """How a tenant reaches an outside system, and the key its webhooks carry in the URL.

    gong: base_url, key (access key), secret; salesforce: base_url (login URL), key (client id),
    secret (client secret), refresh_token, options.organization_id; llm: options.provider
    ("rules", "openai", "anthropic", "demo"), base_url, secret (API key), options.model,
    options.service; dataforseo: base_url, key (API login), secret (API password); zenrows:
    base_url, secret (API key). Without a row, the environment (GONG_*, SALESFORCE_*,
    RUNLEDGER_LLM_*, RUNLEDGER_DATAFORSEO_*, RUNLEDGER_ZENROWS_*) applies.

    `last_tested_*`: the outcome of the operator's last "test connection" (one cheap call through
    the real client), written without moving `updated_at`, so a test never makes an open edit
    form stale.

    Credentials are encrypted at rest (ingest.engine.secrets, docs/secrets.md). The webhook key
    arrives in a URL and is found by `webhook_key_hash` (its HMAC under the secret keys); the key
    itself is kept encrypted so the admin can show its last characters. The Salesforce access
    token is kept, encrypted, with its expiry, so a restarted process reuses it.
    """

    tenant = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=ConnectionKind.choices)
    base_url = models.CharField(max_length=300, blank=True, default="")
    key = EncryptedTextField(blank=True, default="")
    secret = EncryptedTextField(blank=True, default="")
    refresh_token = EncryptedTextField(blank=True, default="", help_text="Salesforce OAuth refresh token")
    options = models.JSONField(default=dict, blank=True)
    webhook_key = EncryptedTextField(blank=True, default="")
    webhook_key_hash = models.CharField(max_length=64, blank=True, default="", db_index=True)
    access_token = EncryptedTextField(blank=True, default="")
    access_token_expires_at = models.DateTimeField(null=True, blank=True)
    instance_url = models.CharField(max_length=300, blank=True, default="")
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField()
    last_tested_at = models.DateTimeField(null=True, blank=True)
    last_test_ok = models.BooleanField(null=True, blank=True)
    last_test_message = models.TextField(
        blank=True, default="", help_text="what the test's call answered, or its error's class and message"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "kind"], name="connection_tenant_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant}: {self.kind}"


class ConnectionCursor(models.Model):
    """How far the scheduled pull of a Gong or Salesforce connection has reached
    (`connections-reconcile`): every call started, or record changed, before `cursor` has an
    instance. A row of its own, not fields of the connection: a pull writes it every few minutes
    and the webhooks' guard digests the connection row.

    `holder` / `held_until`: the instance whose pull runs now, so two pulls of one connection do
    not both spend the provider's rate limit (the cursor only moves forward, so a second pull
    would still be harmless). Written only by `ingest.pipelines.cursors`.
    """

    connection = models.OneToOneField(
        Connection, primary_key=True, on_delete=models.CASCADE, related_name="pull_cursor"
    )
    cursor = models.DateTimeField(null=True, blank=True, help_text="everything before it is started")
    window_start = models.DateTimeField(null=True, blank=True, help_text="what the last complete pull covered")
    window_end = models.DateTimeField(null=True, blank=True)
    listed = models.IntegerField(default=0, help_text="records the last complete pull listed")
    started = models.IntegerField(default=0, help_text="of which it started (the rest had an instance)")
    last_pull_at = models.DateTimeField(null=True, blank=True, help_text="when the last pull ended, either way")
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True, blank=True)
    holder = models.CharField(max_length=100, blank=True, default="")
    held_until = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.connection_id}: {self.cursor}"
