"""Cue extraction with an OpenAI-compatible chat-completions endpoint.

The model is asked for JSON at temperature 0, with the strongest output mode the
endpoint accepts: a strict ``json_schema``, else ``json_object``, else a plain prompt.
The mode that works is remembered. Replies are parsed tolerantly (code fences, chatter
around the object, alternative key names, unknown types); transport errors and
unparseable replies are retried with backoff, and the last failure raises ProviderError
so that the engine can fall back to the heuristic extractor.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any, ClassVar

from smriti import (
    CUE_TYPES,
    MEMORY_TYPES,
    ConfigError,
    CueExtractor,
    CueRef,
    Extraction,
    ProviderError,
    get_logger,
)
from smriti.default_plugins._openai_common import (
    DEFAULT_LLM_BASE_URL,
    PLACEHOLDER_KEY,
    LazyClient,
    MalformedResponse,
    RetryPolicy,
    classify,
    redact,
    safe_url,
)

if TYPE_CHECKING:
    from openai import OpenAI

    from smriti import Settings

log = get_logger(__name__)

MAX_CUES = 10
MAX_CUE_CHARS = 80
#: Longer memories are cut before they are sent; the head says what they are about.
MAX_INPUT_CHARS = 16_000
FORMATS = ("json_schema", "json_object", "plain")

STORE_PROMPT = """\
You are the indexing step of a long-term memory store. The user message is one memory \
to file away. Answer with exactly one JSON object and no other text:
{"summary": "...", "memory_type": "...", "cues": [{"name": "...", "type": "..."}]}

summary: one or two plain sentences keeping the essential fact, event or instruction.
memory_type:
  "episodic"   something that happened: an event or experience at a time or place;
  "semantic"   a fact, preference, opinion or piece of general knowledge;
  "procedural" how to do something: steps, methods, routines, commands.
cues: 3 to 10 short lower-case phrases (1-3 words) that someone might later think of \
when trying to recall this memory. Each has a type:
  "entity"  a named person, place, organisation, product or object;
  "keyword" a distinctive term that appears in the memory;
  "concept" a broader topic or idea the memory belongs to, even if unstated \
(e.g. "fruit" for strawberries);
  "context" the circumstances: time, setting, activity or mood.
