"""A bulk action's selection, from its preview to its confirm.

The preview counts a set and hands the confirm step a signed token holding that set, the filter
that produced it and the user it was shown to. The confirm recomputes the set from the token's
filter (never from form fields the browser could change) and acts only when it is the same set;
otherwise it reports what was added and removed and asks again. An id list that is empty or does
not parse is refused: there is no reading of "no selection" as "everything".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core import signing

MAX_IDS = 10_000
TOKEN_MAX_AGE = 60 * 60  # a preview left open for an hour is previewed again
_SALT = "runledger.bulk-selection"


class SelectionError(Exception):
    """The selection is empty, does not parse, or its confirmation is invalid; nothing was done."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__doc__)


def ids_parse(values: Iterable[str]) -> list[int]:
    """Ids from form or query values (each "7" or "7,8"); refuses an empty list or any piece that
    is not a positive integer, naming it."""
    ids: list[int] = []
    for value in values:
        for piece in str(value).split(","):
            piece = piece.strip()
            if len(piece) > 18 and piece.isascii() and piece.isdigit():
                raise SelectionError(
                    f"the id {piece[:20]}… is too long to be a dead letter id (ids are "
                    "64-bit); select items from the list; nothing was done"
                )
            if not piece.isascii() or not piece.isdigit() or len(piece) > 18 or int(piece) == 0:
                raise SelectionError(
                    f"the id {piece[:40]!r} is not a positive integer; the selection "
                    "must list ids such as ids=12&ids=15; nothing was done"
                )
            ids.append(int(piece))
    if not ids:
        raise SelectionError(
            "the selection is empty: choose at least one item (an empty id list "
            "never means everything); nothing was done"
        )
    if len(ids) > MAX_IDS:
        raise SelectionError(f"the selection lists {len(ids)} ids; at most {MAX_IDS} at a time")
    return sorted(set(ids))


@dataclass(frozen=True)
class Snapshot:
    """What a preview showed: the filter, the explicit ids (None: all that match) and the set."""

    action: str
    filters: dict[str, str]
    ids: list[int] | None
    selected: list[int]


@dataclass(frozen=True)
class Change:
    added: list[int]
    removed: list[int]


def token_issue(*, user_id: Any, snapshot: Snapshot) -> str:
    return signing.dumps(
        {"u": user_id, "a": snapshot.action, "f": snapshot.filters, "i": snapshot.ids, "s": snapshot.selected},
        salt=_SALT,
        compress=True,
    )


def token_read(token: str, *, user_id: Any, action: str) -> Snapshot:
    if not token:
        raise SelectionError(
            "the confirmation has no preview token; open the preview and confirm from there; nothing was done"
        )
    try:
        data = signing.loads(token, salt=_SALT, max_age=TOKEN_MAX_AGE)
    except signing.SignatureExpired:
        raise SelectionError("the preview is more than an hour old; preview again") from None
    except (signing.BadSignature, ValueError):
        raise SelectionError("the preview token is invalid; preview again") from None
    if data.get("u") != user_id or data.get("a") != action:
        raise SelectionError("the preview token was issued for another user or action; preview again")
    return Snapshot(action, dict(data["f"]), data["i"], list(data["s"]))


def selection_change(before: Sequence[int], after: Sequence[int]) -> Change | None:
    """None when the two sets are equal, else what was added and removed (sorted)."""
    b, a = set(before), set(after)
    if a == b:
        return None
    return Change(sorted(a - b), sorted(b - a))
