"""What the OpenAPI document adds to the schemas pydantic derives: the input guard's rules and the
links between operations.

The input guard (dashboard/guard.py, ingest/triggers/limits.py) refuses, before any handler, text
holding U+0000 or a lone surrogate, keys over 256 characters, numbers over 40 digits and
containers over 10,000 items, anywhere in a request. pydantic knows none of that, so the document
says it here, once for every input: each free text gets the guard's pattern, each free-form
JSON value the `JsonValue` schema. Response links say which answer names the resource a next
call acts on (start an instance, then get, pause or fork it), so a client, or a stateful fuzzer,
can chain them.
"""

from __future__ import annotations

from typing import Any

from ingest.triggers.limits import RESERVED_PARAMS, InputLimits

LIMITS = InputLimits()
# Text the guard lets through: no NUL (PostgreSQL text holds none). Written with escapes, so the
# pattern reads the same in every regex dialect. The guard also refuses a lone surrogate (UTF-8
# cannot encode one), which no pattern states: a JSON Schema string is Unicode text, which holds
# none, and a validator built on UTF-8 (Rust's regex) refuses a pattern that names U+D800 at all,
# and with it every rule the same schema states.
#
# Each run of text is written `(?:X+|)`, not `X*`: a test generator (schemathesis) folds a string's
# maxLength into a pattern's `*` as `{0,262144}`, a repetition whose compiled automaton takes a
# regex engine seconds to build and then exceeds its size limit; the alternation means the same
# in every dialect and is left as written.
TEXT_PATTERN = r"^(?:[^\x00]+|)$"
# What `str.strip()` trims (the characters of `str.isspace`), spelled out: JavaScript's and
# Python's `\s` differ (U+001C-U+001F, U+0085, U+FEFF), and a service that trims a name or a
# reason and finds it empty must refuse exactly what the pattern below leaves out.
SPACES = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_TEXT_CHAR = r"[^\x00]"
# SPACES as the inside of a regex character class, escaped for every dialect.
SPACES_CLASS = "".join(f"\\u{ord(c):04x}" for c in SPACES)
_SOLID_CHAR = "[^\\x00" + SPACES_CLASS + "]"
# Any run of SPACES, for patterns of values the server strips: a dialect's `\s` is not that set.
SPACES_RUN = f"[{SPACES_CLASS}]*"
# Text with at least one character `strip()` keeps: a name or a reason that is not blank.
NONBLANK_PATTERN = f"^(?:{_TEXT_CHAR}+|){_SOLID_CHAR}(?:{_TEXT_CHAR}+|)$"
# Text that `strip()` leaves as it is and not empty: a name that neither starts nor ends with a space.
TRIMMED_PATTERN = f"^{_SOLID_CHAR}(?:(?:{_TEXT_CHAR}+|){_SOLID_CHAR})?$"
# The same, or empty.
TRIMMED_OR_EMPTY_PATTERN = f"^(?:{_SOLID_CHAR}(?:(?:{_TEXT_CHAR}+|){_SOLID_CHAR})?)?$"
KEY_SCHEMA = {"type": "string", "maxLength": LIMITS.key_chars, "pattern": TEXT_PATTERN}
LARGEST = 10**LIMITS.number_digits - 1
JSON_VALUE = "#/components/schemas/JsonValue"
JSON_OBJECT = "#/components/schemas/JsonObject"
PARAMS_OBJECT = "#/components/schemas/Params"

COMPONENTS: dict[str, dict[str, Any]] = {
    "JsonValue": {
        "description": "Any JSON value within the input limits: text without U+0000 or lone "
        f"surrogates, numbers of at most {LIMITS.number_digits} digits, at most "
        f"{LIMITS.items} items per array or object, keys of at most {LIMITS.key_chars} "
        f"characters, nested at most {LIMITS.json_depth} deep.",
        # One schema with a list of types (each keyword applies to its own type), not an anyOf
        # of branches: every JSON type is allowed, so no type is "the wrong one".
        "type": ["null", "boolean", "number", "string", "array", "object"],
        "minimum": -LARGEST,
        "maximum": LARGEST,
        "maxLength": LIMITS.string_chars,
        "pattern": TEXT_PATTERN,
        "maxItems": LIMITS.items,
        "items": {"$ref": JSON_VALUE},
        "maxProperties": LIMITS.items,
        "propertyNames": KEY_SCHEMA,
        "additionalProperties": {"$ref": JSON_VALUE},
    },
    "JsonObject": {
        "type": "object",
        "maxProperties": LIMITS.items,
        "propertyNames": KEY_SCHEMA,
        "additionalProperties": {"$ref": JSON_VALUE},
    },
    "Params": {
        "description": "An instance's params: a JSON object whose keys are not the ones the engine "
        f"sets itself ({', '.join(RESERVED_PARAMS)}).",
        "type": "object",
        "maxProperties": LIMITS.items,
        "propertyNames": {**KEY_SCHEMA, "not": {"enum": list(RESERVED_PARAMS)}},
        "additionalProperties": {"$ref": JSON_VALUE},
    },
}


