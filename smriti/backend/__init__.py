"""The public package for storage backend authors.

A backend subclasses ``StorageBackend`` (``smriti.backend.contract``) and answers the
reads described in ``smriti.backend.reads``. What a backend needs besides comes from
here too: the records it stores (the ``smriti.model`` types), the errors it raises,
and the building blocks backends share on purpose:

- ``BackendOptions``: what the engine tells a backend it builds (``from_options``);
- ``VectorCache``: exact in-process cosine search over a growing matrix;
- ``WriteGate``: ordinary writes pass together, a whole-store rewrite alone;
- ``DeferredWrites``: persist access updates on a background thread;
- ``batched``, ``joined``, ``cosine_top_k``, ``top_k_scores``, ``unit``;
- the text analyzer (``smriti.backend.text``: ``index_terms``, ``tokenize``, ``STOPWORDS``);
- the private-file helpers (``private_dir``, ``open_private`` ...): files only their
  user can read; ``validate_user``: a user name's canonical form, safe in a path or a
  database name.

Backends, ``smriti.index`` and the built-in plugins import only ``smriti`` and
``smriti.backend`` (the import contracts in ``pyproject.toml`` enforce it).
"""

from typing import TYPE_CHECKING, Any

from smriti.backend.contract import EngramStats, StorageBackend, StoredMemory
from smriti.backend.deferred import DeferredWrites
from smriti.backend.gate import WriteGate
from smriti.backend.helpers import batched, cosine_top_k, joined, top_k_scores, unit
from smriti.backend.options import BackendOptions
from smriti.backend.reads import (
    CueMatch,
    Expand,
    Listing,
    ListKey,
    Neighbourhood,
    Seeds,
    Seek,
    list_key,
    listing_sorted,
)
from smriti.backend.text import (
    STOPWORDS,
    document_terms,
    index_terms,
    stem,
    terms,
    text_terms,
    tokenize,
)
from smriti.config import validate_user
from smriti.errors import BackendError, StorageFullError, StoreLockedError
from smriti.model import (
    Association,
    CoOccurrence,
    Cue,
    Engram,
    EngramUpdate,
    Link,
    as_vector,
    clamp01,
    normalise_cue_name,
    origin_matches,
    utcnow,
)
from smriti.private import PRIVATE_UMASK, copy_private, make_private, open_private, private_dir

if TYPE_CHECKING:
    from smriti.backend.vector_cache import VectorCache


def __getattr__(name: str) -> Any:
    # The vector cache loads simsimd and sets OpenMP's wait policy when imported: only
    # a process that uses it should pay for that.
    if name == "VectorCache":
        from smriti.backend.vector_cache import VectorCache

        return VectorCache
    raise AttributeError(f"module 'smriti.backend' has no attribute {name!r}")


__all__ = [
    "PRIVATE_UMASK",
    "STOPWORDS",
    "Association",
    "BackendError",
    "BackendOptions",
    "CoOccurrence",
    "Cue",
    "CueMatch",
    "DeferredWrites",
    "Engram",
    "EngramStats",
    "EngramUpdate",
    "Expand",
    "Link",
    "ListKey",
    "Listing",
    "Neighbourhood",
    "Seeds",
    "Seek",
    "StorageBackend",
    "StorageFullError",
    "StoreLockedError",
    "StoredMemory",
    "VectorCache",
    "WriteGate",
    "as_vector",
    "batched",
    "clamp01",
    "copy_private",
    "cosine_top_k",
    "document_terms",
    "index_terms",
    "joined",
    "list_key",
    "listing_sorted",
    "make_private",
    "normalise_cue_name",
    "open_private",
    "origin_matches",
    "private_dir",
    "stem",
    "terms",
    "text_terms",
    "tokenize",
    "top_k_scores",
    "unit",
    "utcnow",
    "validate_user",
]
