"""Kept so `from dashboard import selectors_ops` still works: the operations selectors now live in
the `dashboard.selectors` package (overview, workflows, dead_letters, costs, budgets, approvals)."""

from __future__ import annotations

from dashboard.selectors import *  # noqa: F403
from dashboard.selectors import _empty_heat  # noqa: F401
