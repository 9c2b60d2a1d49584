"""The settings reference (``docs/settings.md``), generated from the declarations.

The core settings come from ``smriti.config`` (their meanings are written here); each
plugin of the product (``smriti-server`` and its extras) documents its own settings
in its declarations (``smriti.Setting``: default, validator, secret, help). Allowed
values come from each setting's own validator. Regenerate with::

    python -m smriti.doctor.settings_reference > docs/settings.md
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from importlib.metadata import PackageNotFoundError, requires
from itertools import groupby
from typing import Any

from smriti.doctor.settings_view import FLAGS, Entry, entries
from smriti.errors import ConfigError
from smriti.setting import Setting

#: The product distribution: the plugins it brings (extras included) are documented.
PRODUCT = "smriti-server"

#: A value no validator accepts, so each one says what it allows.
_PROBE = "\x00?"
#: Defaults computed at run time, described instead of shown.
COMPUTED_DEFAULTS = {"ACCESSING_USER": "the OS user name", "STORAGE_LOCATION": "`~/.smriti`"}

MEANINGS: dict[str, str] = {
    "ACCESSING_USER": "Whose memory this is; one store (or tenant, graph) per user. Case "
    "and Unicode width do not matter: `Bob`, `BOB` and `bob` are the one user `bob`.",
    "STORAGE_LOCATION": "Directory of the embedded stores: `{STORAGE_LOCATION}/{user}/`, "
    "made private (directories 0700, files 0600) whatever the umask. It must be "
    "writable: otherwise the server and every command stop at startup saying so.",
    "DB_TYPE": "Storage backend: `auto` (a store keeps the engine that made it, a new store gets "
    "LadybugDB), `ladybug`, `kuzu`, `neo4j`, `falkordb`, or a plugin.",
    "LLM_BASE_URL": "OpenAI-compatible API for cue extraction (Ollama, vLLM, LM Studio, ...).",
    "LLM_API_KEY": "API key of the LLM; with no key and the default URL, no LLM is used.",
    "LLM_MODEL": "Chat model used to extract summaries, memory types and cues.",
    "LLM_TIMEOUT": "Seconds to wait for one LLM or embeddings request.",
    "LLM_MAX_RETRIES": "Retries (with backoff) of a failed LLM or embeddings request.",
    "EMBEDDING_BASE_URL": "OpenAI-compatible embeddings API; empty: `LLM_BASE_URL`.",
    "EMBEDDING_API_KEY": "API key of the embeddings API; empty: `LLM_API_KEY`.",
    "EMBEDDING_MODEL": "Embedding model of the embeddings API.",
    "EMBEDDING_DIMS": "Vector width to request and check; unset: learned from the first vector.",
    "SMRITI_EMBEDDER": "`auto` (the best configured), `openai`, `local`, `lexical`, or a plugin.",
    "SMRITI_CUE_EXTRACTOR": "`auto`, `openai` (LLM) or `heuristic` (built-in), or a plugin.",
    "BACKUP_TYPE": "`none`, `git` (`github` alias), `s3`, or a plugin's provider.",
    "BACKUP_SYNC_INTERVAL": "Seconds between backup pushes; 0: only on `sync` and at shutdown.",
    "CONSOLIDATION_INTERVAL": "Seconds between consolidations (decay, prune, cluster); 0: off.",
    "DECAY_RATE": "Decay per day since last access: `decay = exp(-rate * days)`.",
    "PRUNE_DECAY_THRESHOLD": "Consolidation deletes memories whose decay is below this...",
    "PRUNE_IMPORTANCE_THRESHOLD": "...and whose importance is below this.",
    "INDEX_THRESHOLD": "Memories after which vector and full-text indexes are created.",
    "ASSOCIATION_THRESHOLD": "Similarity (cosine on the common scale, see the local embedder's "
    "README) above which a new memory is linked to an existing one.",
    "ASSOCIATION_TOP_K": "Most associations made for one new memory.",
    "DEDUP_THRESHOLD": "Similarity (common scale) at or above which an existing memory is reported "
    "in near_duplicates and linked to a new one, which is stored either way; only a repeat (the "
    "same text after normalising Unicode, case, spacing and punctuation) is merged; off: no "
    "near-duplicate reports, and repeats are stored again too.",
    "CONFLICT_THRESHOLD": "Similarity (common scale) at or above which a new memory sharing a cue "
    "with an existing one but saying something else is reported in possible_conflicts (0.2 lower "
    "when the new text says something changed: now, no longer, moved...).",
    "CONTIGUITY_SECONDS": "A new memory stored within this many seconds of the previous one "
    "(same user) follows it: recall raises the memories just before and after a strong "
    "match; 0: off.",
    "WEIGHT_SIMILARITY": "Recall score weight of similarity.",
    "WEIGHT_RECENCY": "Recall score weight of recency of access.",
    "WEIGHT_IMPORTANCE": "Recall score weight of importance.",
    "WEIGHT_DECAY": "Recall score weight of the decay factor.",
    "CLUSTER_PENALTY": "Score factor of hop results outside the seed cluster.",
    "SMRITI_ERASE_DELAY": "Seconds from a forget to the erase of its text from the store's "
    "files; forgets within it share one erase (a Kùzu store is rebuilt, which takes seconds); "
    "0: erase before each forget returns. A store stopped first erases at close or next start.",
    "SMRITI_MAX_CONTENT_CHARS": "Longest memory accepted, in characters.",
    "SMRITI_MAX_RECALL_LIMIT": "Largest `limit` a recall may ask for.",
    "SMRITI_SECRETS": "Credentials (API keys, tokens, private keys, passwords in URLs "
    "and assignments, card numbers) in a memory's content, tags or source: `redact` "
    "replaces each with `[redacted:<kind>]` before anything is stored or derived; "
    "`refuse` rejects the store naming the kinds; `allow` keeps them. Text between "
    "`<private>` and `</private>` is never stored, whatever this says.",
    "SMRITI_OWNER": "`auto`: every process of a user reaches an embedded store (Kùzu) "
    "through one owner process, so several MCP clients and the CLI work at once; `off`: "
    "each process opens the store itself (only one at a time can).",
    "SMRITI_OWNER_IDLE": "Seconds the owner process stays with no process attached "
    "before it closes the store and exits (0: until stopped).",
    "SMRITI_WORKING_SET": "`auto`: a backend that is its store's only writer (Kùzu, "
    "FalkorDB Lite) has its recall reads answered from a working set in memory, loaded in "
    "the background; `on`: also a server backend (when one Smriti server is the only "
    "writer of its database); `off`: every read asks the backend.",
    "SMRITI_WORKING_SET_MB": "Memory for the working sets of one process (all its users; "
    "least recently used evicted first); a store that does not fit is read from the "
    "backend, with a warning. 0: no working set.",
    "LOG_LEVEL": "Log level (logs go to stderr).",
    "SMRITI_AUTH": "Who may call the HTTP server: `auto` (OAuth when `SMRITI_OAUTH_ISSUER` "
    "is set, API keys when the key file exists, else none), `none` (loopback binds only), "
    "`keys`, `oauth`, `keys+oauth`. With any authentication each call uses its caller's "
    "own memory. stdio ignores it.",
    "SMRITI_API_KEYS_FILE": "The API key file of `smriti keys` (hashed keys, mode 0600); "
    "default `{STORAGE_LOCATION}/.api-keys.json`.",
    "SMRITI_PUBLIC_URL": "The MCP endpoint as clients reach it (e.g. "
    "`https://memory.example.com/mcp`): the OAuth resource and default audience, an "
    "allowed Host and Origin. Needed for OAuth on a non-loopback bind.",
    "SMRITI_OAUTH_ISSUER": "OAuth 2.1 resource-server mode: the issuer whose JWT access "
    "tokens are accepted (exactly as in their `iss`).",
    "SMRITI_OAUTH_AUDIENCE": "The `aud` tokens must carry; default `SMRITI_PUBLIC_URL`.",
    "SMRITI_OAUTH_JWKS_URL": "The issuer's signing keys; default: the `jwks_uri` of its "
    "RFC 8414 (or OpenID) metadata.",
    "SMRITI_OAUTH_READ_SCOPE": "The scope that grants reading (recall, stats).",
    "SMRITI_OAUTH_WRITE_SCOPE": "The scope that grants writing (store, forget, consolidate, sync).",
    "SMRITI_OAUTH_USER_CLAIM": "The token claim that names the user (a valid user name).",
    "SMRITI_ALLOWED_HOSTS": "Comma-separated Host names the HTTP server answers besides "
    "loopback and the bound address (a name without a port matches any port); others "
    "get 421.",
    "SMRITI_ALLOWED_ORIGINS": "Comma-separated Origins (`https://app.example`) allowed "
    "besides loopback and `SMRITI_PUBLIC_URL`'s; others get 403.",
    "SMRITI_MAX_LOADED_USERS": "Users whose memory an authenticated HTTP server keeps "
    "open; the least recently used idle one is closed for the next.",
    "SMRITI_PRINCIPALS_FILE": "JSON file mapping OAuth subjects to user names "
    '(`{"<issuer>": {"<subject>": "<user>"}}`), read again when it changes; an unmapped '
    "subject's memory is `oauth-<digest>-<subject>`, never an API-key user's.",
    "SMRITI_USER_SESSIONS": "Open MCP sessions one user may hold on the HTTP server; one "
    "more closes that user's oldest idle session, or is refused with 429 when all are busy.",
    "SMRITI_KEY_SESSIONS": "Open MCP sessions one API key (or OAuth subject) may hold, "
    "within its user's.",
    "SMRITI_SESSION_IDLE": "Seconds after which an HTTP session with no request in flight "
    "is closed (its client opens a new one).",
    "SMRITI_RATE_LIMIT": "Tool calls per minute per user on the HTTP server (a token "
    "bucket); `auto`: off on a loopback bind, 600 otherwise; `off`: no limit. Over it: "
    "429 with Retry-After.",
    "SMRITI_RATE_BURST": "Tool calls a user may make at once before the rate applies.",
    "SMRITI_HTTP_HEADER_TIMEOUT": "Seconds a connection has to send a request's headers "
    "(from its first byte, or from connecting); slower ones get 408 and are closed.",
    "SMRITI_HTTP_BODY_TIMEOUT": "Seconds a request has to send its whole body; slower "
    "ones get 408 and are closed.",
    "SMRITI_HTTP_KEEPALIVE": "Seconds an idle kept-alive connection stays open; above a "
    "proxy's own idle timeout (60 s for nginx and AWS ALB), so the proxy closes first.",
    "SMRITI_HTTP_MAX_CONNECTIONS": "Open connections the HTTP server accepts; more get 503 "
    "and are closed (keep `ulimit -n` above it).",
    "SMRITI_AUDIT_LOG": "The authenticated HTTP server's audit log (JSON lines, mode 0600: "
    "time, principal, client address, tool, action, memory ids, outcome; never content); "
    "default `{STORAGE_LOCATION}/.audit.jsonl`; `off`: none.",
}

OTHER_VARIABLES = """\
## Other variables

