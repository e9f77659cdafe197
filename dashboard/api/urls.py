"""Routes of one page family (filled by its owner)."""

from __future__ import annotations

from typing import Any

urlpatterns: list[Any] = []
