"""What one request may carry, checked before the work it would cause.

Every door that takes JSON from outside (signed ingress, the REST API, the webhooks, the
dashboard's JSON text areas) parses it here, so one set of limits holds everywhere:

- the body's size is checked before it is read or parsed (`check_size`);
- nesting depth is counted on the raw bytes before parsing, so no parser recurses into
  RecursionError (`json_parse`);
- numbers are refused by their digit count before `int()` sees them (Python refuses to convert
  more than 4,300 digits, and the database has no use for more than a few dozen);
- every string is checked for what PostgreSQL's text and jsonb cannot hold (U+0000) and what
  UTF-8 cannot encode (lone surrogates such as "\\ud800"), and for its length;
- `NaN` and `Infinity` are refused: they are not JSON, and jsonb refuses them.

The limits come from settings (`input_limits()`); docs/operators.md "Configuration", lists them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ingest.triggers.errors import (
    BodyTooLarge,
    DateOutOfRange,
    LoneSurrogate,
    MalformedJson,
    NestedTooDeeply,
    NulCharacter,
    NumberTooLong,
    ReservedParam,
    StringTooLong,
    TooManyItems,
)

# Params keys that the engine and the triggers set on the instances they start; a caller who
# could set them would forge a schedule fire (`event.schedule`) or an event delivery.
RESERVED_PARAMS: tuple[str, ...] = ("_schedule", "_event", "_debounce", "_batch")

# Times a filter may name. Beyond them arithmetic at the calendar's edge overflows (9999-12-31
# plus a day) and ranges span millions of hours that the rollup reads would walk.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(3000, 1, 1, tzinfo=UTC)

NUL = "\x00"
_SURROGATE = re.compile("[\ud800-\udfff]")
# A JSON string literal, escapes included (unrolled: no backtracking on long strings).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


@dataclass(frozen=True)
class InputLimits:
    body_bytes: int = 1024 * 1024
    json_depth: int = 32
    number_digits: int = 40
    string_chars: int = 256 * 1024
    key_chars: int = 256
    items: int = 10_000  # elements of one JSON array or members of one object


def input_limits() -> InputLimits:
    """The limits in force (settings `RUNLEDGER_MAX_*`; defaults above)."""
    from django.conf import settings

    default = InputLimits()
    return InputLimits(
        body_bytes=int(getattr(settings, "RUNLEDGER_MAX_BODY_BYTES", default.body_bytes)),
        json_depth=int(getattr(settings, "RUNLEDGER_MAX_JSON_DEPTH", default.json_depth)),
        number_digits=int(getattr(settings, "RUNLEDGER_MAX_NUMBER_DIGITS", default.number_digits)),
        string_chars=int(getattr(settings, "RUNLEDGER_MAX_STRING_CHARS", default.string_chars)),
        key_chars=default.key_chars,
        items=int(getattr(settings, "RUNLEDGER_MAX_JSON_ITEMS", default.items)),
    )


def check_size(size: int, *, limits: InputLimits, what: str = "the body") -> None:
    if size > limits.body_bytes:
        raise BodyTooLarge(
            f"{what} is {size:,} bytes; at most {limits.body_bytes:,} bytes are "
            "accepted — store large data elsewhere and send its reference"
        )


def json_depth_over(raw: bytes, limit: int) -> bool:
    """Whether `raw` nests arrays and objects more than `limit` deep (brackets inside strings
    do not count). Linear in the size; never recurses."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        depth += 1 if byte in (0x5B, 0x7B) else -1
        if depth > limit:
            return True
    return False


# The input guard keeps the JSON body it parsed and checked on the request under this name, so
# the view does not parse and check it again. A view takes it only once: it is the view's to change.
PARSED_BODY = "runledger_json_body"


def parsed_body(request: Any) -> Any:
    """The request's JSON body as the input guard parsed it (within the limits in force), or
    None when it did not parse one; taken off the request."""
    return request.__dict__.pop(PARSED_BODY, None)


