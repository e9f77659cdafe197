"""Saved views of the instances list: a user names the filters they are looking at, and finds them
again in a list of their own, to open, rename or delete. A view is its owner's alone: another
user's view is not found, for reading or for writing.

What is kept is the list's query as the filters write it back (InstanceFilters.querystring): the
filters and the sort, never a page position, and only filters that parse, so a saved view opens
the list it was saved from or, when the ledger moved on, the same question over newer rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import forms
from django.db import IntegrityError, transaction
from django.http import QueryDict

from dashboard.models import SavedView
from dashboard.selectors.instance_filters import InstanceFilters

MAX_VIEWS = 100  # per user
NAME_HELP = "1 to 80 characters; your views' names are unique"


class SavedViewError(Exception):
    """A saved view could not be written."""

    status = 400


class SavedViewNotFound(SavedViewError):
    """You have no saved view with that id."""

    status = 404


class SavedViewNameTaken(SavedViewError):
    """You already have a saved view with that name."""


class SavedViewChanged(SavedViewError):
    """The saved view changed since this page showed it."""

    status = 409


@dataclass(frozen=True)
class SavedViewRow:
    id: int
    name: str
    query: str
    created_at: datetime
    updated_at: datetime

    @property
    def version(self) -> str:
        return str(int(self.updated_at.timestamp() * 1_000_000))

    @property
    def summary(self) -> str:
        """The filters in words, as the list's query reads them (e.g. `status=errored attr=customer:acme`)."""
        pairs = list(QueryDict(self.query).lists())
        return " ".join(f"{k}={v}" for k, values in pairs for v in values) or "no filters (the whole list)"


def _row(v: SavedView) -> SavedViewRow:
    return SavedViewRow(id=v.id, name=v.name, query=v.query, created_at=v.created_at, updated_at=v.updated_at)


def saved_view_list(*, user: Any) -> list[SavedViewRow]:
    """The user's saved views, by name."""
    if not getattr(user, "is_authenticated", False):
        return []
    return [_row(v) for v in SavedView.objects.filter(user=user).order_by("name", "id")]


def saved_view_get(*, user: Any, view_id: int) -> SavedViewRow:
    v = SavedView.objects.filter(user=user, id=view_id).first()
    if v is None:
        raise SavedViewNotFound(f"you have no saved view with id {view_id}")
    return _row(v)


def saved_view_query(raw: str) -> str:
    """The list's query `raw` as a saved view keeps it: its filters written back by the list,
    without paging; SavedViewError naming every filter that does not parse."""
    filters = InstanceFilters.from_query(QueryDict(raw[:4000]), paging=False)
    if filters.problems:
        raise SavedViewError("these filters do not parse, so they cannot be saved: " + "; ".join(filters.problems))
    query = filters.querystring()
    if len(query) > SavedView._meta.get_field("query").max_length:  # type: ignore[operator]
        raise SavedViewError(f"these filters are {len(query):,} characters long; a saved view keeps at most 2,000")
    return query


def _name_taken(name: str) -> SavedViewError:
    return SavedViewNameTaken(f"you already have a saved view named {name!r}; choose another name or rename that one")


def saved_view_create(*, user: Any, name: str, query: str, now: datetime) -> SavedViewRow:
    kept = saved_view_query(query)
    try:
        with transaction.atomic():
            if SavedView.objects.filter(user=user).count() >= MAX_VIEWS:
                raise SavedViewError(f"you have {MAX_VIEWS} saved views, the most one user keeps; delete one first")
            v = SavedView.objects.create(user=user, name=name, query=kept, created_at=now, updated_at=now)
    except IntegrityError:
        raise _name_taken(name) from None
    return _row(v)


def _locked(user: Any, view_id: int, version: str) -> SavedView:
    v = SavedView.objects.select_for_update().filter(user=user, id=view_id).first()
    if v is None:
        raise SavedViewNotFound(f"you have no saved view with id {view_id} (deleted in another tab?)")
    if version and _row(v).version != version:
        raise SavedViewChanged(
            f"saved view {v.name!r} changed at {v.updated_at:%H:%M:%S} UTC, after this page "
            "showed it (another tab?); nothing was done: look at it again and retry"
        )
    return v


def saved_view_rename(*, user: Any, view_id: int, name: str, version: str, now: datetime) -> tuple[str, SavedViewRow]:
    """(the old name, the renamed view)."""
    try:
        with transaction.atomic():
            v = _locked(user, view_id, version)
            old = v.name
            v.name, v.updated_at = name, now
            v.save(update_fields=["name", "updated_at"])
    except IntegrityError:
        raise _name_taken(name) from None
    return old, _row(v)


def saved_view_delete(*, user: Any, view_id: int, version: str) -> SavedViewRow:
    with transaction.atomic():
        v = _locked(user, view_id, version)
        row = _row(v)
        v.delete()
    return row


class SavedViewForm(forms.Form):
    name = forms.CharField(
        max_length=80,
        strip=True,
        help_text=NAME_HELP,
        widget=forms.TextInput(attrs={"placeholder": "errored acme runs", "autocomplete": "off"}),
    )
    query = forms.CharField(max_length=4000, required=False, widget=forms.HiddenInput)


class SavedViewRenameForm(forms.Form):
    name = forms.CharField(
        max_length=80, strip=True, help_text=NAME_HELP, widget=forms.TextInput(attrs={"autocomplete": "off"})
    )
    version = forms.RegexField(regex=r"^[0-9]{1,20}$", widget=forms.HiddenInput)


class SavedViewDeleteForm(forms.Form):
    version = forms.RegexField(regex=r"^[0-9]{1,20}$", widget=forms.HiddenInput)
