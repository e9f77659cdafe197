"""The migrations that encrypt existing secrets in place, and decrypt them going back."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from ingest.pipelines.models import Connection
from ingest.pipelines.selectors import connection_by_webhook_key
from ingest.triggers.models import IngressSecret

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("ingest", "0008_fact_fewer_indexes"), ("triggers", "0002_seen_signature")]
AFTER = [("ingest", "0009_connection_secrets_encrypted"), ("triggers", "0003_ingress_secret_encrypted")]


def migrate(targets: list[tuple[str, str]]) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


def migrate_to_latest() -> None:
    """Every app to its newest migration, as the rest of the suite expects the schema (AFTER is
    not the newest once later migrations exist: tests after this one met a missing column)."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def rows() -> tuple[tuple[str, ...], str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, secret, webhook_key, CAST(options AS TEXT) FROM ingest_connection")
        conn = cursor.fetchone()
        cursor.execute("SELECT hmac_secret FROM triggers_ingresssecret")
        return conn, cursor.fetchone()[0]


def test_existing_plain_secrets_are_encrypted_forwards_and_decrypted_backwards() -> None:
    migrate(BEFORE)
    options = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO ingest_connection (tenant, kind, base_url, key, secret, options, webhook_key, enabled, "
            f"updated_at) VALUES ('acme', 'salesforce', '', 'cid', 'csecret', {options}, 'hookkey', TRUE, "
            "CURRENT_TIMESTAMP)",
            [json.dumps({"refresh_token": "rtok", "organization_id": "00D"})],
        )
        cursor.execute(
            "INSERT INTO triggers_ingresssecret (tenant, name, token_hash, token_prefix, hmac_secret, "
            "enabled, created_at) VALUES ('acme', 'default', 'h', 'p', 'hsecret', TRUE, CURRENT_TIMESTAMP)"
        )
    try:
        migrate(AFTER)
        (key, secret, webhook_key, opts), hmac_secret = rows()
        assert all(v.startswith("enc:") for v in (key, secret, webhook_key, hmac_secret))
        assert json.loads(opts) == {"organization_id": "00D"}
        # The models read the rows once every later migration has added its columns.
        migrate_to_latest()
        row = Connection.objects.get()
        assert (row.key, row.secret, row.refresh_token) == ("cid", "csecret", "rtok")
        assert connection_by_webhook_key(kind="salesforce", key="hookkey") == row
        assert IngressSecret.objects.values_list("hmac_secret", flat=True).get() == "hsecret"

        migrate(BEFORE)
        (key, secret, webhook_key, opts), hmac_secret = rows()
        assert (key, secret, webhook_key, hmac_secret) == ("cid", "csecret", "hookkey", "hsecret")
        assert json.loads(opts) == {"organization_id": "00D", "refresh_token": "rtok"}
    finally:
        migrate_to_latest()
        Connection.objects.all().delete()
        IngressSecret.objects.all().delete()
