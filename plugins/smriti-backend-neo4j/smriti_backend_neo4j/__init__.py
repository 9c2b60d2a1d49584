"""Neo4j storage backend for Smriti (``DB_TYPE=neo4j``).

The backend class lives in :mod:`smriti_backend_neo4j.backend`; the entry-point module
:mod:`smriti_backend_neo4j.plugin` registers it. Nothing here imports the driver.
"""

__version__ = "0.1.0"
