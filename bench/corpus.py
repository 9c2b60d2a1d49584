"""A deterministic synthetic memory corpus for the engine benchmark.

Memories are short first-person notes about people, places and activities drawn from
topic vocabularies, so cues are shared (names, places, topic words) and similar memories
cluster by topic, as in a real assistant's memory. ``records`` turns them into the bulk
import records the engine itself would write: embeddings from the given embedder, cues
from the heuristic extractor, EncodedBy links, CoOccurs counts and top-k AssociatedWith
edges within a topic.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from smriti.default_plugins.heuristic_extractor import HeuristicExtractor
from smriti.embedding import Embedder, SimilarityScale
from smriti.engine.store import clean_cues
from smriti.model import Association, CoOccurrence, Cue, Engram, Link, normalise_cue_name

FIRST = [
    "Alice",
    "Bruno",
    "Chen",
    "Dana",
    "Elif",
    "Farid",
    "Greta",
    "Hiro",
    "Ines",
    "Jonas",
    "Kavya",
    "Liam",
    "Mira",
    "Noah",
    "Olga",
    "Pavel",
    "Quinn",
    "Rosa",
    "Sami",
    "Tara",
    "Umar",
    "Vera",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zoe",
    "Amara",
    "Bilal",
    "Carmen",
    "Dmitri",
    "Esme",
    "Felix",
    "Gita",
    "Hugo",
    "Ivy",
    "Jamal",
    "Keiko",
    "Luca",
    "Maya",
    "Nils",
]
LAST = [
    "Novak",
    "Okafor",
    "Silva",
    "Tanaka",
    "Weber",
    "Kowalski",
    "Haddad",
    "Lindqvist",
    "Moreau",
    "Reyes",
]
PLACES = [
    "Riverside Cafe",
    "Central Library",
    "Harbor Market",
    "North Park",
    "City Museum",
    "Old Town Hall",
    "Lakeside Gym",
    "Sunset Beach",
    "Green Valley Farm",
    "Maple Street Clinic",
    "Union Station",
    "Hilltop School",
    "Eastside Theater",
    "Blue Door Bakery",
    "Westfield Mall",
    "Pine Ridge Trail",
    "Grand Hotel",
    "Airport Terminal",
    "Community Garden",
    "Jazz Club",
]
TOPICS: dict[str, list[str]] = {
    "cooking": [
        "pasta",
        "basil",
        "garlic",
        "risotto",
        "oven",
        "recipe",
        "dough",
        "tomato",
        "curry",
        "spices",
        "soup",
        "bread",
    ],
    "running": [
        "marathon",
        "sneakers",
        "pace",
        "interval",
        "hill",
        "sprint",
        "stretch",
        "trail",
        "tempo",
        "race",
    ],
    "music": [
        "guitar",
        "piano",
        "chord",
        "concert",
        "album",
        "melody",
        "drums",
        "violin",
        "rehearsal",
        "band",
    ],
    "work": [
        "deadline",
        "meeting",
        "project",
        "budget",
        "report",
        "client",
        "roadmap",
        "review",
        "launch",
        "hiring",
    ],
    "travel": [
        "flight",
        "passport",
        "luggage",
        "itinerary",
        "hostel",
        "museum",
        "train",
        "visa",
        "ferry",
        "map",
    ],
    "health": [
        "doctor",
        "vitamin",
        "allergy",
        "sleep",
        "therapy",
        "dentist",
        "checkup",
        "fever",
        "knee",
        "diet",
    ],
    "garden": [
        "tomatoes",
        "compost",
        "seeds",
        "roses",
        "shovel",
        "soil",
        "watering",
        "orchard",
        "tulips",
        "hedge",
    ],
    "reading": [
        "novel",
        "poetry",
        "chapter",
        "author",
        "library",
        "memoir",
        "thriller",
        "biography",
        "essay",
    ],
    "family": [
        "birthday",
        "wedding",
        "grandmother",
        "cousin",
        "anniversary",
        "nephew",
        "holiday",
        "reunion",
    ],
    "finance": [
        "savings",
        "mortgage",
        "taxes",
        "invoice",
        "pension",
        "stocks",
        "rent",
        "insurance",
        "loan",
        "bank",
    ],
    "pets": [
        "puppy",
        "kitten",
        "leash",
        "vet",
        "aquarium",
        "parrot",
        "grooming",
        "collar",
        "treats",
        "hamster",
    ],
    "coding": [
        "python",
        "compiler",
        "database",
        "refactor",
        "bug",
        "deploy",
        "server",
        "api",
        "tests",
        "docker",
    ],
    "art": [
        "painting",
        "canvas",
        "sketch",
        "sculpture",
        "gallery",
        "watercolor",
        "pottery",
        "exhibit",
    ],
    "sports": [
        "football",
        "tennis",
        "basketball",
        "swimming",
        "cycling",
        "yoga",
        "climbing",
        "skiing",
        "golf",
    ],
    "study": [
        "exam",
        "thesis",
        "lecture",
        "homework",
        "seminar",
        "grades",
        "tutor",
        "vocabulary",
        "quiz",
    ],
    "home": [
        "kitchen",
        "plumber",
        "furniture",
        "paint",
        "roof",
        "carpet",
        "heater",
        "curtains",
        "repair",
    ],
}
VERBS = [
    "talked about",
    "planned",
    "tried",
    "bought",
    "finished",
    "started",
    "discussed",
    "cancelled",
    "enjoyed",
    "fixed",
]
WHEN = [
    "on Monday",
    "on Friday",
    "last weekend",
    "this morning",
    "yesterday",
    "last month",
    "in spring",
    "at night",
]
#: Associations per memory (the engine's default top-k is 10; fewer keeps 100k loads quick).
ASSOCIATIONS_PER_MEMORY = 3
T_END = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(slots=True)
class Memory:
    """One synthetic memory and its topic."""

    text: str
    topic: str
    person: str


def person(rng: np.random.Generator) -> str:
    """A full name from a pool of 400."""
    return f"{FIRST[rng.integers(len(FIRST))]} {LAST[rng.integers(len(LAST))]}"


def memories(n: int, seed: int = 7) -> list[Memory]:
    """``n`` synthetic memories, the same for the same seed."""
    rng = np.random.default_rng(seed)
    names = list(TOPICS)
    out = []
    for i in range(n):
        topic = names[rng.integers(len(names))]
        words = rng.choice(TOPICS[topic], size=3, replace=False)
        who, other = person(rng), person(rng)
        place = PLACES[rng.integers(len(PLACES))]
        text = (
            f"{who} {VERBS[rng.integers(len(VERBS))]} the {words[0]} and the {words[1]} "
            f"at the {place} with {other} {WHEN[rng.integers(len(WHEN))]}. "
            f"Note {i}: {who} says the {words[2]} matters for {topic}."
        )
        out.append(Memory(text, topic, who))
    return out


def queries(n: int, seed: int = 11) -> list[str]:
    """``n`` recall queries in the corpus's vocabulary."""
    rng = np.random.default_rng(seed)
    names = list(TOPICS)
    out = []
    for _ in range(n):
        topic = names[rng.integers(len(names))]
        word = TOPICS[topic][rng.integers(len(TOPICS[topic]))]
        style = rng.integers(3)
        if style == 0:
            out.append(f"What did {person(rng)} say about the {word}?")
        elif style == 1:
            out.append(f"{word} at the {PLACES[rng.integers(len(PLACES))]}")
        else:
            out.append(f"Who talked about {topic} and {word} recently?")
    return out


