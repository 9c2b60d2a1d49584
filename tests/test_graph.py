"""``smriti graph`` and ``smriti clusters``: selection, legend, formats, escaping, and the
page as a real browser (headless Chromium) runs it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import igraph
import pytest

from smriti.backend import unit
from smriti.engine import Engine
from smriti.errors import NotFound
from smriti.graphview.render import write_picture
from smriti.graphview.select import strength
from smriti.model import Association, Cue, Engram, Link
from smriti.owner import ops
from smriti.requests import ClustersRequest, GraphRequest
from smriti.testing.owner_load import cli, load_env

TOPICS = ("cooking", "running", "music", "travel", "garden", "finance", "pets", "coding")
WORDS = {t: [f"{t}-{k}" for k in ("alpha", "beta", "gamma", "delta", "omega")] for t in TOPICS}
HUB = "daily"
HOSTILE = '</script><script>alert(1)</script> "quotes" <img src=x onerror=alert(1)> & done'
HOSTILE_ID = "m-hostile"
CHROMIUM = Path("/usr/bin/chromium")


def planted_store(engine: Engine, n: int = 1000) -> None:
    """``n`` memories in len(TOPICS) clusters (every 50th unassigned), each linked to
    its topic cue, two topic words and the hub cue every memory shares, associated with
    the memories 8 and 16 before it (same topic); plus one hostile memory, the strongest."""
    import numpy as np

    rng = np.random.default_rng(5)
    dims = engine.embedder.dims
    names = [*TOPICS, *(w for t in TOPICS for w in WORDS[t]), HUB]
    cues = [Cue(f"c-{name}", name, "keyword", unit(rng.standard_normal(dims))) for name in names]
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    engrams, links, edges = [], [], []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        words = [WORDS[topic][i % 5], WORDS[topic][(i // 8) % 5]]
        text = f"{topic} note {i}: {words[0]} and {words[1]}"
        engrams.append(
            Engram(
                id=f"m{i:05d}",
                content=text,
                summary=text,
                memory_type="episodic",
                importance=round(((i * 37) % 100) / 100, 2),
                created_at=t0 + timedelta(minutes=i),
                last_accessed_at=t0 + timedelta(minutes=i),
                access_count=i % 7,
                decay_factor=1.0,
                embedding=unit(rng.standard_normal(dims)),
                cluster_id=-1 if i % 50 == 0 else i % len(TOPICS),
            )
        )
        links += [Link(f"m{i:05d}", f"c-{c}") for c in {topic, *words, HUB}]
        edges += [Association(f"m{i:05d}", f"m{i - k:05d}", 0.8) for k in (8, 16) if i >= k]
    engrams.append(
        engrams[0].with_changes(
            id=HOSTILE_ID, content=HOSTILE, summary=HOSTILE, importance=1.0, access_count=50
        )
    )
    links += [Link(HOSTILE_ID, "c-cooking"), Link(HOSTILE_ID, f"c-{HUB}")]
    engine.backend.import_records(engrams, cues, links, edges, [])


def graph(engine: Engine, **args: Any) -> dict[str, Any]:
    return ops.run(engine, GraphRequest.parse(**args))


# ------------------------------------------------------------------------ selection


def test_default_limit_draws_the_strongest_and_says_so(engine: Engine) -> None:
    planted_store(engine)
    data = graph(engine, limit=300)
    assert len(data["nodes"]) == 300 and data["limited"] and data["total_memories"] == 1001
    every = sorted(engine.backend.engram_stats(), key=lambda s: (-strength(s), s.id))
    assert {n["id"] for n in data["nodes"]} == {s.id for s in every[:300]}
    assert data["nodes"][0]["id"] == HOSTILE_ID
    # edges only among what is drawn; the hub and shared words are drawn as cues
    drawn = {n["id"] for n in data["nodes"]}
    assert all(a in drawn and b in drawn for a, b, _ in data["associations"])
    cue_ids = {c["id"] for c in data["cues"]}
    assert "c-daily" in cue_ids and all(c in cue_ids for _, c in data["cue_edges"])
    assert not graph(engine, limit=5000)["limited"]


def test_one_cluster_and_a_neighbourhood(engine: Engine) -> None:
    planted_store(engine)
    three = graph(engine, cluster=3, limit=5000)
    assert {n["cluster"] for n in three["nodes"]} == {3}
    assert len(three["nodes"]) == sum(1 for i in range(1000) if i % 8 == 3 and i % 50)
    alone = graph(engine, around="m00500", hops=0)
    assert [n["id"] for n in alone["nodes"]] == ["m00500"]
    near = graph(engine, around="m00500", hops=1, limit=5000)
    hops = {n["id"]: n["hop"] for n in near["nodes"]}
    assert hops["m00500"] == 0 and near["nodes"][0]["id"] == "m00500"
    assert hops["m00492"] == 1 and hops["m00508"] == 1  # associations, both directions
    assert set(hops.values()) == {0, 1}
    two = graph(engine, around="m00500", hops=2, limit=5000)
    assert len(two["nodes"]) > len(near["nodes"])
    with pytest.raises(NotFound):
        graph(engine, around="no-such-memory")


def test_clusters_are_named_by_their_specific_cues(engine: Engine) -> None:
    planted_store(engine)
    table = ops.run(engine, ClustersRequest())
    assert sum(c["size"] for c in table["clusters"]) == 1001
    assert table["clusters"][-1]["id"] == -1  # unassigned last
    by_id = {c["id"]: c for c in table["clusters"]}
    for k, topic in enumerate(TOPICS):
        assert by_id[k]["top_cues"][0] == topic, by_id[k]
        assert HUB not in by_id[k]["top_cues"]  # on every memory: says nothing
        assert by_id[k]["sample"]["summary"].startswith(topic)
    legend = {c["id"]: c for c in graph(engine)["clusters"]}
    assert legend[2]["label"].startswith("cluster 2: music")


# -------------------------------------------------------------------------- formats


def test_graphml_opens_in_igraph_with_every_node_and_edge(engine: Engine, tmp_path: Path) -> None:
    planted_store(engine)
    data = graph(engine, limit=200)
    write_picture(data, tmp_path / "g.graphml", "graphml", "access", "t")
    read = igraph.Graph.Read_GraphML(str(tmp_path / "g.graphml"))
    assert read.vcount() == len(data["nodes"]) + len(data["cues"])
    assert read.ecount() == len(data["associations"]) + len(data["cue_edges"])
    labels = dict(zip(read.vs["name"], read.vs["label"], strict=True))
    assert labels[HOSTILE_ID] == HOSTILE


def test_html_and_svg_escape_memory_text(engine: Engine, tmp_path: Path) -> None:
    planted_store(engine)
    data = graph(engine, limit=50)
    write_picture(data, tmp_path / "g.html", "html", "importance", 'title </title><b>"')
    page = (tmp_path / "g.html").read_text(encoding="utf-8")
    assert "alert(1)</script>" not in page and "<img" not in page and "</title><b>" not in page
    block = re.search(r'<script type="application/json" id="graph-data">(.*?)</script>', page, re.S)
    assert block is not None and "<" not in block.group(1)
    scene = json.loads(block.group(1))
    assert scene["memories"][0]["summary"] == HOSTILE
    assert len(scene["memories"]) == 50
    write_picture(data, tmp_path / "g.svg", "svg", "importance", "t")
    svg = ET.parse(tmp_path / "g.svg").getroot()
    titles = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}title")]
    assert HOSTILE in titles


def test_same_selection_same_layout(engine: Engine) -> None:
    from smriti.graphview.layout import layout

    planted_store(engine, n=300)
    data = graph(engine, limit=120)
    first = layout(data)
    assert first == layout(data)
    assert len(first) == len(data["nodes"]) + len(data["cues"])
    assert all(0.0 <= x <= 1.0 and 0.0 <= y <= 1.0 for x, y in first)


# ------------------------------------------------------------- the command and a browser


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """A store for the CLI: no keys, lexical embedder, an owner that leaves soon."""
    clean = load_env(
        tmp_path / "store", "viewer", HOME=str(tmp_path / "home"), SMRITI_OWNER_IDLE="2"
    )
    clean.pop("LOG_LEVEL", None)
    return clean


@pytest.fixture
def cli_store(cli_env: dict[str, str], engine_factory: Any) -> dict[str, str]:
    """The 1,000-memory planted store under ``cli_env``, closed again."""
    engine = engine_factory(
        "viewer", STORAGE_LOCATION=cli_env["STORAGE_LOCATION"], SMRITI_EMBEDDER="lexical"
    )
    planted_store(engine)
    engine.close()
    return cli_env


def smriti(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return cli(env, *args, timeout=180)


def chromium() -> Path:
    """Debian's chromium, installed now when missing (CI runs as root); fails, never skips."""
    if not CHROMIUM.exists() and shutil.which("apt-get") and os.geteuid() == 0:
        quiet = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-q", "chromium"]
        if subprocess.run(install, env=quiet, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], env=quiet, capture_output=True)
            subprocess.run(install, env=quiet, capture_output=True)
    assert CHROMIUM.exists(), "chromium is needed: apt-get install chromium"
    return CHROMIUM


