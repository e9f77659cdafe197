"""Channels group names. Every live message is addressed to a tenant or to one instance."""

from __future__ import annotations

import hashlib
import re

_SAFE = re.compile(r"[A-Za-z0-9_\-.]{1,90}")


def _name(prefix: str, key: str) -> str:
    # Group names allow ASCII letters, digits, '-', '_', '.' and fewer than 100 characters.
    if _SAFE.fullmatch(key):
        return f"{prefix}.{key}"
    return f"{prefix}.h{hashlib.sha256(key.encode()).hexdigest()[:40]}"


def tenant_group(tenant: str) -> str:
    return _name("rl-t", tenant)


def instance_group(instance_id: str) -> str:
    return _name("rl-i", instance_id)
