"""The settings the Neo4j backend reads (declared on ``Neo4jBackend.declared_settings``)."""

from __future__ import annotations

from smriti import Setting

NEO4J_URI = Setting.url("NEO4J_URI", "bolt://localhost:7687", help="Bolt URI of the Neo4j server.")
NEO4J_USERNAME = Setting.text("NEO4J_USERNAME", "neo4j", help="Neo4j user.")
NEO4J_PASSWORD = Setting.text("NEO4J_PASSWORD", "", secret=True, help="Neo4j password.")
NEO4J_DATABASE = Setting.text(
    "NEO4J_DATABASE", "neo4j", help="Neo4j database (in `tenant` isolation)."
)
NEO4J_ISOLATION = Setting.choice(
    "NEO4J_ISOLATION",
    "tenant",
    ("tenant", "database"),
    help="`tenant`: a user property on every node; `database`: one database per user (Enterprise).",
)
SETTINGS = (NEO4J_URI, NEO4J_USERNAME, NEO4J_PASSWORD, NEO4J_DATABASE, NEO4J_ISOLATION)
