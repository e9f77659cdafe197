"""Who may retire a workflow version, for the workflow page and the API alike.

A version belongs to the code, not to one tenant: retiring it stops every tenant's instances of
that version from being retried, restarted from a step or forked. So an operator may retire it
only if they are an operator of every tenant that has instances on it; otherwise the action
would reach into tenants they cannot act in (an action never widens)."""

from __future__ import annotations

from typing import Any

from dashboard import access
from dashboard.selectors.workflows import version_tenants


def retire_refusal(user: Any, *, workflow: str, version: int) -> str | None:
    """Why `user` may not retire this version, or None when they may."""
    acting = set(access.acting_tenants(user))
    if not acting:
        return "retiring a workflow version needs the operator role"
    others = version_tenants(workflow=workflow, version=version) - acting
    if others:
        return (
            f"instances of tenants you do not operate started on version {version} of {workflow!r}; "
            "only an operator of every tenant that ran it may retire it"
        )
    return None
