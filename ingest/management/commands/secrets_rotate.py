"""`manage.py secrets_rotate`: re-encrypt every secret at rest under the first key."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ingest.engine import SecretsError, configured_keys, lookup_hash
from ingest.engine.services.secrets import secrets_rotate
from ingest.pipelines.models import Connection


class Command(BaseCommand):
    help = (
        "Re-encrypt every secret stored by Runledger (connection credentials and webhook keys, "
        "ingress HMAC secrets, kept access tokens, sensitive step results and failures, sensitive "
        "params) under the first key of RUNLEDGER_SECRET_KEYS, and recompute the webhook keys' "
        "lookup hashes. To rotate: generate a key, put it FIRST in RUNLEDGER_SECRET_KEYS (keep the "
        "old ones after it), restart the processes, run this command, then drop the old keys and "
        "restart again. Safe to run while workers run, and to run twice. See docs/secrets.md."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        keys = configured_keys()
        if not keys:
            raise CommandError("RUNLEDGER_SECRET_KEYS is not set: there is no key to rotate to")
        try:
            counts = secrets_rotate(hooks={Connection: lambda c: {"webhook_key_hash": lookup_hash(c.webhook_key)}})
        except SecretsError as error:
            raise CommandError(str(error)) from None
        for table, count in counts.items():
            self.stdout.write(f"{table}: {count} rows re-encrypted")
        self.stdout.write(
            f"done: {sum(counts.values())} rows now under the first of {len(keys)} keys; "
            "the keys after it can be dropped"
        )