def json_parse(raw: bytes | str, *, limits: InputLimits, what: str = "the body") -> Any:
    """Parse JSON within `limits`, or raise an InputRejected subclass that says what is wrong."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    check_size(len(data), limits=limits, what=what)
    if json_depth_over(data, limits.json_depth):
        raise NestedTooDeeply(
            f"{what} nests arrays and objects more than {limits.json_depth} levels deep; send a flatter JSON document"
        )
    try:
        value = json.loads(
            data,
            parse_int=_int_parser(limits, what),
            parse_float=_float_parser(limits, what),
            parse_constant=_constant_refused(what),
        )
    except UnicodeDecodeError as exc:
        raise MalformedJson(f"{what} is not UTF-8 JSON ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        # Some of the decoder's messages end in "at" ("Invalid control character at"): said once.
        said = exc.msg.removesuffix(" at")
        raise MalformedJson(f"{what} is not valid JSON: {said} at line {exc.lineno} column {exc.colno}") from None
    json_check(value, limits=limits, what=what)
    return value


def _int_parser(limits: InputLimits, what: str) -> Any:
    def parse(text: str) -> int:
        if len(text.lstrip("-")) > limits.number_digits:
            raise NumberTooLong(
                f"{what} holds an integer of {len(text.lstrip('-')):,} digits; "
                f"numbers have at most {limits.number_digits} — send it as a string"
            )
        return int(text)

    return parse


def _float_parser(limits: InputLimits, what: str) -> Any:
    def parse(text: str) -> float:
        if len(text) > limits.number_digits + 8:
            raise NumberTooLong(
                f"{what} holds a number written with {len(text):,} characters; "
                f"numbers have at most {limits.number_digits} digits"
            )
        value = float(text)
        if not math.isfinite(value):
            raise NumberTooLong(f"{what} holds {text[:40]}, which is beyond a double's range")
        return value

    return parse


def _constant_refused(what: str) -> Any:
    def parse(text: str) -> Any:
        raise MalformedJson(f"{what} holds {text}, which is not JSON; send null or a number")

    return parse


def json_check(value: Any, *, limits: InputLimits, what: str = "the body") -> None:
    """Check an already-parsed JSON value's strings, keys and containers, without recursion."""
    if not _json_ok(value, limits):
        _json_refusal(value, limits=limits, what=what)


def _text_ok(text: str, max_chars: int) -> bool:
    return len(text) <= max_chars and NUL not in text and _SURROGATE.search(text) is None


def _json_ok(value: Any, limits: InputLimits) -> bool:
    """Whether the value passes every check; says nothing about where it fails. Every request
    body is checked: the path of each value and the message it would need are built only once
    this has found a fault, by `_json_refusal`."""
    stack = [value]
    strings, keys, items = limits.string_chars, limits.key_chars, limits.items
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not _text_ok(item, strings):
                return False
        elif isinstance(item, Mapping):
            if len(item) > items:
                return False
            for key, child in item.items():
                if not _text_ok(str(key), keys):
                    return False
                stack.append(child)
        elif isinstance(item, list | tuple):
            if len(item) > items:
                return False
            stack.extend(item)
    return True


def _json_refusal(value: Any, *, limits: InputLimits, what: str) -> None:
    """Raise the InputRejected error naming where `value` breaks the limits."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            text_check(item, limits.string_chars, where=_where(what, path))
        elif isinstance(item, Mapping):
            _count(len(item), limits, what, path)
            for key, child in item.items():
                text_check(str(key), limits.key_chars, where=f"a key of {_where(what, path)}")
                stack.append((child, (*path, str(key)[:40])))
        elif isinstance(item, list | tuple):
            _count(len(item), limits, what, path)
            stack.extend((child, (*path, str(i))) for i, child in enumerate(item))


def _count(size: int, limits: InputLimits, what: str, path: tuple[str, ...]) -> None:
    if size > limits.items:
        raise TooManyItems(
            f"{_where(what, path)} holds {size:,} items; at most {limits.items:,} are accepted in one array or object"
        )


def _where(what: str, path: tuple[str, ...]) -> str:
    return f"{what} at {'$' + ''.join(f'[{p!r}]' for p in path)}" if path else what


def text_check(text: str, max_chars: int, *, where: str) -> None:
    """Refuse text PostgreSQL cannot store (NUL), UTF-8 cannot encode (lone surrogates), or
    longer than `max_chars`."""
    if NUL in text:
        raise NulCharacter(f"{where} contains a NUL character (\\u0000), which no text field can hold; remove it")
    found = _SURROGATE.search(text)
    if found:
        raise LoneSurrogate(
            f"{where} contains the lone surrogate \\u{ord(found.group()):04x}, "
            "which is not a character; send valid UTF-16 pairs or UTF-8"
        )
    if len(text) > max_chars:
        raise StringTooLong(f"{where} is {len(text):,} characters long; at most {max_chars:,} are accepted")


def reserved_params_check(
    params: Any, *, original: Mapping[str, Any] | None = None, reserved: Iterable[str] = RESERVED_PARAMS
) -> None:
    """Refuse params that set a key the engine or the triggers own. A replay may keep the
    original instance's value unchanged (a replayed schedule fire still says when it fired)."""
    if not isinstance(params, Mapping):
        return
    for key in reserved:
        if key in params and not (original is not None and key in original and original[key] == params[key]):
            raise ReservedParam(
                f"the params key {key!r} is reserved: the engine sets it on the instances it starts; rename it"
            )


def datetime_in_range(value: datetime, *, what: str) -> datetime:
    """`value` if it lies between EARLIEST and LATEST (naive counts as UTC), else DateOutOfRange."""
    try:
        utc = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except (OverflowError, ValueError):
        utc = None
    if utc is None or not EARLIEST <= utc < LATEST:
        raise DateOutOfRange(
            f"{what}={value.isoformat()[:40]} is outside the times a filter can "
            f"name ({EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d}); leave it empty for "
            "no bound"
        )
    return value
