"""``smriti doctor``: what is configured, where each setting came from, and what answers.

``diagnose()`` gathers the settings in effect (with their origin, secrets redacted) and
one ``Check`` per concern: settings, plugins, backend, store, embedder, cue extractor,
backup and every server the settings configure. It never opens the store, never
downloads a model, and turns every error into a ``fail`` line instead of raising.
"""

from smriti.doctor.checks import Check
from smriti.doctor.diagnose import Diagnosis, diagnose

__all__ = ["Check", "Diagnosis", "diagnose"]