def _is_free_form(node: dict[str, Any]) -> bool:
    return node.get("type") == "object" and "properties" not in node and node.get("additionalProperties", True) is True


def _is_any(node: dict[str, Any]) -> bool:
    return not set(node) - {"title", "description", "default"}


def declare_input_limits(node: Any, *, params_keys: frozenset[str] = frozenset()) -> Any:
    """`node` (an input schema) with the guard's rules on every free text and free-form value."""
    if isinstance(node, list):
        return [declare_input_limits(item, params_keys=params_keys) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return node
    if _is_any(node):
        return {**node, "$ref": JSON_VALUE}
    if _is_free_form(node):
        return {k: v for k, v in node.items() if k not in ("type", "additionalProperties")} | {"$ref": JSON_OBJECT}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {
                name: (_as_params(prop) if name in params_keys else declare_input_limits(prop, params_keys=params_keys))
                for name, prop in value.items()
            }
        elif key in ("anyOf", "oneOf", "allOf", "items", "additionalProperties", "schema"):
            out[key] = declare_input_limits(value, params_keys=params_keys)
        else:
            out[key] = value
    if out.get("type") == "string" and not {"pattern", "enum", "const", "format"} & set(out):
        out["pattern"] = TEXT_PATTERN
    return out


def _as_params(prop: dict[str, Any]) -> dict[str, Any]:
    """An instance's `params` (an object, or an object or null) as the Params schema."""
    if _is_free_form(prop):
        return {k: v for k, v in prop.items() if k not in ("type", "additionalProperties")} | {"$ref": PARAMS_OBJECT}
    if "anyOf" in prop:
        return {**prop, "anyOf": [_as_params(option) for option in prop["anyOf"]]}
    return prop


def _refs(node: Any, found: set[str]) -> set[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            found.add(ref.rsplit("/", 1)[1])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)
    return found


def input_components(document: dict[str, Any]) -> set[str]:
    """The component schemas a request body or parameter uses, directly or through another."""
    components = document.get("components", {}).get("schemas", {})
    seen: set[str] = set()
    todo: set[str] = set()
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            _refs(operation.get("requestBody", {}), todo)
            _refs(operation.get("parameters", []), todo)
    while todo:
        name = todo.pop()
        if name in seen or name not in components:
            continue
        seen.add(name)
        todo |= _refs(components[name], set())
    return seen


def declare_limits(document: dict[str, Any], *, params_fields: dict[str, frozenset[str]]) -> None:
    """Apply `declare_input_limits` to every input of `document`, in place."""
    components = document.setdefault("components", {}).setdefault("schemas", {})
    for name in input_components(document):
        components[name] = declare_input_limits(components[name], params_keys=params_fields.get(name, frozenset()))
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            operation["parameters"] = declare_input_limits(operation.get("parameters", []))
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                body["schema"] = declare_input_limits(body["schema"])
            if not operation["parameters"]:
                del operation["parameters"]
    components.update(COMPONENTS)


def document_refusals(document: dict[str, Any]) -> None:
    """Every operation may answer the guard's 400 (text it refuses anywhere in the request); one
    with a body also 413 (over the size limit) and 415 (not JSON). In place."""
    error = {"$ref": "#/components/schemas/ErrorOut"}
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            statuses = [400, 413, 415] if "requestBody" in operation else [400]
            if "requestBody" in operation or operation.get("parameters"):
                statuses.append(422)
            for status in statuses:
                operation["responses"].setdefault(
                    status,
                    {
                        "description": "Refused before the handler: " + REFUSALS[status],
                        "content": {"application/json": {"schema": error}},
                    },
                )


REFUSALS = {
    400: "text with U+0000 or a lone surrogate, or JSON beyond the input limits",
    413: "the body is over the size limit",
    415: "the body is not JSON",
    422: "a parameter or body field does not match this schema",
}


def add_links(document: dict[str, Any], links: dict[tuple[str, str], dict[str, dict[str, Any]]]) -> None:
    """Add `links` (keyed by operation id and status) to the responses of `document`, in place."""
    by_id = {
        operation["operationId"]: operation
        for operations in document.get("paths", {}).values()
        for operation in operations.values()
    }
    for (operation_id, status), named in links.items():
        response = by_id[operation_id]["responses"][int(status)]
        response.setdefault("links", {}).update(named)