def browse(page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """Chromium headless on ``page`` (a path; ``#fragment`` kept) after its scripts ran."""
    path, _, fragment = str(page).partition("#")
    uri = Path(path).as_uri() + (f"#{fragment}" if fragment else "")
    cmd = [str(chromium()), "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,900"]
    cmd += ["--virtual-time-budget=5000", *flags, uri]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)


def test_page_runs_in_a_browser(cli_store: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "memory.html"
    done = smriti(cli_store, "graph", str(out), "--limit", "300")
    assert done.returncode == 0, done.stderr
    assert "300 memories of 1,001" in done.stdout and "limited to the 300 strongest" in done.stdout
    dom = browse(out, "--dump-dom").stdout
    assert re.search(r'<body[^>]*data-nodes="300"', dom), dom[:2000]
    assert re.search(r'<strong id="count">300 memories</strong>', dom)
    assert "limited to the 300 strongest of 1,001" in dom
    assert "<img" not in dom and "<script>alert" not in dom  # nothing injected
    assert "&lt;img src=x onerror=alert(1)&gt;" in dom  # the text, shown as text
    assert dom.count('class="memory"') == 300
    # the search box: page.html#q=... opens with that search
    scene = json.loads(re.search(r'id="graph-data">(.*?)</script>', out.read_text()).group(1))
    names = [c["name"] for c in scene["cues"]]
    cues_of: dict[int, list[str]] = {}
    for memory, cue in scene["cue_edges"]:
        cues_of.setdefault(memory, []).append(names[cue - len(scene["memories"])])
    expected = sum(
        "music-alpha" in f"{m['summary']} {m['id']} {' '.join(cues_of.get(i, []))}".lower()
        for i, m in enumerate(scene["memories"])
    )
    assert expected > 0
    found = browse(Path(f"{out}#q=music-alpha"), "--dump-dom").stdout
    assert re.search(rf'<body[^>]*data-matches="{expected}"', found), found[:600]
    assert f"{expected} matching memories" in found
    shot = tmp_path / "shot.png"
    browse(out, f"--screenshot={shot}")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_graph_formats_options_and_errors(cli_store: dict[str, str], tmp_path: Path) -> None:
    done = smriti(cli_store, "graph", str(tmp_path / "g.graphml"), "--cluster", "2", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["format"] == "graphml" and not report["limited"]
    read = igraph.Graph.Read_GraphML(report["path"])
    assert read.vcount() == report["memories"] + report["cues"]
    assert read.ecount() == report["associations"] + report["cue_edges"]
    assert set(read.vs.select(kind="memory")["cluster"]) == {2.0}
    done = smriti(cli_store, "graph", str(tmp_path / "near.out"), "--around", "m00100",
                  "--hops", "1", "--format", "json", "--size-by", "access")  # fmt: skip
    assert done.returncode == 0, done.stderr
    scene = json.loads((tmp_path / "near.out").read_text())
    assert scene["memories"][0]["id"] == "m00100" and scene["size_by"] == "access"
    missing = smriti(cli_store, "graph", str(tmp_path / "x.html"), "--around", "nope")
    assert missing.returncode == 1 and "no memory with id 'nope'" in missing.stderr
    empty = smriti(cli_store, "graph", str(tmp_path / "x.html"), "--cluster", "4242")
    assert empty.returncode == 1 and "no memory is in cluster 4242" in empty.stderr
    assert not (tmp_path / "x.html").exists()
    nowhere = smriti(cli_store, "graph", str(tmp_path / "no" / "x.html"))
    assert nowhere.returncode == 2 and "does not exist" in nowhere.stderr


def test_clusters_command(cli_store: dict[str, str]) -> None:
    done = smriti(cli_store, "clusters")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["CLUSTER", "MEMORIES", "TOP", "CUES", "SAMPLE"]
    assert any(line.startswith("unassigned") for line in lines)
    assert lines[-1] == "9 clusters, 1,001 memories"
    data = json.loads(smriti(cli_store, "clusters", "--json").stdout)
    assert {c["top_cues"][0] for c in data["clusters"] if c["id"] >= 0} == set(TOPICS)
