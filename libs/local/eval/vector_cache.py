"""Vectors a benchmark load computed once, kept on disk so the same history loads again without the model.

The model is almost all of a large load's cost (a million facts: ~94 CPU-minutes), and a fact's
vector depends only on its text and the model. A file is named by a hash of the model's name and
every text in order, so it can only ever serve the very history that made it. It is written
beside its final name and renamed into place once complete, readable by its owner only.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from echo_memory.libs.server.embed import DIM


class VectorCache:
    """A directory of `<key>.npy` files, one (len(texts), DIM) float32 array per history."""

    def __init__(self, directory: Path, model: str) -> None:
        self.directory = directory
        self.model = model

    def path_for(self, texts: Sequence[str]) -> Path:
        digest = hashlib.sha256(self.model.encode())
        for text in texts:
            digest.update(b"\0" + text.encode())
        return self.directory / f"vectors-{len(texts)}-{digest.hexdigest()[:32]}.npy"

    def load(self, texts: Sequence[str]) -> np.ndarray | None:
        """The stored vectors of `texts` (memory-mapped), or None when none are stored.

        Raises ValueError for a file of the wrong shape or type: a damaged cache is never used.
        """
        path = self.path_for(texts)
        if not path.exists():
            return None
        vectors: np.ndarray = np.load(path, mmap_mode="r")
        if vectors.shape != (len(texts), DIM) or vectors.dtype != np.float32:
            raise ValueError(f"{path} holds {vectors.dtype} {vectors.shape}, not float32 ({len(texts)}, {DIM}); "
                             "delete it to compute the vectors again")
        return vectors

    def writer(self, texts: Sequence[str]) -> VectorWriter:
        """A file to fill chunk by chunk while the model computes, then `commit`."""
        self.directory.mkdir(parents=True, exist_ok=True)
        return VectorWriter(self.path_for(texts), len(texts))


class VectorWriter:
    def __init__(self, path: Path, count: int) -> None:
        self.path = path
        self._partial = path.with_suffix(".partial.npy")
        self._array = np.lib.format.open_memmap(self._partial, mode="w+", dtype=np.float32, shape=(count, DIM))
        os.chmod(self._partial, 0o600)
        self._filled = 0

    def put(self, start: int, vectors: np.ndarray) -> None:
        self._array[start:start + len(vectors)] = vectors
        self._filled += len(vectors)

    def commit(self) -> None:
        """Flush and move the file into place; raises RuntimeError when rows are missing."""
        if self._filled != len(self._array):
            raise RuntimeError(f"{self._filled} of {len(self._array)} vectors written; the cache file is not kept")
        self._array.flush()
        del self._array
        os.replace(self._partial, self.path)

    def discard(self) -> None:
        """Remove an unfinished file (a load that failed halfway)."""
        self._partial.unlink(missing_ok=True)
