"""The benchmark's vector cache: a file serves only the texts that made it, and a damaged or
unfinished one is never used."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from echo_memory.libs.local.eval.vector_cache import VectorCache
from echo_memory.libs.server.embed import DIM


def _vectors(count: int) -> np.ndarray:
    return np.random.default_rng(1).random((count, DIM), dtype=np.float32)


def test_vectors_written_in_chunks_come_back_for_the_same_texts_only(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "model@1")
    texts, vectors = ["a", "b", "c"], _vectors(3)
    assert cache.load(texts) is None
    writer = cache.writer(texts)
    writer.put(0, vectors[:2])
    writer.put(2, vectors[2:])
    writer.commit()
    loaded = cache.load(texts)
    assert loaded is not None and np.array_equal(loaded, vectors)
    assert cache.load(["a", "b", "d"]) is None and cache.load(["a", "b"]) is None
    assert cache.load(["ab", "c", ""]) is None  # texts are delimited, not run together
    assert VectorCache(tmp_path, "model@2").load(texts) is None  # other weights, other vectors


def test_an_unfinished_file_is_not_kept(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "model@1")
    writer = cache.writer(["a", "b"])
    writer.put(0, _vectors(1))
    with pytest.raises(RuntimeError, match="1 of 2 vectors written"):
        writer.commit()
    writer.discard()
    assert list(tmp_path.iterdir()) == [] and cache.load(["a", "b"]) is None


def test_a_file_of_the_wrong_shape_is_refused(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "model@1")
    np.save(cache.path_for(["a", "b"]), _vectors(3))
    with pytest.raises(ValueError, match=r"not float32 \(2, 384\); delete it"):
        cache.load(["a", "b"])
