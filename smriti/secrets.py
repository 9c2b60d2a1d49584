"""Credentials in memory text: found, then redacted or refused before anything is stored.

``find`` lists the credentials in a text as ``Finding(kind, start, end)``; ``redact``
replaces each span with ``[redacted:<kind>]``. The rules recognise the formats of
credentials (a provider's key prefix and length, a PEM block, a password inside a URL,
a ``password: ...`` assignment, a Luhn-valid card number), not randomness: a
high-entropy detector would also alter hashes, ids and ordinary words that happen to
look random, and a memory altered by mistake loses what the user said.

``screen`` applies the ``SMRITI_SECRETS`` policy to a memory's content, tags and
source; ``strip_private`` removes ``<private>...</private>`` text, whatever the policy.
``scrub`` is the cheap form for log values (``smriti.logs``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache

from smriti.errors import InvalidInput

#: Values of SMRITI_SECRETS.
MODES = ("redact", "refuse", "allow")
#: The kind reported for text removed between <private> and </private>.
PRIVATE = "private"

_PRIVATE = re.compile(r"<private\s*>.*?(?:</private\s*>|\Z)|</private\s*>", re.I | re.S)
_MARKER = re.compile(r"\[redacted:[a-z0-9-]+\]")
#: Values that stand for a credential in documentation and templates.
_PLACEHOLDER = re.compile(
    r"(?i)^(?:\*+|x{3,}|\.{3}|…|<[^>]*>|\$\{[^}]*\}|\$[A-Z_][A-Z0-9_]*|\{\{?[^}]*\}?\}|%\w+%|"
    r"\[redacted[^\]]*\]?|(?:your|my|the)[_-]\w+|password|passwd|secret|token|"
    r"changeme|example|none|null|nil|true|false|undefined|redacted|hidden|\*\*\*\w*)$"
)

#: Values that are code, not a credential: a template (``${{ secrets.X }}``, ``{{ x }}``),
#: a call or subscript (``getpass()``, ``os.environ["X"]``), an attribute
#: (``settings.db_password``) or a type (``password: str``).
_CODE = re.compile(
    r"(?i)^(?:\$\{|\{\{|<|%\(|\$\(|.*[(\[]|[a-z_]\w*(?:\.[a-z_]\w*)+[,;)]*$|"
    r"(?:str|bytes|string|int|bool|any|optional|secretstr|required|none)\??[,;)]*$)"
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One credential found: its kind and the span ``text[start:end]`` it occupies."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    #: Lower-case strings one of which text must contain for the rule to run (cheap).
    hints: tuple[str, ...]
    pattern: str
    #: The group whose span is the credential (0: the whole match).
    group: int = 0
    #: Accepts or rejects the credential's text (format checks the regex cannot make).
    check: Callable[[str], bool] | None = None
    #: Kind from the match instead of ``kind`` (keyword assignments).
    kind_of: Callable[[re.Match[str]], str] | None = None
    flags: int = 0


def _classes(value: str) -> int:
    return sum(
        (any(c.isdigit() for c in value), any(c.isupper() for c in value),
         any(c.islower() for c in value))
    )  # fmt: skip


def _random(value: str) -> bool:
    """Looks machine-made: at least two of digits, upper and lower case letters."""
    return _classes(value) >= 2


def _real(value: str) -> bool:
    """Not a placeholder (``***``, ``<password>``, ``${DB_PASS}``, ``changeme``...)."""
    return not _PLACEHOLDER.match(value) and not _MARKER.search(value)


def _credential(value: str) -> bool:
    """A value that reads as a credential rather than a word of prose: a digit, a
    capital inside it, or a symbol words do not use ("well-known" and "Practice" are
    words)."""
    if not _real(value) or len(value) < 8 or _CODE.match(value):
        return False
    inner_capital = any(c.isupper() for c in value[1:])
    symbol = re.search(r"[_+/=!@#$%^&*~.]", value.rstrip(".!?")) is not None
    return any(c.isdigit() for c in value) or inner_capital or symbol


def _password(value: str) -> bool:
    return (
        len(value) >= 3
        and _real(value)
        and not _CODE.match(value)
        and not value.startswith(("/", "~"))
    )


def _luhn(value: str) -> bool:
    digits = [int(c) for c in value if c.isdigit()]
    if not 13 <= len(digits) <= 19 or len(set(digits)) < 2:
        return False
    separators = {c for c in value if not c.isdigit()}
    if len(separators) > 1:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        total += (d * 2 - 9 if d > 4 else d * 2) if i % 2 else d
    return total % 10 == 0


def _assignment_kind(match: re.Match[str]) -> str:
    key = match.group("key").lower()
    if "pass" in key or "pwd" in key:
        return "password"
    if re.search(r"api.?key", key):
        return "api-key"
    if "token" in key:
        return "token"
    return "secret"


_END = r"(?![A-Za-z0-9_-])"
_PASSWORD_KEYS = r"password|passwd|passphrase|pwd"
_SECRET_KEYS = (
    r"api[_ -]?key|apikey|secret(?:[_ -]?key)?|client[_ -]?secret|access[_ -]?token|"
    r"auth[_ -]?token|refresh[_ -]?token|token|private[_ -]?key"
)
#: An assigned value: quoted, or a bare token. A bare all-letter word followed by more
#: words is prose ("Password: remember to change it"), not a value.
_VALUE = (
    r"""(?:"(?P<dq>[^"\n]{3,200})"|'(?P<sq>[^'\n]{3,200})'|"""
    r"""(?P<bare>[^\s"',;]*[^A-Za-z\s"',;][^\s"',;]*|[A-Za-z]{3,200}(?![A-Za-z]|[ \t]+[A-Za-z])))"""
)

