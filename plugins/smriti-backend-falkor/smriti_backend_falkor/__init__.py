"""FalkorDB storage backend for Smriti (``DB_TYPE=falkordb``).

The backend class lives in :mod:`smriti_backend_falkor.backend`; the entry-point module
:mod:`smriti_backend_falkor.plugin` stays light so ``smriti --help`` does not import the
FalkorDB client.
"""

__all__: list[str] = []
