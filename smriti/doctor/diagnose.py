"""The doctor's run: settings, then components, then every configured server in parallel."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pluggy

from smriti.config import SECRET_FIELDS, Settings
from smriti.doctor import component_checks as cc
from smriti.doctor import probes
from smriti.doctor.checks import Check, fail, guarded, ok, one_line
from smriti.doctor.privacy import privacy_checks
from smriti.doctor.settings_view import SettingRow, entries, view
from smriti.doctor.store import store_checks, unusable_store
from smriti.doctor.team import team_checks
from smriti.plugins import PluginReport, Registry
from smriti.setting import Setting


@dataclass(slots=True)
class Diagnosis:
    """What doctor found: the settings rows and the checks, in report order."""

    user: str
    rows: list[SettingRow]
    checks: list[Check]
    secrets: list[str] = field(default_factory=list, repr=False)

    @property
    def failed(self) -> bool:
        """Whether any check failed (the exit code is then 1)."""
        return any(c.status == "fail" for c in self.checks)


def diagnose(environ: Mapping[str, str], overrides: Mapping[str, Any] | None = None) -> Diagnosis:
    """Check the configuration in ``environ`` with CLI ``overrides``; never raises."""
    overrides = dict(overrides or {})
    plugins = _Plugins.load(environ)
    shown = view(environ, overrides, plugins.declared)
    settings = shown.settings
    user = settings.accessing_user if settings is not None else "?"
    secrets = _secrets(environ, settings, plugins.declared)
    result = Diagnosis(user, shown.rows, list(shown.checks), secrets)
    if settings is not None:
        result.checks += guarded("plugins", lambda: _components(settings, plugins))
        result.checks += guarded("privacy", lambda: privacy_checks(settings))
        result.checks += guarded("team server", lambda: team_checks(settings))
    return result


@dataclass(slots=True)
class _Plugins:
    """The installed plugins, their registry and the settings they declare; ``error``
    when loading them failed (reported as the ``plugins`` check)."""

    pm: pluggy.PluginManager | None = None
    report: PluginReport | None = None
    registry: Registry | None = None
    declared: list[tuple[str, Setting[Any]]] = field(default_factory=list)
    error: Exception | None = None

    @classmethod
    def load(cls, environ: Mapping[str, str]) -> _Plugins:
        from smriti.plugins import create_plugin_manager

        try:
            pm, report = create_plugin_manager(environ=environ)
            registry = Registry(pm)
            return cls(pm, report, registry, registry.declared_settings())
        except Exception as exc:  # reported by the plugins check, never a traceback
            return cls(error=exc)


def _secrets(
    environ: Mapping[str, str],
    settings: Settings | None,
    declared: list[tuple[str, Setting[Any]]],
) -> list[str]:
    """Secret values to scrub from the output, whether or not they validated."""
    secret = [e for e in entries(declared) if e.setting.secret]
    values = {environ.get(e.var, "").strip() for e in secret}
    if settings is not None:
        values |= {str(getattr(settings, name)) for name in SECRET_FIELDS}
    return sorted((v for v in values if len(v) >= 4), key=len, reverse=True)


def _components(settings: Settings, plugins: _Plugins) -> list[Check]:
    if plugins.error is not None:
        raise plugins.error
    assert plugins.pm is not None and plugins.report is not None and plugins.registry
    registry, report = plugins.registry, plugins.report
    checks = cc.plugin_checks(report, registry)
    pending: list[probes.Probe] = []
    chosen: dict[str, Any] = {}
    checks += guarded("backend", lambda: _backend(registry, report, settings, chosen))
    checks += guarded("embedder", lambda: _embedder(registry, settings, pending))
    checks += guarded("cue extractor", lambda: _extractor(registry, settings, pending))
    checks += guarded("backup", lambda: _backup(registry, settings, chosen))
    pending = _merge_openai(pending)
    checks += guarded("plugin probes", lambda: _plugin_probes(plugins, settings, chosen, pending))
    return checks + probes.run_parallel(pending)


def _plugin_probes(
    plugins: _Plugins, settings: Settings, chosen: dict[str, Any], pending: list[probes.Probe]
) -> list[Check]:
    """Add every plugin's probes of the chosen components (``doctor_probes``)."""
    assert plugins.pm is not None
    backend, backup = chosen.get("backend"), chosen.get("backup")
    hook = plugins.pm.hook.doctor_probes
    for found in hook(settings=settings, backend=backend, backup=backup):
        pending.extend(_contained(probe) for probe in found or [])
    return []