@dataclass(slots=True)
class Records:
    """Bulk-import records for ``StorageBackend.import_records``."""

    engrams: list[Engram]
    cues: list[Cue]
    links: list[Link]
    associations: list[Association]
    cooccurrences: list[CoOccurrence]


def records(items: list[Memory], embedder: Embedder, seed: int = 3) -> Records:
    """Engrams, cues and edges as the engine would have written them."""
    rng = np.random.default_rng(seed)
    extractor = HeuristicExtractor()
    vectors = embedder.embed([m.text for m in items])
    cue_ids: dict[str, Cue] = {}
    links: list[Link] = []
    pairs: Counter[tuple[str, str]] = Counter()
    engrams: list[Engram] = []
    for i, (item, vec) in enumerate(zip(items, vectors, strict=True)):
        extraction = extractor.extract(item.text)
        refs = clean_cues(extraction.cues, [item.topic])
        ids = []
        for ref in refs:
            key = normalise_cue_name(ref.name)
            cue = cue_ids.setdefault(key, Cue(f"c{len(cue_ids):07d}", key, ref.cue_type))
            ids.append(cue.id)
        eid = f"m{i:07d}"
        links.extend(Link(eid, c) for c in ids)
        pairs.update(itertools.permutations(ids, 2))
        created = T_END - timedelta(hours=float(rng.uniform(0, 24 * 180)))
        accessed = created + timedelta(hours=float(rng.uniform(0, 24 * 30)))
        engrams.append(
            Engram(
                id=eid,
                content=item.text,
                summary=extraction.summary,
                memory_type=extraction.memory_type,
                importance=round(float(rng.uniform(0.2, 0.9)), 3),
                created_at=created,
                last_accessed_at=min(accessed, T_END),
                access_count=int(rng.integers(0, 6)),
                decay_factor=round(float(rng.uniform(0.5, 1.0)), 3),
                embedding=vec,
                tags=[item.topic],
            )
        )
    names = list(cue_ids)
    cue_vecs = embedder.embed(names)
    cues = [cue_ids[n] for n in names]
    for cue, vec in zip(cues, cue_vecs, strict=True):
        cue.embedding = vec
    co = [CoOccurrence(a, b, float(n)) for (a, b), n in pairs.items()]
    common = SimilarityScale(embedder.similarity_baseline).common
    return Records(engrams, cues, links, associations(items, vectors, rng, common), co)


def associations(
    items: list[Memory],
    vectors: np.ndarray,
    rng: np.random.Generator,
    common: Callable[[float], float] = float,
) -> list[Association]:
    """Each memory linked to its most similar among a sample of earlier same-topic ones,
    with the strength the engine would give it (``common``: its cosine on the engine's
    common scale, ``Engine.scale``)."""
    by_topic: dict[str, list[int]] = {}
    out: list[Association] = []
    for i, item in enumerate(items):
        earlier = by_topic.setdefault(item.topic, [])
        if earlier:
            picks = rng.integers(0, len(earlier), size=min(50, len(earlier)))
            sample = np.unique(np.asarray(earlier)[picks])
            sims = vectors[sample] @ vectors[i]
            for j in np.argsort(-sims)[:ASSOCIATIONS_PER_MEMORY]:
                target = int(sample[j])
                strength = max(common(float(sims[j])), 0.0)
                out.append(Association(f"m{i:07d}", f"m{target:07d}", strength))
        earlier.append(i)
    return out
