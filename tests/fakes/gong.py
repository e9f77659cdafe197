"""A fake Gong API v2: calls with cursor pages, transcripts, extensive data, basic auth.

Script it with `fake.plan("GET /v2/calls", Planned(429, headers={"Retry-After": "1"}))`.
Routes: "GET /v2/calls", "POST /v2/calls/transcript", "POST /v2/calls/extensive".
"""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Sequence
from datetime import datetime

from ingest.demo.corpus import COMPETITORS, DemoCall, demo_calls
from tests.fakes.server import FakeServer, Planned, Recorded

NO_CALLS = "No calls found corresponding to the provided filters"


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def call_meta(call: DemoCall, base_url: str) -> dict[str, object]:
    return {
        "id": call.id, "url": f"{base_url}/call?id={call.id}", "title": call.title,
        "scheduled": call.started.isoformat(), "started": call.started.isoformat(),
        "duration": call.duration_s, "primaryUserId": call.speakers[0].id, "direction": "Conference",
        "system": "Zoom", "scope": "External", "media": "Video", "language": "eng",
        "workspaceId": "5562739194953732039", "sdrDisposition": None, "clientUniqueId": None,
        "customData": None, "purpose": None, "meetingUrl": "https://zoom.example/j/1",
        "isPrivate": False, "calendarEventId": None,
    }  # fmt: skip


def transcript_json(call: DemoCall) -> dict[str, object]:
    return {
        "callId": call.id,
        "transcript": [
            {"speakerId": u.speaker_id, "topic": None,
             "sentences": [{"start": u.start_ms, "end": u.end_ms, "text": u.text}]}
            for u in call.utterances
        ],
    }  # fmt: skip


def extensive_json(call: DemoCall, base_url: str) -> dict[str, object]:
    text = call.transcript_text()
    return {
        "metaData": call_meta(call, base_url),
        "context": [{"system": "Salesforce", "objects": [{"objectType": "Opportunity"}]}],
        "parties": [
            {"id": f"p{s.id}", "emailAddress": s.email, "name": s.name, "title": s.title,
             "userId": s.id if s.internal else None, "speakerId": s.id,
             "affiliation": "Internal" if s.internal else "External", "methods": ["Invitee"]}
            for s in call.speakers
        ],
        "content": {
            "brief": f"{call.account} discussed pricing, timeline and alternatives.",
            "trackers": [{"id": c, "name": c, "count": text.count(c), "type": "KEYWORD"}
                         for c in COMPETITORS if c in text],
            "topics": [{"name": "Pricing", "duration": 120}],
        },
    }  # fmt: skip


class FakeGong(FakeServer):
    def __init__(
        self,
        calls: Sequence[DemoCall] | None = None,
        *,
        access_key: str = "gong-key",
        secret: str = "gong-secret",
        page_size: int = 2,
    ) -> None:
        super().__init__()
        self.calls = list(calls if calls is not None else demo_calls(count=5))
        self.page_size = page_size
        token = base64.b64encode(f"{access_key}:{secret}".encode()).decode()
        self.expected_auth = f"Basic {token}"
        self.route("GET", "/v2/calls", self._list_calls)
        self.route("POST", "/v2/calls/transcript", self._transcripts)
        self.route("POST", "/v2/calls/extensive", self._extensive)

    def _unauthorized(self, request: Recorded) -> Planned | None:
        if request.header("Authorization") == self.expected_auth:
            return None
        return Planned(401, {"requestId": uuid.uuid4().hex, "errors": ["Unauthorized"]})

    def _select(self, ids: Sequence[str] | None, start: str | None, end: str | None) -> list[DemoCall]:
        chosen = [c for c in self.calls if ids is None or c.id in {str(i) for i in ids}]
        if start:
            chosen = [c for c in chosen if c.started >= _time(start)]
        if end:
            chosen = [c for c in chosen if c.started < _time(end)]
        return chosen

    def _page(self, items: list[DemoCall], cursor: str | None, key: str, render: object) -> Planned:
        if not items:
            return Planned(404, {"requestId": uuid.uuid4().hex, "errors": [NO_CALLS]})
        offset = int(base64.b64decode(cursor).decode()) if cursor else 0
        page = items[offset : offset + self.page_size]
        records: dict[str, object] = {
            "totalRecords": len(items),
            "currentPageSize": len(page),
            "currentPageNumber": offset // self.page_size,
        }
        if offset + self.page_size < len(items):
            records["cursor"] = base64.b64encode(str(offset + self.page_size).encode()).decode()
        rendered = [render(call) for call in page]  # type: ignore[operator]
        return Planned(200, {"requestId": uuid.uuid4().hex, "records": records, key: rendered})

    def _list_calls(self, request: Recorded, _: re.Match[str]) -> Planned:
        denied = self._unauthorized(request)
        if denied:
            return denied
        q = {k: v[0] for k, v in request.query.items()}
        if "fromDateTime" not in q or "toDateTime" not in q:
            return Planned(400, {"requestId": uuid.uuid4().hex, "errors": ["fromDateTime is required"]})
        calls = self._select(None, q["fromDateTime"], q["toDateTime"])
        return self._page(calls, q.get("cursor"), "calls", lambda c: call_meta(c, self.url))

    def _post(self, request: Recorded, key: str, render: object) -> Planned:
        denied = self._unauthorized(request)
        if denied:
            return denied
        body = request.json() or {}
        f = body.get("filter") or {}
        calls = self._select(f.get("callIds"), f.get("fromDateTime"), f.get("toDateTime"))
        return self._page(calls, body.get("cursor"), key, render)

    def _transcripts(self, request: Recorded, _: re.Match[str]) -> Planned:
        return self._post(request, "callTranscripts", transcript_json)

    def _extensive(self, request: Recorded, _: re.Match[str]) -> Planned:
        return self._post(request, "calls", lambda c: extensive_json(c, self.url))
