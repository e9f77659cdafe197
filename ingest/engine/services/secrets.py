"""Key rotation: every encrypted value re-encrypted under the first key of RUNLEDGER_SECRET_KEYS.

`EncryptedTextField` columns of any app are re-written through the field (it opens with any key
and seals with the first); the ledger's sealed values (sensitive step results and failures,
sensitive params, a sensitive step's journaled answers) are re-sealed in place. Rows are handled
in batches, each in its own transaction, so workers keep running; a value sealed by a worker meanwhile already uses the
new key. Running it twice is harmless.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from django.apps import apps
from django.db import models, transaction

from ingest.engine.models import Attempt, CallJournal, DeadLetter, Instance, InstanceSearch, Step
from ingest.engine.secrets import PREFIX, SEALED, EncryptedTextField, reseal, reseal_value

BATCH = 500


def encrypted_columns() -> list[tuple[type[models.Model], list[str]]]:
    """Every model with encrypted columns, and those columns' names."""
    found = []
    for model in apps.get_models():
        names = [f.name for f in model._meta.concrete_fields if isinstance(f, EncryptedTextField)]
        if names:
            found.append((model, names))
    return found


def _batches(qs: models.QuerySet[Any]) -> Iterator[list[Any]]:
    last: Any = None
    while True:
        page = qs.order_by("pk") if last is None else qs.filter(pk__gt=last).order_by("pk")
        rows = list(page[:BATCH])
        if not rows:
            return
        yield rows
        last = rows[-1].pk


def _rewrite(qs: models.QuerySet[Any], change: Callable[[Any], dict[str, Any]]) -> int:
    count = 0
    for rows in _batches(qs):
        with transaction.atomic():
            for row in rows:
                values = change(row)
                if values:
                    type(row)._default_manager.filter(pk=row.pk).update(**values)
                    count += 1
    return count


def secrets_rotate(*, hooks: dict[type[models.Model], Callable[[Any], dict[str, Any]]] | None = None) -> dict[str, int]:
    """Re-encrypt everything under the first key; the rows rewritten per table. `hooks` add
    values to write per model (a lookup hash that depends on the key, for instance)."""
    hooks = hooks or {}
    counts: dict[str, int] = {}
    for model, names in encrypted_columns():
        extra = hooks.get(model)

        def values(row: Any, names: list[str] = names, extra: Any = extra) -> dict[str, Any]:
            # Loading opened each value with whichever key sealed it; saving seals with the first.
            out = {n: getattr(row, n) for n in names if getattr(row, n)}
            return {**out, **extra(row)} if extra else out

        counts[model._meta.db_table] = _rewrite(model._default_manager.only("pk", *names), values)
    counts.update(ledger_reseal())
    return counts


def ledger_reseal() -> dict[str, int]:
    """The engine's sealed JSON and text values under the first key."""
    sealed_text = {"error_traceback__startswith": PREFIX}
    counts = {
        "engine_step": _rewrite(
            Step.objects.filter(sensitive=True).only("pk", "result", "error_traceback"),
            lambda s: {"result": reseal_value(s.result), "error_traceback": reseal(s.error_traceback)},
        ),
        "engine_attempt": _rewrite(
            Attempt.objects.filter(**sealed_text).only("pk", "error_traceback"),
            lambda a: {"error_traceback": reseal(a.error_traceback)},
        ),
        "engine_deadletter": _rewrite(
            DeadLetter.objects.filter(**sealed_text).only("pk", "error_traceback"),
            lambda d: {"error_traceback": reseal(d.error_traceback)},
        ),
        # A sensitive step's journaled answers (every row of such a step is sealed).
        "engine_calljournal": _rewrite(
            CallJournal.objects.filter(answer__has_key=SEALED).only("pk", "answer"),
            lambda j: {"answer": reseal_value(j.answer)},
        ),
    }
    # Instances with sealed params, found through the search table (it holds the params' text).
    ids = InstanceSearch.objects.filter(text__contains=f'"{SEALED}"').values_list("instance_id", flat=True)
    counts["engine_instance"] = _rewrite(
        Instance.objects.filter(id__in=list(ids)).only("pk", "params"), lambda i: {"params": reseal_value(i.params)}
    )
    return counts
