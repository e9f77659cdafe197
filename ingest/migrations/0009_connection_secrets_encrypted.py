"""Connections' credentials encrypted at rest (ingest.engine.secrets; docs/secrets.md).

`key`, `secret` and `webhook_key` become encrypted text; the Salesforce refresh token moves out
of `options` into its own encrypted column; the webhook key gains its lookup hash; the
Salesforce access token gets encrypted columns of its own (with its expiry and instance URL).

Existing rows are encrypted in place with the first key of RUNLEDGER_SECRET_KEYS (the migration
stops with an error naming the variable when there are rows and no key). Reversible: going back
decrypts them into the plain columns again, the refresh token into `options`.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import migrations, models

import ingest.engine.secrets
from ingest.engine.secrets import lookup_hash, seal, unseal

COLUMNS = ("key", "secret", "webhook_key")


def _rows(cursor: Any) -> list[tuple[Any, ...]]:
    cursor.execute("SELECT id, key, secret, webhook_key, CAST(options AS text), refresh_token "
                   "FROM ingest_connection")
    return list(cursor.fetchall())


def _options_param(schema_editor: Any) -> str:
    return "%s::jsonb" if schema_editor.connection.vendor == "postgresql" else "%s"


def forwards(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        for pk, key, secret, webhook_key, options_text, _ in _rows(cursor):
            options = json.loads(options_text or "{}")
            refresh = str(options.pop("refresh_token", "") or "")
            cursor.execute(
                f"UPDATE ingest_connection SET key = %s, secret = %s, webhook_key = %s, "
                f"webhook_key_hash = %s, refresh_token = %s, options = {_options_param(schema_editor)} "
                "WHERE id = %s",
                [seal(key), seal(secret), seal(webhook_key), lookup_hash(webhook_key), seal(refresh),
                 json.dumps(options), pk],
            )


def backwards(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        for pk, key, secret, webhook_key, options_text, refresh in _rows(cursor):
            options = json.loads(options_text or "{}")
            if refresh:
                options["refresh_token"] = unseal(refresh)
            cursor.execute(
                f"UPDATE ingest_connection SET key = %s, secret = %s, webhook_key = %s, "
                f"options = {_options_param(schema_editor)} WHERE id = %s",
                [unseal(key), unseal(secret), unseal(webhook_key), json.dumps(options), pk],
            )


class Migration(migrations.Migration):
    dependencies = [("ingest", "0008_fact_fewer_indexes")]

    operations = [
        *[
            migrations.AlterField(
                model_name="connection", name=name,
                field=ingest.engine.secrets.EncryptedTextField(blank=True, default=""),
            )
            for name in COLUMNS
        ],
        migrations.AddField(
            model_name="connection", name="refresh_token",
            field=ingest.engine.secrets.EncryptedTextField(blank=True, default="",
                                                           help_text="Salesforce OAuth refresh token"),
        ),
        migrations.AddField(
            model_name="connection", name="webhook_key_hash",
            field=models.CharField(blank=True, db_index=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="connection", name="access_token",
            field=ingest.engine.secrets.EncryptedTextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="connection", name="access_token_expires_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="connection", name="instance_url",
            field=models.CharField(blank=True, default="", max_length=300),
        ),
        migrations.RunPython(forwards, backwards),
    ]
