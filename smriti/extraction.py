"""The cue-extractor contract: text in, summary, memory type and cues out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from smriti.model import Extraction

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.setting import Setting


class CueExtractor(ABC):
    """Base class of cue extractors; register subclasses with ``register_cue_extractors``.

    Selection works like embedders: ``SMRITI_CUE_EXTRACTOR`` or, when ``auto``, the
    highest-priority class whose ``from_settings`` returns an instance.
    """

    name: ClassVar[str]
    priority: ClassVar[int] = 0
    description: ClassVar[str] = ""
    #: The settings (environment variables) this component reads (``smriti.Setting``):
    #: validated at startup, listed by ``smriti doctor`` and the settings reference.
    declared_settings: ClassVar[tuple[Setting[Any], ...]] = ()

    @classmethod
    @abstractmethod
    def from_settings(cls, settings: Settings, *, explicit: bool = False) -> CueExtractor | None:
        """An instance, or None when settings do not configure this extractor."""

    @abstractmethod
    def extract(self, text: str, *, query: bool = False) -> Extraction:
        """Summarise and classify ``text`` and extract 3-10 cues from it.

        ``query`` is True for recall queries (the summary and type are then unused, and
        an extractor may return fewer cues). Cue names need not be normalised; the
        engine normalises and de-duplicates them. Raises ProviderError on failure; the
        engine then falls back to the heuristic extractor.
        """

    def close(self) -> None:  # noqa: B027 - optional hook for subclasses
        """Release clients."""