Read by the plugin loader:

| Variable | Default | Meaning |
|---|---|---|
| `SMRITI_STRICT_PLUGINS` | unset | `1`: a plugin that fails to load is an error, not a warning. |
| `SMRITI_LOAD_PLUGINS` | unset | Comma-separated entry-point names: load only these. |
| `SMRITI_DISABLE_PLUGINS` | unset | Comma-separated entry-point names to skip. |
"""

HEADER = """\
# Settings

Smriti reads its settings from environment variables; `--user`, `--storage`,
`--db-type` and `--log-level` override the first three and the last. An invalid value
stops the server at startup with one line naming the variable and what it accepts.
`smriti doctor` shows the values in effect and where each came from.
Secrets (marked 🔒) are never logged or printed.

<!-- Generated by `python -m smriti.doctor.settings_reference > docs/settings.md`. -->

"""
TABLE_HEAD = """\
| Variable | Default | Allowed | Meaning |
|---|---|---|---|
"""
PLUGINS_HEADER = """\
## Plugin settings

Each plugin declares the settings it reads; they are validated at startup like the
ones above, whichever backend or provider is chosen.
"""


def allowed(setting: Setting[Any]) -> str:
    """What the setting's validator accepts, in its own words."""
    try:
        setting.parse(setting.env, _PROBE)
    except ConfigError as exc:
        message = str(exc)
    else:
        return "any text"
    found = re.search(r"\(allowed: ([^)]*)\)", message)
    if found:
        return found.group(1)
    tail = re.split(r" is (?:not )?| must be ", message, maxsplit=1)[-1]
    return tail.removeprefix("invalid ").strip()


