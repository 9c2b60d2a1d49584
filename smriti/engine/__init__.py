"""The memory engine: store, recall, consolidate (pipelines in sibling modules)."""

from smriti.engine.consolidate import ConsolidationReport
from smriti.engine.core import Engine
from smriti.engine.store import StoreOutcome

__all__ = ["ConsolidationReport", "Engine", "StoreOutcome"]
