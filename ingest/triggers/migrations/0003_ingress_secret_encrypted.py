"""Ingress HMAC secrets encrypted at rest (ingest.engine.secrets; docs/secrets.md).

Existing secrets are encrypted in place with the first key of RUNLEDGER_SECRET_KEYS (an error
naming the variable when there are rows and no key). Reversible: going back decrypts them.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

import ingest.engine.secrets
from ingest.engine.secrets import seal, unseal


def _rewrite(schema_editor: Any, change: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT id, hmac_secret FROM triggers_ingresssecret")
        for pk, value in list(cursor.fetchall()):
            cursor.execute("UPDATE triggers_ingresssecret SET hmac_secret = %s WHERE id = %s", [change(value), pk])


def forwards(apps: Any, schema_editor: Any) -> None:
    _rewrite(schema_editor, seal)


def backwards(apps: Any, schema_editor: Any) -> None:
    _rewrite(schema_editor, unseal)


class Migration(migrations.Migration):
    dependencies = [("triggers", "0002_seen_signature")]

    operations = [
        migrations.AlterField(
            model_name="ingresssecret", name="hmac_secret",
            field=ingest.engine.secrets.EncryptedTextField(),
        ),
        migrations.RunPython(forwards, backwards),
    ]