def default(e: Entry) -> str:
    """The default as shown in the reference."""
    if e.var in COMPUTED_DEFAULTS:
        return COMPUTED_DEFAULTS[e.var]
    if e.setting.default_text:
        return e.setting.default_text
    value = e.setting.default
    return "unset" if value in (None, "", ()) else f"`{value}`"


def row(e: Entry) -> str:
    """One Markdown table row."""
    name = f"`{e.var}`" + (" 🔒" if e.setting.secret else "")
    if e.field in FLAGS:
        name += f" (`{FLAGS[e.field]}`)"
    meaning = e.setting.help or MEANINGS.get(e.var, "")
    cells = [name, default(e), _cell(allowed(e.setting)), meaning]
    return "| " + " | ".join(cells) + " |"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _plugin_sections(plugin_entries: Sequence[Entry]) -> str:
    """One table per plugin, in plugin name order."""
    out = []
    ordered = sorted(plugin_entries, key=lambda e: e.plugin)
    for plugin, group in groupby(ordered, key=lambda e: e.plugin):
        rows = "\n".join(row(e) for e in group)
        out.append(f"### {plugin}\n\n{TABLE_HEAD}{rows}\n")
    return "\n".join(out)


def render(declared: Iterable[tuple[str, Setting[Any]]] = ()) -> str:
    """The whole reference as Markdown: the core settings, then the ``declared``
    (plugin, setting) pairs grouped by plugin."""
    shown = entries(declared)
    core = "\n".join(row(e) for e in shown if not e.plugin)
    plugins = [e for e in shown if e.plugin]
    sections = f"{PLUGINS_HEADER}\n{_plugin_sections(plugins)}\n" if plugins else ""
    return f"{HEADER}{TABLE_HEAD}{core}\n\n{sections}{OTHER_VARIABLES}"


def product_settings() -> list[tuple[str, Setting[Any]]]:
    """The settings declared by the installed plugins that ``smriti-server`` brings."""
    from smriti.plugins import Registry, create_plugin_manager

    product = _product_distributions()
    pm, report = create_plugin_manager()
    dists = {info.name: info.distribution for info in report.loaded}
    declared = Registry(pm).declared_settings()
    return [
        (plugins, s)
        for plugins, s in declared
        if any(dists.get(p) in product for p in plugins.split(", "))
    ]


def _product_distributions() -> set[str]:
    try:
        wanted = requires(PRODUCT) or []
    except PackageNotFoundError:
        return set()
    return {re.split(r"[\s<>=!~;\[(]", spec, maxsplit=1)[0].strip() for spec in wanted}


if __name__ == "__main__":
    print(render(product_settings()), end="")
