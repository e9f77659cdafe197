"""Gong API v2 payloads as typed values (pure parsing; the client is in `gong.py`).

Call ids are kept as strings everywhere: they are 19-digit numbers that lose precision
as floats (and in JavaScript), and Gong itself sends them as strings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict


class RecordsDict(TypedDict, total=False):
    totalRecords: int
    currentPageSize: int
    currentPageNumber: int
    cursor: str


class CallMetaDict(TypedDict, total=False):
    id: str
    url: str
    title: str
    scheduled: str
    started: str
    duration: int
    primaryUserId: str
    direction: str
    system: str
    scope: str
    media: str
    language: str
    workspaceId: str
    purpose: str | None


def parse_time(value: str | None) -> datetime | None:
    """Gong times are ISO-8601 with an offset (`2025-03-03T15:00:00-08:00` or `…Z`)."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass(frozen=True)
class GongCall:
    id: str
    title: str = ""
    started: datetime | None = None
    duration_s: int = 0
    url: str = ""
    direction: str = ""
    scope: str = ""
    system: str = ""
    media: str = ""
    language: str = ""
    workspace_id: str = ""
    primary_user_id: str = ""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GongCall:
        return cls(
            id=str(data["id"]),
            title=str(data.get("title") or ""),
            started=parse_time(data.get("started")),
            duration_s=int(data.get("duration") or 0),
            url=str(data.get("url") or ""),
            direction=str(data.get("direction") or ""),
            scope=str(data.get("scope") or ""),
            system=str(data.get("system") or ""),
            media=str(data.get("media") or ""),
            language=str(data.get("language") or ""),
            workspace_id=str(data.get("workspaceId") or ""),
            primary_user_id=str(data.get("primaryUserId") or ""),
        )


@dataclass(frozen=True)
class GongParty:
    id: str
    name: str = ""
    email: str = ""
    title: str = ""
    affiliation: str = "Unknown"  # Internal | External | Unknown
    speaker_id: str = ""
    user_id: str = ""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GongParty:
        return cls(
            id=str(data.get("id") or ""),
            name=str(data.get("name") or ""),
            email=str(data.get("emailAddress") or ""),
            title=str(data.get("title") or ""),
            affiliation=str(data.get("affiliation") or "Unknown"),
            speaker_id=str(data.get("speakerId") or ""),
            user_id=str(data.get("userId") or ""),
        )


@dataclass(frozen=True)
class Sentence:
    start_ms: int
    end_ms: int
    text: str


@dataclass(frozen=True)
class Monologue:
    speaker_id: str
    topic: str
    sentences: tuple[Sentence, ...]


@dataclass(frozen=True)
class GongTranscript:
    call_id: str
    monologues: tuple[Monologue, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GongTranscript:
        return cls(
            call_id=str(data["callId"]),
            monologues=tuple(
                Monologue(
                    speaker_id=str(part.get("speakerId") or ""),
                    topic=str(part.get("topic") or ""),
                    sentences=tuple(
                        Sentence(int(s.get("start", 0)), int(s.get("end", 0)), str(s["text"]))
                        for s in part.get("sentences") or []
                    ),
                )
                for part in data.get("transcript") or []
            ),
        )

    def as_text(self, parties: tuple[GongParty, ...] = ()) -> str:
        """ "Name: text" per monologue (speaker ids when the parties are not known)."""
        names = {party.speaker_id: party.name for party in parties if party.speaker_id}
        return "\n".join(
            f"{names.get(m.speaker_id) or m.speaker_id or 'Unknown'}: " + " ".join(s.text for s in m.sentences)
            for m in self.monologues
        )


@dataclass(frozen=True)
class GongExtensiveCall:
    """A call from `/v2/calls/extensive`: metadata, parties and the selected content."""

    call: GongCall
    parties: tuple[GongParty, ...] = ()
    content: dict[str, Any] = field(default_factory=dict)
    context: tuple[dict[str, Any], ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GongExtensiveCall:
        return cls(
            call=GongCall.from_json(data.get("metaData") or {}),
            parties=tuple(GongParty.from_json(p) for p in data.get("parties") or []),
            content=dict(data.get("content") or {}),
            context=tuple(data.get("context") or ()),
        )


class WebhookInvalid(ValueError):
    """The Gong webhook body is not the documented `{"callData": …, "isTest": …}` shape."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__doc__)


@dataclass(frozen=True)
class GongWebhook:
    """A Gong automation-rule webhook: the call (as /v2/calls/extensive shows it) and isTest."""

    call: GongExtensiveCall
    is_test: bool


_CALL_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def parse_webhook(body: Mapping[str, Any]) -> GongWebhook:
    call_data = body.get("callData")
    if not isinstance(call_data, Mapping):
        raise WebhookInvalid(f"Gong webhook body has no 'callData' object (keys: {sorted(body)[:20]})")
    meta = call_data.get("metaData")
    if not isinstance(meta, Mapping) or not meta.get("id"):
        raise WebhookInvalid("Gong webhook 'callData' has no 'metaData.id'; cannot name the call")
    if not isinstance(meta["id"], str | int) or not _CALL_ID.match(str(meta["id"])):
        raise WebhookInvalid(
            f"Gong webhook 'metaData.id' {str(meta['id'])[:40]!r} is not a call "
            "id (1 to 64 letters, digits, '_' or '-')"
        )
    try:
        call = GongExtensiveCall.from_json(call_data)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as error:
        # Well-typed JSON in the wrong shape: a list where an object belongs, a date that is not
        # one, a duration that is not a number.
        raise WebhookInvalid(
            f"Gong webhook 'callData' is not in the shape of /v2/calls/extensive "
            f"({type(error).__name__}: {str(error)[:200]})"
        ) from None
    return GongWebhook(call=call, is_test=bool(body.get("isTest", False)))