Use only what the memory says; do not invent facts."""

QUERY_PROMPT = """\
The user message is a question or search phrase addressed to a memory store. Answer \
with exactly one JSON object and no other text: {"cues": [{"name": "...", "type": "..."}]}
List 1 to 8 cues: the people, places, things and topics the query is about, plus one or \
two broader related concepts. Names are short lower-case phrases; type is one of \
"entity", "keyword", "concept", "context"."""

_CUE_ITEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "type": {"type": "string", "enum": list(CUE_TYPES)},
    },
    "required": ["name", "type"],
    "additionalProperties": False,
}


def response_schema(query: bool) -> dict[str, Any]:
    """The strict JSON schema requested with ``response_format=json_schema``."""
    cues = {"type": "array", "items": _CUE_ITEM_SCHEMA, "minItems": 1, "maxItems": MAX_CUES}
    if query:
        properties: dict[str, Any] = {"cues": cues}
    else:
        properties = {
            "summary": {"type": "string"},
            "memory_type": {"type": "string", "enum": list(MEMORY_TYPES)},
            "cues": {**cues, "minItems": 3},
        }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


class OpenAICueExtractor(CueExtractor):
    """Cue extractor that asks an OpenAI-compatible chat model (``LLM_MODEL``)."""

    name: ClassVar[str] = "openai"
    priority: ClassVar[int] = 100
    description: ClassVar[str] = "LLM cue extraction via an OpenAI-compatible chat API"

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        timeout: float = 30.0,
        max_retries: int = 3,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.policy = RetryPolicy(max_retries=max_retries)
        self._api_key = api_key
        self._client = LazyClient(self.base_url, api_key, timeout)
        #: Index into FORMATS of the best output mode the endpoint has accepted.
        self.format_index = 0
        #: False once the endpoint rejected ``temperature`` (some reasoning models do).
        self.send_temperature = True

    @classmethod
    def from_settings(
        cls, settings: Settings, *, explicit: bool = False
    ) -> OpenAICueExtractor | None:
        """An instance when ``LLM_API_KEY`` is set or ``LLM_BASE_URL`` points elsewhere."""
        custom_url = settings.llm_base_url.rstrip("/") != DEFAULT_LLM_BASE_URL
        if not settings.llm_api_key and not custom_url:
            if explicit:
                raise ConfigError(
                    "SMRITI_CUE_EXTRACTOR=openai needs LLM_API_KEY, or LLM_BASE_URL for a "
                    "local server that needs no key"
                )
            return None
        return cls(
            base_url=settings.llm_base_url,
            api_key=settings.llm_api_key or PLACEHOLDER_KEY,
            model=settings.llm_model,
            timeout=settings.llm_timeout,
            max_retries=settings.llm_max_retries,
        )

    def __repr__(self) -> str:
        return f"OpenAICueExtractor(base_url={safe_url(self.base_url)!r}, model={self.model!r})"

    @property
    def response_mode(self) -> str:
        """The output mode used next: ``json_schema``, ``json_object`` or ``plain``."""
        return FORMATS[self.format_index]

    def extract(self, text: str, *, query: bool = False) -> Extraction:
        """Summary, memory type and cues of ``text``; ProviderError after the retries."""
        what = f"cue extraction with {self.model}"
        attempt = 0
        while True:
            try:
                return self._attempt(text[:MAX_INPUT_CHARS], query)
            except ProviderError:
                raise
            except Exception as exc:
                failure = classify(exc)
                reason = redact(failure.reason, [self._api_key])
                if not failure.retryable or attempt >= self.policy.max_retries:
                    raise ProviderError(
                        f"{what} failed after {attempt + 1} attempt(s): {reason}"
                    ) from None
                wait = self.policy.delay(attempt, failure.retry_after)
                log.warning(
                    "cue extraction failed, retrying",
                    attempt=attempt + 1,
                    reason=reason[:300],
                    wait_s=round(wait, 3),
                )
                time.sleep(wait)
                attempt += 1

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def _get_client(self) -> OpenAI:
        return self._client.get()

    def _attempt(self, text: str, query: bool) -> Extraction:
        """One extraction: steps down the output modes while the endpoint rejects them."""
        import openai

        index = self.format_index
        while True:
            try:
                content = self._complete(text, query, FORMATS[index])
            except openai.BadRequestError as exc:
                if self.send_temperature and "temperature" in str(exc.message).lower():
                    self.send_temperature = False
                    continue
                if index + 1 >= len(FORMATS):
                    raise
                log.info(
                    "endpoint rejected response_format, trying the next mode",
                    rejected=FORMATS[index],
                    next=FORMATS[index + 1],
                )
                index += 1
                continue
            if index != self.format_index:
                self.format_index = index
            return parse_extraction(content, query=query, text=text)

    def _complete(self, text: str, query: bool, mode: str) -> str:
        messages = [
            {"role": "system", "content": QUERY_PROMPT if query else STORE_PROMPT},
            {"role": "user", "content": text},
        ]
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.send_temperature:
            params["temperature"] = 0
        if mode == "json_schema":
            name = "smriti_query_cues" if query else "smriti_memory_index"
            schema = {"name": name, "strict": True, "schema": response_schema(query)}
            params["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif mode == "json_object":
            params["response_format"] = {"type": "json_object"}
        response = self._get_client().chat.completions.create(**params)
        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            raise MalformedResponse("no choices in the chat completion") from None
        if not isinstance(content, str) or not content.strip():
            raise MalformedResponse("the model returned no text")
        return content


# --- tolerant parsing -------------------------------------------------------------

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*(.*?)```", re.DOTALL)
_CUE_KEYS: dict[str, str] = {
    "cues": "keyword",
    "cue": "keyword",
    "entities": "entity",
    "keywords": "keyword",
    "concepts": "concept",
    "contexts": "context",
    "topics": "concept",
    "tags": "keyword",
}
_CUE_TYPE_ALIASES: dict[str, str] = {
    "entities": "entity",
    "person": "entity",
    "people": "entity",
    "organization": "entity",
    "organisation": "entity",
    "org": "entity",
    "place": "entity",
    "location": "entity",
    "product": "entity",
    "object": "entity",
    "named_entity": "entity",
    "keywords": "keyword",
    "term": "keyword",
    "concepts": "concept",
    "topic": "concept",
    "theme": "concept",
    "idea": "concept",
    "category": "concept",
    "contexts": "context",
    "time": "context",
    "setting": "context",
    "situation": "context",
    "activity": "context",
    "event": "context",
}
_MEMORY_TYPE_ALIASES: dict[str, str] = {
    "event": "episodic",
    "experience": "episodic",
    "episode": "episodic",
    "fact": "semantic",
    "knowledge": "semantic",
    "preference": "semantic",
    "procedure": "procedural",
    "instruction": "procedural",
    "how-to": "procedural",
    "howto": "procedural",
    "skill": "procedural",
}
_SUMMARY_KEYS = ("summary", "abstract", "description", "gist")
_MEMORY_TYPE_KEYS = ("memory_type", "memorytype", "memory type", "type", "category", "kind")
_NAME_KEYS = ("name", "cue", "text", "value", "term", "entity", "keyword", "label")
_ITEM_TYPE_KEYS = ("type", "cue_type", "cuetype", "kind", "category")


def parse_extraction(content: str, *, query: bool = False, text: str = "") -> Extraction:
    """Turn a model reply into an Extraction, tolerating the usual deviations.

    Raises MalformedResponse when there is no JSON object, or (for memories, not
    queries) when it names no cues.
    """
    obj = _first_object(content)
    if obj is None:
        raise MalformedResponse(f"no JSON object in the reply: {content[:80]!r}")
    obj = {str(k).strip().lower(): v for k, v in obj.items()}
    cues = _cues(obj)
    if not cues and not query:
        raise MalformedResponse("the reply names no cues")
    summary = _first_str(obj, _SUMMARY_KEYS) or ("" if query else _fallback_summary(text))
    memory_type = _memory_type(_first_str(obj, _MEMORY_TYPE_KEYS))
    return Extraction(summary=summary, memory_type=memory_type, cues=cues)


def _first_object(content: str) -> dict[str, Any] | None:
    """The first JSON object in ``content``: inside code fences first, then anywhere."""
    candidates = [m.group(1) for m in _FENCE.finditer(content)] + [content]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for match in re.finditer(r"\{", candidate):
            try:
                value, _ = decoder.raw_decode(candidate, match.start())
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return _unwrap(value)
    return None


def _unwrap(obj: dict[str, Any]) -> dict[str, Any]:
    """``{"result": {...}}`` and similar single-key wrappers, unwrapped."""
    if len(obj) == 1:
        (inner,) = obj.values()
        if isinstance(inner, dict) and not any(k.lower() in _CUE_KEYS for k in obj):
            return inner
    return obj


def _first_str(obj: dict[str, Any], keys: tuple[str, ...]) -> str:
    for key in keys:
        value = obj.get(key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return ""


def _memory_type(raw: str) -> str:
    value = raw.strip().lower()
    if value in MEMORY_TYPES:
        return value
    return _MEMORY_TYPE_ALIASES.get(value, "semantic")


def _cue_type(raw: object, default: str) -> str:
    if not isinstance(raw, str):
        return default
    value = raw.strip().lower().replace(" ", "_")
    if value in CUE_TYPES:
        return value
    return _CUE_TYPE_ALIASES.get(value, "keyword")


def _cues(obj: dict[str, Any]) -> list[CueRef]:
    """Cues from every cue-like key, in order, de-duplicated, at most MAX_CUES."""
    found: list[CueRef] = []
    seen: set[str] = set()
    for key, default_type in _CUE_KEYS.items():
        for name, cue_type in _cue_items(obj.get(key), default_type):
            folded = name.casefold()
            if folded not in seen:
                seen.add(folded)
                found.append(CueRef(name, cue_type))
    return found[:MAX_CUES]


def _cue_items(value: object, default_type: str) -> list[tuple[str, str]]:
    """(name, type) pairs from a list of strings/objects or a {type: [names]} mapping."""
    if isinstance(value, dict):
        return [
            pair
            for group, names in value.items()
            for pair in _cue_items(names, _cue_type(group, default_type))
        ]
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return []
    pairs = []
    for item in value:
        name, cue_type = _cue_item(item, default_type)
        if name:
            pairs.append((name[:MAX_CUE_CHARS].strip(), cue_type))
    return pairs


def _cue_item(item: object, default_type: str) -> tuple[str, str]:
    if isinstance(item, str):
        return " ".join(item.split()), default_type
    if not isinstance(item, dict):
        return "", default_type
    lowered = {str(k).strip().lower(): v for k, v in item.items()}
    name = next((v for k in _NAME_KEYS if isinstance(v := lowered.get(k), str) and v.strip()), "")
    raw_type = next((lowered[k] for k in _ITEM_TYPE_KEYS if k in lowered), None)
    return " ".join(name.split()), _cue_type(raw_type, default_type)


def _fallback_summary(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 200 else flat[:197].rstrip() + "..."