#: Specific formats first: when two rules claim overlapping text, the earlier wins.
RULES: tuple[_Rule, ...] = (
    _Rule(
        "private-key",
        ("private key",),
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----.*?"
        r"(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        flags=re.S,
    ),
    _Rule(
        "aws-access-key",
        ("akia", "asia", "abia", "acca", "a3t"),
        r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b",
        check=_random,
    ),
    _Rule(
        "aws-secret-key",
        ("aws",),
        r"(?i:aws)[\w .:'\"-]{0,40}?(?i:secret|private)[\w .:='\"-]{0,40}?"
        r"(?<![A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        group=1,
        check=lambda v: _classes(v) == 3,
    ),
    _Rule(
        "github-token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{60,251})" + _END,
    ),
    _Rule("anthropic-key", ("sk-ant-",), r"\bsk-ant-[A-Za-z0-9_-]{32,}", check=_random),
    _Rule(
        "openai-key", ("sk-",), r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", check=_random
    ),
    _Rule(
        "slack-webhook",
        ("hooks.slack.com",),
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{16,}",
    ),
    _Rule(
        "slack-token",
        ("xox", "xapp-"),
        r"\b(?:xox[abposre]|xapp)-[A-Za-z0-9-]{10,250}",
        check=_random,
    ),
    _Rule(
        "stripe-key",
        ("k_live_", "k_test_"),
        r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,247}" + _END,
        check=_random,
    ),
    _Rule("google-api-key", ("aiza",), r"\bAIza[0-9A-Za-z_-]{35}" + _END),
    _Rule(
        "gitlab-token",
        ("gl",),
        r"\bgl(?:pat|dt|rt|ptt|ft|cbt|oas|soat|imt|agent)-[A-Za-z0-9_-]{20,}",
        check=_random,
    ),
    _Rule("smriti-api-key", ("smriti_",), r"\bsmriti_[0-9a-f]{12}_[A-Za-z0-9_-]{16,}"),
    _Rule("npm-token", ("npm_",), r"\bnpm_[A-Za-z0-9]{36}" + _END, check=_random),
    _Rule("pypi-token", ("pypi-age",), r"\bpypi-AgE[A-Za-z0-9_-]{50,}"),
    _Rule("huggingface-token", ("hf_",), r"\bhf_[A-Za-z0-9]{30,}" + _END, check=_random),
    _Rule("jwt", ("eyj",), r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*" + _END),
    _Rule(
        "azure-storage-key",
        ("accountkey", "sharedaccesskey"),
        r"(?i:\b(?:AccountKey|SharedAccessKey)\s*=\s*)([A-Za-z0-9+/]{30,}={0,2})",
        group=1,
    ),
    _Rule(
        "azure-sas-signature", ("sig=",), r"[?&]sig=([A-Za-z0-9%+/]{30,}(?:%3D|=){0,2})", group=1
    ),
    _Rule(
        "bearer-token",
        ("bearer",),
        r"(?i:\bbearer\s+)([A-Za-z0-9._~+/-]{16,}=*)" + _END,
        group=1,
        check=lambda v: _real(v) and _random(v),
    ),
    _Rule(
        "basic-auth",
        ("basic",),
        r"(?i:\bauthorization\s*[:=]\s*basic\s+)([A-Za-z0-9+/]{8,}={0,2})",
        group=1,
    ),
    _Rule(
        "url-password",
        ("://",),
        r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,30}://[^\s:/?#@\[\]]*:([^\s/?#@]+)@[^\s/?#@:]",
        group=1,
        check=_real,
    ),
    _Rule(
        "card-number",
        tuple("23456"),
        r"(?<![\d.,-])[2-6]\d(?:[ -]?\d){11,17}(?![\d]|[.,]\d)",
        check=_luhn,
    ),
    _Rule(
        "password",
        ("pass", "pwd"),
        rf"(?i:\b(?P<key>[\w.-]*?(?:{_PASSWORD_KEYS})(?:[_.-][a-z0-9]+)*)\b[\"']?\s*(?::=|=>|=|:)\s*){_VALUE}",
        check=_password,
        kind_of=_assignment_kind,
    ),
    _Rule(
        "password",
        ("password", "passphrase"),
        r"(?i:\b(?:password|passphrase)\s+(?:is|was|=)\s+)[\"']?([^\s\"',;]{6,200})",
        group=1,
        check=lambda v: _credential(v) and not v.isalpha(),
    ),
    _Rule(
        "secret",
        ("api", "key", "secret", "token"),
        rf"(?i:\b(?P<key>[\w.-]*?(?:{_SECRET_KEYS})(?:[_.-][a-z0-9]+)*)\b[\"']?\s*(?::=|=>|=|:)\s*){_VALUE}",
        check=_credential,
        kind_of=_assignment_kind,
    ),
)


