"""An example third-party Smriti storage backend: one JSON file per user.

It shows what a backend distribution needs and nothing more: a ``StorageBackend``
subclass built from the options the engine passes (``from_options``), one setting of
its own (``smriti.Setting``), a ``doctor_probes`` hook and an entry point in the
``smriti`` group. It imports only ``smriti`` and ``smriti.backend``.
"""

from smriti_backend_example.backend import JsonFileBackend

__all__ = ["JsonFileBackend"]
