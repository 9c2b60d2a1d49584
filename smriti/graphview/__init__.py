"""Pictures of a memory graph: ``smriti graph`` and ``smriti clusters``.

The store's owner (or the process that opened the store) selects the subgraph
(``select``) and names clusters (``labels``): JSON-ready dicts, cheap to compute. The
CLI process lays it out (``layout``, igraph) and draws it (``html``, ``svg``,
``graphml``), so the owner is never busy drawing.
"""

#: Memories drawn when no ``--limit`` is given: enough to show a store's shape, few
#: enough that a 100k-memory store still gives a readable page of a few hundred KB.
DEFAULT_LIMIT = 500
