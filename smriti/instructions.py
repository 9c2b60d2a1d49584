"""Memory content that reads as an instruction to the model, flagged when it is read.

A memory is data: what someone said or wrote down. Text that addresses the assistant
("ignore previous instructions", "you are now ..."), imitates a conversation's role
markers (``system:``, ``<|im_start|>``) or a tool call (``<tool_call>``, function-call
JSON, "call the X tool") may be an injection stored on purpose, or a quoted one. Such
content is kept as it was said; recall and ``get`` results carry ``flags``, e.g.
``[{"kind": "instruction", "reason": "addresses the assistant: 'ignore previous
instructions'"}]``, so that clients and the system prompt treat it as data.

Flags are computed when a memory is read, not stored: the patterns can improve without
a migration, every backend and every older memory gets them at once, and a read
scans only the few memories it returns (a regular expression pass over each).

The patterns aim at text addressed to a model, not at ordinary imperatives between
people ("call me tomorrow", "ignore him"): ``bench/instruction_scan.py`` measures how
many LoCoMo dev turns they flag.
"""

from __future__ import annotations

import re
from typing import Final

#: The kind of every flag this module gives.
INSTRUCTION: Final = "instruction"
#: Characters of the matched text quoted in a reason.
QUOTE_CHARS = 60
#: Content longer than this is scanned in its first and last parts only (a pattern
#: match is local; an injection hides at either end of a long paste).
SCAN_CHARS = 20_000

_I = re.IGNORECASE
_M = re.IGNORECASE | re.MULTILINE

