"""Tool argument errors in words: what the MCP SDK's pydantic check found, said the way
the tools say their own errors.

The SDK validates a tool's arguments against its signature before the tool runs and
answers a failure with pydantic's report (``1 validation error for
smriti_storeArguments ... Field required [type=missing ...]``). A client's model has to
act on that text, so each problem is said here as one sentence naming the argument and,
from the tool's input schema, what it is for.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

#: JSON types as a person names them.
_KINDS = {
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
}


def argument_problems(error: ValidationError, schema: dict[str, Any]) -> str:
    """One sentence per bad argument in ``error``, for a tool whose input JSON schema
    is ``schema``: a missing one says what it is for, a wrong type says what it needs."""
    properties = schema.get("properties", {})
    said = [_problem(item, properties) for item in error.errors(include_url=False)]
    return "; ".join(dict.fromkeys(said))  # one sentence per problem, in order


def _problem(item: Any, properties: dict[str, Any]) -> str:
    name = ".".join(str(part) for part in item.get("loc", ())) or "arguments"
    kind = item.get("type", "")
    if kind == "missing":
        return f"{name} is required: {_purpose(properties.get(name, {}))}"
    if kind in _KINDS:
        given = type(item.get("input")).__name__
        return f"{name} must be {_KINDS[kind]}, got {_json_kind(given)}"
    return f"{name}: {item.get('msg', 'invalid value')}"


def _purpose(prop: dict[str, Any]) -> str:
    """What an argument is for, from its schema description (its allowed values if it
    has no description)."""
    text = str(prop.get("description", "")).strip().rstrip(".")
    if not text and prop.get("enum"):
        text = "one of " + ", ".join(str(v) for v in prop["enum"])
    return (text[:1].lower() + text[1:]) if text else "see the tool's input schema"


def _json_kind(python_type: str) -> str:
    return {
        "dict": "an object",
        "list": "an array",
        "NoneType": "null",
        "str": "a string",
        "int": "a number",
        "float": "a number",
        "bool": "a boolean",
    }.get(python_type, python_type)
