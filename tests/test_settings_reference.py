"""docs/settings.md is exactly what the declarations generate: the core settings and the
settings of every plugin the product (smriti-server) brings."""

from __future__ import annotations

from pathlib import Path

from smriti.doctor.settings_reference import product_settings, render

DOCS = Path(__file__).resolve().parent.parent / "docs" / "settings.md"
REGENERATE = "regenerate: python -m smriti.doctor.settings_reference > docs/settings.md"


def test_the_reference_is_generated_from_the_declarations() -> None:
    declared = product_settings()
    plugins = {p for names, _ in declared for p in names.split(", ")}
    # The workspace installs the product's plugins: each documents its own settings.
    assert {"smriti-backend-neo4j", "smriti-backup-s3", "smriti-embedder-local"} <= plugins
    assert "smriti-backend-example" not in plugins, "an example is not part of the product"
    assert DOCS.read_text(encoding="utf-8") == render(declared), REGENERATE
