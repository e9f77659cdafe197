"""`manage.py ingest_pull gong|salesforce --tenant T --from ISO --to ISO`: backfill a time range.

Lists the calls (Gong) or the opportunities changed (Salesforce) in [from, to) and starts one
ingest each, through the same functions the webhooks use; already ingested ones are counted as
already processed. Connection settings come from the tenant's Connection row, else the
environment (GONG_*, SALESFORCE_*); `--base-url` points the client elsewhere (a fake, a sandbox).
A worker runs the ingests, at the backfill priority, below live webhooks (ingest/workflows/sharing.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import islice
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from ingest.engine import redact
from ingest.pipelines.selectors import gong_config_get, salesforce_config_get
from ingest.sources.errors import SourceError
from ingest.sources.gong import GongCall
from ingest.sources.salesforce import ClientCredentials, RefreshToken, SalesforceClient
from ingest.workflows.gong import Started, gong_client
from ingest.workflows.reconcile import gong_calls_start
from ingest.workflows.salesforce import salesforce_ingest_start
from ingest.workflows.sharing import BACKFILL_PRIORITY

PAGE = 500  # calls listed before their ingests start: the progress bar moves, memory stays small
PULL_INLINE_WAIT = 60.0  # a command may sleep for its rate limit's next slot; a step may not
SOQL = (
    "SELECT Id, Name, StageName, Amount, CloseDate, Probability, Type, LeadSource, Description, "
    "Notes__c, Account.Name, Account.Industry, LastModifiedDate FROM Opportunity "
    "WHERE LastModifiedDate >= {start} AND LastModifiedDate < {end} ORDER BY LastModifiedDate"
)


def _when(value: str, flag: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(
            f"{flag} {value!r} is not an ISO date or time (e.g. 2025-03-01 or 2025-03-01T00:00Z)"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _batches(calls: Iterator[GongCall], size: int) -> Iterator[list[GongCall]]:
    while batch := list(islice(calls, size)):
        yield batch


class Command(BaseCommand):
    help = (
        "Pull Gong calls or Salesforce opportunities for a time range and start their ingests, "
        f"at priority {BACKFILL_PRIORITY}: below live webhooks (priority 0), so a backfill never "
        "queues ahead of them; tenants are served round robin either way."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", choices=["gong", "salesforce"])
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--from", dest="start", required=True, help="ISO date or time, inclusive")
        parser.add_argument("--to", dest="end", required=True, help="ISO date or time, exclusive")
        parser.add_argument(
            "--base-url",
            default=None,
            help="Gong API base URL or Salesforce login URL (default: the tenant's connection)",
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar (logs, CI)")

    def handle(self, *args: Any, **options: Any) -> None:
        start, end = _when(options["start"], "--from"), _when(options["end"], "--to")
        if end <= start:
            raise CommandError(f"--to {end.isoformat()} must be after --from {start.isoformat()}")
        tenant = options["tenant"]
        bar = tqdm(
            desc=f"{options['source']} → {tenant}",
            unit=" record",
            disable=options["no_progress"],
            file=self.stderr._out,
        )
        results: list[Started] = []
        try:
            pull = self._gong if options["source"] == "gong" else self._salesforce
            for started in pull(tenant, start, end, options["base_url"]):
                results.append(started)
                bar.update(1)
        except SourceError as error:
            raise CommandError(
                f"pulling from {options['source']} for tenant {tenant} failed after "
                f"{len(results)} record(s): {redact(str(error))}"
            ) from error
        finally:
            bar.close()
        created = sum(r.created for r in results)
        self.stdout.write(
            f"{created} ingest(s) started, {len(results) - created} already processed "
            f"({options['source']}, tenant {tenant}, {start.isoformat()} – {end.isoformat()})"
        )

    def _gong(self, tenant: str, start: datetime, end: datetime, base_url: str | None) -> Iterator[Started]:
        config = gong_config_get(tenant=tenant, base_url=base_url)
        if not config.access_key:
            raise CommandError(f"no Gong access key for tenant {tenant}: add a gong Connection or set GONG_ACCESS_KEY")
        # The workers' shared bucket: a backfill and the live ingests together stay under Gong's limit.
        client = gong_client(tenant, base_url=base_url, max_inline_wait=PULL_INLINE_WAIT)
        # Transcripts and speakers in batches: a few requests per 50 calls instead of two per
        # instance, which Gong's 3 calls/s limit would make the bottleneck.
        for batch in _batches(client.iter_calls(from_time=start, to_time=end), PAGE):
            yield from gong_calls_start(client, tenant, batch, actor="ingest_pull", priority=BACKFILL_PRIORITY)

    def _salesforce(self, tenant: str, start: datetime, end: datetime, base_url: str | None) -> Iterator[Started]:
        config = salesforce_config_get(tenant=tenant, login_url=base_url)
        if not config.client_id:
            raise CommandError(
                f"no Salesforce client id for tenant {tenant}: add a salesforce Connection or set SALESFORCE_CLIENT_ID"
            )
        credentials: ClientCredentials | RefreshToken = (
            RefreshToken(config.client_id, config.client_secret, config.refresh_token)
            if config.refresh_token
            else ClientCredentials(config.client_id, config.client_secret)
        )
        client = SalesforceClient(credentials=credentials, login_url=config.login_url)
        soql = SOQL.format(start=start.strftime("%Y-%m-%dT%H:%M:%SZ"), end=end.strftime("%Y-%m-%dT%H:%M:%SZ"))
        for record in client.query(soql):
            yield salesforce_ingest_start(
                tenant,
                object_id=str(record["Id"]),
                record=record,
                trigger="ingest_pull",
                actor="ingest_pull",
                priority=BACKFILL_PRIORITY,
            )