@cache
def _compiled(ignore_case: bool) -> tuple[re.Pattern[str], ...]:
    extra = re.I if ignore_case else 0
    return tuple(re.compile(rule.pattern, rule.flags | extra) for rule in RULES)


def _value_group(rule: _Rule, match: re.Match[str]) -> int | str:
    """The group holding the credential: a keyword assignment's value, or ``group``."""
    if rule.kind_of is None:
        return rule.group
    return next(g for g in ("dq", "sq", "bare") if match.group(g) is not None)


def find(text: str, *, ignore_case: bool = False) -> list[Finding]:
    """The credentials in ``text``, in order, none overlapping.

    ``ignore_case`` also finds credentials in lower-cased text (cue names). When two
    rules claim overlapping text, the more specific one (earlier in ``RULES``) wins.
    """
    if not text:
        return []
    lowered = text.lower()
    taken: list[Finding] = []
    for rule, pattern in zip(RULES, _compiled(ignore_case), strict=True):
        if not any(hint in lowered for hint in rule.hints):
            continue
        for match in pattern.finditer(text):
            group = _value_group(rule, match)
            start, end = match.span(group)
            value = match.group(group)
            if rule.check is not None and not rule.check(value):
                continue
            if any(start < f.end and f.start < end for f in taken):
                continue
            kind = rule.kind_of(match) if rule.kind_of is not None else rule.kind
            taken.append(Finding(kind, start, end))
    return sorted(taken, key=lambda f: f.start)


def marker(kind: str) -> str:
    """The text a redacted credential of ``kind`` is replaced with."""
    return f"[redacted:{kind}]"


def redact(text: str, *, ignore_case: bool = False) -> tuple[str, list[Finding]]:
    """``text`` with every credential replaced by its marker, and what was found."""
    found = find(text, ignore_case=ignore_case)
    if not found:
        return text, []
    parts: list[str] = []
    at = 0
    for f in found:
        parts += [text[at : f.start], marker(f.kind)]
        at = f.end
    parts.append(text[at:])
    return "".join(parts), found


