"""What a worker does differently on each database, chosen once (`worker_db()`).

PostgreSQL: any number of worker processes share the database. A claim leases through one
prepared statement when no workflow has a cap (flow-limited workflows under their group locks,
sql/flow.py) on the claim loop's own engine connection; a claimed instance's row is read by a
prepared statement; each worker keeps a session of its own (liveness.py) so its death is noticed.

SQLite: one worker process (a lock file beside the database says so), whose write transaction
holds the whole database from BEGIN; claims, reads and history go through Django's connection.
"""

from __future__ import annotations

import fcntl
import json
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError
from django.db import connection, transaction

from ingest.engine import flow, pg
from ingest.engine.models import History, HistoryKind, Instance, Status
from ingest.engine.sql import claim as sql_claim
from ingest.engine.sql import instances as sql_instances
from ingest.engine.sql.base import ByVendor, engine_connection
from ingest.engine.sql.claim import Claimed
from ingest.engine.worker.liveness import Liveness
from ingest.engine.workflow import registered_workflows
from ingest.engine.writes import notify

COLUMNS = sql_claim.INSTANCE_COLUMNS
_JSON_COLUMNS = {i for i, f in enumerate(Instance._meta.concrete_fields) if f.get_internal_type() == "JSONField"}


def instance_from_row(row: tuple[Any, ...]) -> Instance:
    """An instance from its row as `COLUMNS` reads it (JSON columns as text)."""
    values = [json.loads(v) if i in _JSON_COLUMNS and v is not None else v for i, v in enumerate(row)]
    return Instance.from_db(connection.alias, COLUMNS, values)


def claim_recorded(claim_in: Callable[[], list[Claimed]], *, now: datetime) -> list[Claimed]:
    """Run a claim in a transaction with the history rows of the instances it moves to running."""
    with transaction.atomic():
        claimed = claim_in()
        moved = [c for c in claimed if c.previous_status in (Status.QUEUED, Status.WAITING)]
        if moved:
            notify.history()
            if all(c.workflow for c in moved):
                sql_claim.history_running(claimed=moved, now=now)
            else:  # SQLite: the claim did not return them
                rows = Instance.objects.filter(id__in=[c.id for c in moved]).values_list("id", "workflow", "tenant")
                History.objects.bulk_create(
                    [
                        History(
                            instance_id=i,
                            workflow=w,
                            tenant=t,
                            kind=HistoryKind.INSTANCE_STATUS,
                            status=Status.RUNNING,
                            created_at=now,
                        )
                        for i, w, t in rows
                    ]
                )
    return claimed


class _SqliteWorkerDb:
    def claim(
        self, *, worker_id: str, token: str, limit: int, now: datetime, lease_until: datetime, raw: Any
    ) -> list[Claimed]:
        return claim_recorded(
            lambda: flow.claim(
                owner=worker_id, token=token, limit=limit, now=now, lease_until=lease_until, limits=None
            ),
            now=now,
        )

    def load_instance(self, instance_id: str) -> Instance:
        return Instance.objects.get(id=instance_id)

    def claim_connection(self, held: Any, epoch: int, close: Callable[[], None]) -> tuple[Any, int]:
        """The claim loop's connection and its epoch: none of its own here (Django's)."""
        return None, 0

    def liveness(
        self, *, worker_id: str, wake: threading.Event, stopped: threading.Event, released: Callable[[list[int]], None]
    ) -> Liveness | None:
        return None

    def process_lock(self) -> Any:
        """Hold the database's worker lock for the life of the process (the caller closes the
        handle); CommandError when another worker holds it."""
        name = Path(str(settings.DATABASES["default"]["NAME"]))
        handle = open(name.with_suffix(name.suffix + ".worker-lock"), "w")  # noqa: SIM115 - held for the process
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CommandError(
                f"another worker already runs on the SQLite database {name}; SQLite takes one worker "
                "process (use PostgreSQL via DATABASE_URL to run several)"
            ) from None
        return handle


class _PostgresWorkerDb(_SqliteWorkerDb):
    def claim(
        self, *, worker_id: str, token: str, limit: int, now: datetime, lease_until: datetime, raw: Any
    ) -> list[Claimed]:
        limits = flow.claim_limits(registered_workflows(), now=now)
        if not flow.uncapped(limits):
            return claim_recorded(
                lambda: flow.claim(
                    owner=worker_id, token=token, limit=limit, now=now, lease_until=lease_until, limits=limits
                ),
                now=now,
            )
        # The fast path: one prepared statement for every workflow but the fair ones, then
        # (slots left) the fair ones' round robin over their keys, as flow.claim orders them; both
        # hand each instance's row over, so its turn starts without reading it again.
        fair = [lim.workflow for lim in limits]
        claimed = sql_claim.claim_and_record(
            owner=worker_id,
            token=token,
            limit=limit,
            now=now,
            lease_until=lease_until,
            columns=COLUMNS,
            raw=raw,
            exclude=fair,
        )
        if any(c.previous_status in (Status.QUEUED, Status.WAITING) for c in claimed):
            notify.request_history()  # committed already: the statement was its own transaction
        if fair and len(claimed) < limit:
            claimed += claim_recorded(
                lambda: flow.claim_fair(
                    limits, owner=worker_id, token=token, limit=limit - len(claimed), now=now, lease_until=lease_until
                ),
                now=now,
            )
        return claimed

    def load_instance(self, instance_id: str) -> Instance:
        # A prepared statement: every turn that the claim did not hand a row starts here.
        row = sql_instances.instance_row(instance_id, COLUMNS)
        if row is None:
            raise Instance.DoesNotExist(instance_id)
        return instance_from_row(row)

    def claim_connection(self, held: Any, epoch: int, close: Callable[[], None]) -> tuple[Any, int]:
        """The claim loop's own engine connection (sql/base.py's engine_connection), opened anew
        when it broke or the process's connections were reset (`close` ends the old one)."""
        if held is None or held.closed or held.broken or epoch != pg.connections_epoch():
            close()
            epoch = pg.connections_epoch()
            held = engine_connection()
        return held, epoch

    def liveness(
        self, *, worker_id: str, wake: threading.Event, stopped: threading.Event, released: Callable[[list[int]], None]
    ) -> Liveness | None:
        return Liveness(worker_id=worker_id, wake=wake, stopped=stopped, released=released)

    def process_lock(self) -> Any:
        return None  # any number of workers


worker_db = ByVendor[_SqliteWorkerDb](postgresql=_PostgresWorkerDb(), sqlite=_SqliteWorkerDb())
