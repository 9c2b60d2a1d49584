"""The settings the FalkorDB server backend reads (``FalkorBackend.declared_settings``)."""

from __future__ import annotations

from smriti import Setting

FALKOR_ADDR = Setting.host_port(
    "FALKOR_ADDR", "localhost:6379", help="FalkorDB (Redis) server as host:port."
)
FALKOR_PASSWORD = Setting.text("FALKOR_PASSWORD", "", secret=True, help="FalkorDB password.")
FALKOR_GRAPH = Setting.text("FALKOR_GRAPH", "smriti", help="Graph name (in `tenant` isolation).")
FALKOR_ISOLATION = Setting.choice(
    "FALKOR_ISOLATION",
    "tenant",
    ("tenant", "graph"),
    help="`tenant`: one shared graph; `graph`: one graph `{user}_smriti` per user.",
)
SETTINGS = (FALKOR_ADDR, FALKOR_PASSWORD, FALKOR_GRAPH, FALKOR_ISOLATION)