def scrub(value: str) -> str:
    """``value`` with credentials redacted (for log lines; text holding none of the
    rules' hints costs one lower-casing and a few substring searches)."""
    return redact(value)[0]


def strip_private(text: str) -> tuple[str, int]:
    """``text`` without its ``<private>...</private>`` parts (case-insensitive, across
    lines; an unclosed ``<private>`` hides the rest), and how many there were."""
    if "<" not in text:
        return text, 0
    count = 0

    def gone(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return " "

    out = _PRIVATE.sub(gone, text)
    if not count:
        return text, 0
    return re.sub(r"[ \t]{2,}", " ", out).strip(), count


def summary(kinds: Iterable[str]) -> list[dict[str, object]]:
    """``[{"kind": ..., "count": ...}]`` in first-seen order: what a result reports."""
    return [{"kind": k, "count": n} for k, n in Counter(kinds).items()]


@dataclass(slots=True)
class Screened:
    """A memory's fields after ``screen``; ``kinds`` names each thing removed."""

    text: str
    tags: list[str]
    source: str
    kinds: list[str] = field(default_factory=list)

    @property
    def hidden(self) -> list[dict[str, object]]:
        """What was removed, as a result reports it (``summary``)."""
        return summary(self.kinds)


def screen(mode: str, text: str, tags: Iterable[str] = (), source: str = "") -> Screened:
    """Apply the SMRITI_SECRETS policy ``mode`` to a memory's content, tags and source.

    ``<private>`` text is removed in every mode. Then ``redact`` replaces credentials
    with markers, ``refuse`` raises InvalidInput naming their kinds, ``allow`` keeps
    them. Raises InvalidInput when nothing but private text was given.
    """
    kinds: list[str] = []
    text, hid = strip_private(text)
    kinds += [PRIVATE] * hid
    if not text.strip():
        raise InvalidInput(
            "content holds only <private> text, which is never stored: nothing was "
            "stored; give the part to remember outside <private>...</private>"
        )
    fields_ = [text, *tags, source]
    cleaned: list[str] = []
    for value in fields_:
        value, hid = strip_private(value)
        kinds += [PRIVATE] * hid
        cleaned.append(value)
    if mode != "allow":
        cleaned = _apply(mode, cleaned, kinds)
    labels = list(dict.fromkeys(t.strip() for t in cleaned[1:-1] if t.strip()))
    return Screened(cleaned[0], labels, cleaned[-1].strip(), kinds)


def screen_memory(
    mode: str, text: str, tags: list[str], source: str
) -> tuple[str, list[str], str, list[dict[str, object]]]:
    """``screen`` under the SMRITI_SECRETS ``mode``, as the store pipeline uses it:
    (content, tags, source, what was hidden)."""
    done = screen(mode, text, tags, source)
    return done.text, done.tags, done.source, done.hidden


def screen_tags(mode: str, tags: list[str]) -> tuple[list[str], list[dict[str, object]]]:
    """``screen`` for a tags-only change (``update``): the tags, and what was hidden."""
    kinds: list[str] = []
    cleaned: list[str] = []
    for tag in tags:
        tag, hid = strip_private(tag)
        kinds += [PRIVATE] * hid
        cleaned.append(tag)
    if mode != "allow":
        cleaned = _apply(mode, cleaned, kinds)
    return list(dict.fromkeys(t.strip() for t in cleaned if t.strip())), summary(kinds)


def _apply(mode: str, values: list[str], kinds: list[str]) -> list[str]:
    results = [redact(v) for v in values]
    found = [f.kind for _, fs in results for f in fs]
    if found and mode == "refuse":
        raise InvalidInput(refusal(found))
    kinds += found
    return [v for v, _ in results]


def refusal(kinds: Iterable[str], where: str = "") -> str:
    """The message of a refused store: the kinds found and what to do."""
    named = ", ".join(dict.fromkeys(kinds))
    return (
        f"the memory{where} contains what looks like a secret ({named}): nothing was "
        "stored (SMRITI_SECRETS=refuse); remove it, or wrap it in <private>...</private>"
    )