_ASSISTANT = "addresses the assistant"
#: (reason prefix, trigger words, pattern), checked in order; a reason gives at most one
#: flag. A pattern runs only when the lower-cased text holds one of its triggers: a
#: substring test is far cheaper than a regular expression tried at every position.
_RULES: tuple[tuple[str, tuple[str, ...], re.Pattern[str]], ...] = (
    (
        _ASSISTANT,
        ("ignore", "disregard", "forget", "override", "bypass", "skip"),
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass|skip)\s+"
            r"(?:(?:all|any|every|each|of|the|your|my|these|those|its)\s+){0,3}"
            r"(?:previous|prior|above|earlier|preceding|former|system|original|initial|"
            r"existing|other|safety)\s+"
            r"(?:instructions?|prompts?|rules|directions|directives|guidelines|commands?|"
            r"messages?|context|constraints|policies|guardrails)\b"
            r"|\b(?:ignore|disregard|forget)\s+(?:all\s+|everything\s+)?"
            r"(?:the\s+|that\s+is\s+|written\s+)?(?:above|before\s+this|said\s+above)\b",
            _I,
        ),
    ),
    (
        _ASSISTANT,
        ("you are now",),
        re.compile(
            r"\byou\s+are\s+now\s+(?:an?\s+|the\s+|in\s+|my\s+)?"
            r"(?:\w+\s+){0,2}?(?:assistant|ai|model|bot|chatbot|agent|mode|persona|"
            r"character|dan|jailbroken|unrestricted|unfiltered|free|no\s+longer)\b",
            _I,
        ),
    ),
    (
        _ASSISTANT,
        ("from now on",),
        re.compile(
            r"\bfrom\s+now\s+on,?\s+(?:you|the\s+assistant|the\s+ai)\s+(?:will|must|are|should)\b",
            _I,
        ),
    ),
    (
        _ASSISTANT,
        ("instruction", "prompt"),
        re.compile(
            r"\bnew\s+(?:system\s+)?instructions?\s*:"
            r"|\b(?:reveal|print|output|repeat|show|leak|dump)\s+(?:me\s+)?(?:your|the)\s+"
            r"(?:system\s+prompt|hidden\s+instructions|instructions\s+above|initial\s+prompt)",
            _I,
        ),
    ),
    (
        _ASSISTANT,
        ("if you are", "dear", "attention", "note to"),
        re.compile(
            r"\bif\s+you\s+are\s+(?:an?\s+)?(?:ai|llm|language\s+model|assistant|chatbot)\b"
            r"|\b(?:dear|attention|note\s+to(?:\s+the)?)\s+(?:ai|assistant|llm|model|agent)\b",
            _I,
        ),
    ),
    (
        _ASSISTANT,
        ("assistant", "llm", "claude", "gpt", "ai,", "ai:", "ai ,", "ai :"),
        re.compile(
            r"\b(?:assistant|ai|llm|claude|chatgpt|gpt-?\d*)\s*[,:]\s*(?:you\s+must|always|"
            r"never|do\s+not|don't|ignore|reveal|send|delete|forget|output|print|respond|"
            r"reply|say|execute|run|call)\b",
            _I,
        ),
    ),
    (
        _ASSISTANT,
        (
            "reads this",
            "read this",
            "sees this",
            "see this",
            "recalls this",
            "recall this",
            "retrieves this",
            "retrieve this",
        ),
        re.compile(
            r"\b(?:when|whenever|if)\s+(?:the\s+|an?\s+)?(?:assistant|ai|model|llm|agent)\s+"
            r"(?:reads?|sees?|recalls?|retrieves?)\s+this\b",
            _I,
        ),
    ),  # fmt: skip
    (
        "a role marker",
        ("system", "assistant", "developer", "inst]", "<<sys>>", "<</sys>>", "##"),
        re.compile(
            r"^\s*(?:#+\s*)?(?:system|assistant|developer)\s*:"
            r"|\[/?INST\]|<</?SYS>>|^\s*#{2,}\s*(?:instruction|system)\b",
            _M,
        ),
    ),
    (
        "a chat-template token",
        ("<",),
        re.compile(r"<\|\s*[a-z][a-z0-9_]*\s*\|>|<\s*/?\s*(?:system|assistant)\s*>", _I),
    ),
    (
        "tool-call syntax",
        ("<", "{"),
        re.compile(
            r"<\s*/?\s*(?:tool_call|tool_use|tool_calls|function_call|function_calls|"
            r"invoke|tool_code|tool_result)\b[^>]*>"
            r"|\{\s*\"(?:name|tool|tool_name|function)\"\s*:\s*\"[^\"]{1,80}\"\s*,\s*"
            r"\"(?:arguments|parameters|args|input)\"\s*:",
            _I,
        ),
    ),
    (
        "asks for a tool call",
        ("tool", "function", "smriti_"),
        re.compile(
            r"\b(?:call|invoke|execute|trigger)\s+(?:the\s+)?`?[a-z][\w.-]*`?\s+"
            r"(?:tool|function)\b"
            # "use the hammer tool" is ordinary; a code name (`x`, snake_case) is not
            r"|\b(?:use|run)\s+(?:the\s+)?(?:`[\w.-]+`|[a-z]+_[\w.-]+)\s+(?:tool|function)\b"
            r"|\b(?:call|invoke|run|use)\s+`?smriti_(?:store|recall|manage)\b",
            _I,
        ),
    ),
)


def instruction_flags(content: str) -> list[dict[str, str]]:
    """The flags of ``content``: one ``{"kind": "instruction", "reason": ...}`` per kind
    of instruction-like text found (empty for ordinary text), in a fixed order."""
    text = content if len(content) <= SCAN_CHARS else _ends(content)
    lowered = text.lower()
    flags: list[dict[str, str]] = []
    seen: set[str] = set()
    for reason, triggers, pattern in _RULES:
        if reason in seen or not any(t in lowered for t in triggers):
            continue
        found = pattern.search(text)
        if found is not None:
            seen.add(reason)
            flags.append({"kind": INSTRUCTION, "reason": f"{reason}: {_quote(found.group())}"})
    return flags


def _ends(content: str) -> str:
    half = SCAN_CHARS // 2
    return content[:half] + "\n" + content[-half:]


def _quote(matched: str) -> str:
    """The matched text, one line, short, quoted."""
    text = " ".join(matched.split())
    if len(text) > QUOTE_CHARS:
        text = text[: QUOTE_CHARS - 3] + "..."
    return repr(text) if "'" in text else f"'{text}'"
