"""Registration through the entry point, settings, and graph-per-user naming."""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points

import pytest
from smriti_backend_falkor.backend import FalkorBackend
from smriti_backend_falkor.connection import graph_name_for, parse_addr, safe_graph_component
from smriti_backend_falkor.embedded import FalkorLiteBackend

from smriti import ConfigError
from smriti.config import Settings
from smriti.plugins import Registry, create_plugin_manager
from smriti.testing import GraphBuilder


def test_entry_point_registers_the_backend() -> None:
    [ep] = [e for e in entry_points(group="smriti") if e.name == "smriti-backend-falkor"]
    pm, _ = create_plugin_manager(load_entry_points=False)
    pm.register(ep.load(), name=ep.name)
    # The built-ins register backends of their own; this plugin's list is the one with ours.
    [classes] = [c for c in pm.hook.register_storage_backends() if FalkorBackend in c]
    assert classes == [FalkorBackend, FalkorLiteBackend]
    assert FalkorBackend.name == "falkordb" and "falkor" in FalkorBackend.aliases
    registry = Registry(pm)
    assert registry is not None


def test_plugin_module_does_not_import_the_driver() -> None:
    import subprocess
    import sys

    code = (
        "import sys, smriti_backend_falkor.plugin as p; "
        "assert 'falkordb' not in sys.modules and 'redis' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_from_settings_reads_falkor_variables() -> None:
    settings = Settings.from_env(
        {
            "DB_TYPE": "falkordb",
            "FALKOR_ADDR": "db.example:6380",
            "FALKOR_PASSWORD": "pw",
            "FALKOR_GRAPH": "memories",
            "FALKOR_ISOLATION": "graph",
        }
    )
    backend = FalkorBackend.from_settings(settings, "alice")
    assert (backend.addr, backend.graph_name, backend.isolation) == (
        "db.example:6380",
        "alice_smriti",
        "graph",
    )
    assert "pw" not in repr(backend)
    tenant = FalkorBackend.from_settings(Settings.from_env({"FALKOR_GRAPH": "memories"}), "bob")
    assert tenant.graph_name == "memories" and tenant.isolation == "tenant"


def test_graph_names_are_safe_and_distinct() -> None:
    assert graph_name_for("alice", "graph", "x") == "alice_smriti"
    names = {safe_graph_component(u) for u in ("a.b", "a_b", "a-b", "a__2eb", "A.b", "ä")}
    assert len(names) == 6
    for name in names:
        assert all(c.isascii() and (c.isalnum() or c in "_-") for c in name)
    with pytest.raises(ConfigError):
        graph_name_for("", "graph", "x")
    with pytest.raises(ConfigError):
        graph_name_for("alice", "database", "x")


@pytest.mark.parametrize("bad", ["localhost", "host:", ":6379", "host:99999", "host:port"])
def test_bad_address_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match="FALKOR_ADDR"):
        parse_addr(bad)


def test_graph_mode_uses_one_graph_per_user(
    make_backend: Callable[..., FalkorBackend], falkor_addr: str
) -> None:
    from falkordb import FalkorDB

    build = GraphBuilder(8)
    alice, bob = make_backend("alice.x", "graph"), make_backend("alice_x", "graph")
    alice.add_memory(build.engram(1), [build.cue("apple")], [])
    bob.add_memory(build.engram(2), [build.cue("apple")], [])
    host, port = falkor_addr.rsplit(":", 1)
    db = FalkorDB(host=host, port=int(port))
    try:
        graphs = set(db.list_graphs())
        assert {"alice_2ex_smriti", "alice__x_smriti"} <= graphs
        for name, want in (("alice_2ex_smriti", "e00001"), ("alice__x_smriti", "e00002")):
            rows = db.select_graph(name).ro_query("MATCH (e:Engram) RETURN e.id").result_set
            assert rows == [[want]]
    finally:
        db.close()
    assert [e.id for e in alice.iter_engrams()] == ["e00001"]


def test_tenant_mode_tags_every_node_with_user(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    build = GraphBuilder(8)
    alice = make_backend("alice")
    alice.add_memory(build.engram(1), [build.cue("a"), build.cue("b")], [])
    alice.set_meta("k", "v")
    rows = alice._run("MATCH (n) RETURN DISTINCT n.user", read=True)
    assert rows == [["alice"]]


def test_vector_index_created_with_cosine_and_ef_runtime(
    make_backend: Callable[..., FalkorBackend],
) -> None:
    build = GraphBuilder(8)
    alice = make_backend("alice")
    alice.import_records([build.engram(i) for i in range(60)], [], [], [], [])
    created = alice.ensure_indexes(8, 50)
    assert any("Engram.embedding" in c for c in created)
    rows = alice._run(
        "CALL db.indexes() YIELD label, types, options RETURN label, types, options", read=True
    )
    vector_opts = [o["embedding"] for label, t, o in rows if "VECTOR" in t.get("embedding", [])]
    assert len(vector_opts) == 2  # Engram and Cue
    for opts in vector_opts:
        assert opts["similarityFunction"] == "cosine" and opts["dimension"] == 8
        assert opts["efRuntime"] >= 100
    fulltext = [label for label, t, _ in rows if "FULLTEXT" in t.get("content", [])]
    assert fulltext == ["Engram"]
