"""The static embedding backend (docs/design.md §3): a model2vec-style table of token vectors distilled
from the packaged transformer on this machine, with no download and no training data.

Distillation (once per model, cached by `model_cache`):
1. every vocabulary token `t` is run alone through the transformer as `[CLS] t [SEP]` and pooled as
   the sentence model pools (its mean), giving one vector per token;
2. the vectors are centred and projected on their first `dims` principal components (PCA);
3. each token vector is weighted by `a / (a + p(t))`, `p` a Zipf estimate of the token's frequency
   from its rank in the vocabulary (`a = 1e-4`): frequent tokens count less (SIF weighting).

Inference: the text's word pieces (the model's own tokenizer, no special tokens, at most
`max_seq_length` of them) are looked up and averaged; callers L2-normalize. Word pieces of each
distinct lower-cased word are cached, so the tokenizer runs once per word, not once per text: the
per-text work is a regular-expression split and a sparse matrix product.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from itertools import chain, islice
from pathlib import Path
from typing import Any

import numpy as np

from forecast_env.errors import ConfigError
from forecast_env.retrieval.model_cache import artifact_dir, build_once, read_meta

#: Bump when the distillation recipe changes, so cached models are rebuilt.
DISTILL_VERSION = 1
DEFAULT_DIMS = 256
SIF_A = 1e-4
#: Words as BERT's pre-tokenizer sees them: runs of word characters, or one other non-space character.
WORD = re.compile(r"\w+|[^\w\s]")
WORD_CACHE_MAX = 500_000


def static_dir(model_name: str, model_dir: Path, dims: int) -> Path:
    return artifact_dir("static", model_name, model_dir, {"dims": dims, "sif": SIF_A, "version": DISTILL_VERSION})


def distill_static(model_name: str, model_dir: Path, dims: int = DEFAULT_DIMS, rebuild: bool = False,
                   progress: bool = False) -> Path:
    """Distil (once) and return the cache folder holding `vectors.npy` and `tokenizer.json`."""
    folder = static_dir(model_name, model_dir, dims)
    return build_once(folder, lambda tmp: _distill(model_dir, tmp, dims, progress), rebuild)


def _distill(model_dir: Path, out: Path, dims: int, progress: bool) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError(f"{model_dir}: the static backend needs a fast tokenizer (tokenizer.json)")
    model = AutoModel.from_pretrained(model_dir).eval()
    vocab = len(tokenizer)
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    if cls_id is None or sep_id is None:
        cls_id = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else 0
        sep_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
    from tqdm.auto import tqdm

    vectors = np.zeros((vocab, model.config.hidden_size), dtype=np.float32)
    batch = 1024
    with torch.inference_mode():
        for start in tqdm(range(0, vocab, batch), desc="distil static vectors", unit="batch", disable=not progress):
            ids = torch.arange(start, min(start + batch, vocab), dtype=torch.long)
            inp = torch.stack([torch.full_like(ids, cls_id), ids, torch.full_like(ids, sep_id)], dim=1)
            h = model(input_ids=inp, attention_mask=torch.ones_like(inp)).last_hidden_state
            vectors[start:start + len(ids)] = h.mean(1).numpy()
    dims = min(int(dims), vectors.shape[1])
    centred = vectors - vectors.mean(0, keepdims=True)
    # principal axes from the covariance (d x d): cheap and deterministic up to sign; fix the sign
    _, eigvecs = np.linalg.eigh(np.cov(centred, rowvar=False).astype(np.float64))
    axes = eigvecs[:, ::-1][:, :dims]
    axes *= np.sign(axes[np.argmax(np.abs(axes), axis=0), np.arange(dims)])
    reduced = (centred @ axes).astype(np.float32)
    rank = np.arange(1, vocab + 1, dtype=np.float64)
    proba = (1.0 / (rank + 1)) / np.sum(1.0 / (rank + 1))
    reduced *= (SIF_A / (SIF_A + proba)).astype(np.float32)[:, None]
    np.save(out / "vectors.npy", reduced)
    tokenizer.backend_tokenizer.save(str(out / "tokenizer.json"))
    meta = {"dims": dims, "vocab": vocab, "sif": SIF_A, "source_dim": int(vectors.shape[1]),
            "vectors_bytes": (out / "vectors.npy").stat().st_size}
    (out / "meta.json").write_text(json.dumps(meta, indent=1))


class StaticEncoder:
    """Mean of distilled token vectors per text (not yet normalized), in input order."""

    def __init__(self, model_name: str, model_dir: Path, max_seq_length: int = 256, dims: int = DEFAULT_DIMS):
        self.max_tokens = int(max_seq_length)
        self.folder = distill_static(model_name, model_dir, dims)
        try:
            self._open()
        except (ConfigError, OSError, ValueError) as exc:
            self.folder = distill_static(model_name, model_dir, dims, rebuild=True)
            try:
                self._open()
            except (ConfigError, OSError, ValueError) as exc2:
                raise ConfigError(
                    f"embed.backend = 'static': cannot load the distilled model at {self.folder} even after "
                    f"rebuilding it ({type(exc2).__name__}: {exc2}); delete that folder or set embed.backend: onnx"
                ) from exc

    def _open(self) -> None:
        from tokenizers import Tokenizer

        meta = read_meta(self.folder)
        path = self.folder / "vectors.npy"
        if meta is None or not path.exists() or path.stat().st_size != meta.get("vectors_bytes"):
            raise ConfigError(f"{self.folder}: incomplete static model")
        self.vectors = np.load(path)
        self.dim = int(self.vectors.shape[1])
        self.tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self._pieces: dict[str, tuple[int, ...]] = {}

    def token_ids(self, text: str) -> list[int]:
        """The text's word-piece ids (at most `max_seq_length`), as the model's tokenizer gives them."""
        # a word piece is rarely longer than 12 characters: cutting first saves splitting long bodies
        words = WORD.findall(text[: self.max_tokens * 12].lower())
        # threads may share this encoder: the cache only grows, and a full cache is replaced by a new
        # dict (never cleared in place), so a lookup never loses a word another thread has just added
        pieces = self._pieces
        try:
            return list(islice(chain.from_iterable(map(pieces.__getitem__, words)), self.max_tokens))
        except KeyError:
            pass
        local = {w: pieces[w] for w in set(words) if w in pieces}
        missing = sorted(w for w in set(words) if w not in local)
        for w, e in zip(missing, self.tokenizer.encode_batch(missing, add_special_tokens=False)):
            local[w] = tuple(e.ids)
        if len(pieces) + len(missing) > WORD_CACHE_MAX:
            pieces = self._pieces = {}
        pieces.update((w, local[w]) for w in missing)
        return list(islice(chain.from_iterable(map(local.__getitem__, words)), self.max_tokens))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One mean token vector per text (zeros for a text without tokens)."""
        from scipy.sparse import csr_matrix

        ids = [self.token_ids(t) for t in texts]
        if len(ids) <= 16:  # queries: a gather beats building a sparse matrix
            out = np.zeros((len(ids), self.dim), dtype=np.float32)
            for i, row in enumerate(ids):
                if row:
                    out[i] = self.vectors[row].mean(0)
            return out
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        indptr = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        cols = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(indptr[-1]))
        counts = csr_matrix((np.ones(len(cols), np.float32), cols, indptr), shape=(len(ids), len(self.vectors)))
        sums = np.asarray(counts @ self.vectors, dtype=np.float32)
        return sums / np.maximum(lengths, 1)[:, None].astype(np.float32)

    def info(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "dim": self.dim}