def _contained(probe: probes.Probe) -> probes.Probe:
    """``probe``, with an exception it raises turned into a ``fail`` line."""

    def run() -> Check:
        try:
            return probe()
        except Exception as exc:  # a plugin's broken probe is a finding, not a crash
            name = getattr(probe, "__qualname__", "probe")
            return fail("plugin probe", f"{name}: {one_line(exc)}", "report it to the plugin")

    return run


def _backend(
    registry: Registry, report: PluginReport, settings: Settings, chosen: dict[str, Any]
) -> list[Check]:
    from smriti.doctor.engine import engine_check
    from smriti.engine.components import choose_backend

    checks = [cc.backend_check(registry, report, settings)]
    engine = engine_check(registry, settings)
    checks += [engine] if engine is not None else []
    backend = choose_backend(registry, settings, settings.accessing_user)
    chosen["backend"] = getattr(backend, "inner", backend)  # the plugin's own class
    path = cc.store_path(backend)
    unusable = unusable_store(path) if path is not None else None
    if unusable is not None:  # no owner could open it either: say why, once
        checks.append(unusable)
    elif path is not None and getattr(backend, "single_process", False):
        from smriti.doctor.owner import owner_check, owner_status

        status = owner_status(settings)
        checks += store_checks(path, owner_pid=status["pid"] if status else None)
        checks.append(owner_check(settings, status))
    elif path is not None:
        checks += store_checks(path)
    else:
        checks.append(ok("store", f"on the {backend.name} server (user {settings.accessing_user})"))
    return checks


def _embedder(registry: Registry, settings: Settings, pending: list[probes.Probe]) -> list[Check]:
    check, name = cc.embedder_check(registry, settings)
    if name == "openai":
        pending.append(
            _OpenAIProbe(
                "embedding endpoint",
                settings.effective_embedding_base_url,
                settings.effective_embedding_api_key,
                [("EMBEDDING_MODEL", settings.embedding_model)],
            )
        )
    return [check]


def _extractor(registry: Registry, settings: Settings, pending: list[probes.Probe]) -> list[Check]:
    check, name = cc.extractor_check(registry, settings)
    if name == "openai":
        pending.append(
            _OpenAIProbe(
                "LLM endpoint",
                settings.llm_base_url,
                settings.llm_api_key,
                [("LLM_MODEL", settings.llm_model)],
            )
        )
    return [check]


def _backup(registry: Registry, settings: Settings, chosen: dict[str, Any]) -> list[Check]:
    check, provider = cc.backup_check(registry, settings)
    chosen["backup"] = provider
    return [check]


@dataclass(slots=True)
class _OpenAIProbe:
    """A pending ``GET /models``; two with the same URL and key are merged into one."""

    name: str
    base_url: str
    api_key: str
    wanted: list[tuple[str, str]]

    def __call__(self) -> Check:
        embedding = self.name.startswith("embedding")
        variables = (
            ("EMBEDDING_BASE_URL", "EMBEDDING_API_KEY")
            if embedding
            else ("LLM_BASE_URL", "LLM_API_KEY")
        )
        return probes.openai_models(self.name, self.base_url, variables, self.api_key, self.wanted)


def _merge_openai(pending: list[probes.Probe]) -> list[probes.Probe]:
    merged: list[probes.Probe] = []
    seen: dict[tuple[str, str], _OpenAIProbe] = {}
    for probe in pending:
        if not isinstance(probe, _OpenAIProbe):
            merged.append(probe)
            continue
        key = (probe.base_url.rstrip("/"), probe.api_key)
        if key in seen:
            seen[key].name = "LLM and embedding endpoint"
            seen[key].wanted += probe.wanted
            continue
        seen[key] = probe
        merged.append(probe)
    return merged
