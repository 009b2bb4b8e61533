"""Length-bucketed batching in echo_memory.libs.server.embed: same vectors, same order, less padding."""

from __future__ import annotations

import numpy as np

from echo_memory.libs.server.embed import MiniLM
from echo_memory.libs.server.embed.minilm import BUCKET_SPREAD, _buckets


def test_buckets_group_similar_lengths_and_cover_every_index() -> None:
    lengths = [24, 4, 8, 5, 25, 30, 4]
    batches = _buckets(lengths, batch_size=64)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        shortest = min(lengths[i] for i in batch)
        assert max(lengths[i] for i in batch) <= BUCKET_SPREAD * shortest + 1
    # the short names are one batch, the facts another: no name is padded to a fact's length
    assert {frozenset(b) for b in batches} == {frozenset({1, 3, 6}), frozenset({2}), frozenset({0, 4, 5})}


def test_buckets_respect_the_batch_size() -> None:
    batches = _buckets([7] * 10, batch_size=4)
    assert [len(b) for b in batches] == [4, 4, 2]


def test_mixed_lengths_embed_like_single_texts_in_input_order(embedder: MiniLM) -> None:
    texts = [
        "The payments service retries a failed capture three times before it gives up and pages on-call.",
        "Postgres",
        "Auth tokens expire after fifteen minutes.",
        "Redis",
    ]
    together = embedder.embed(texts)
    alone = np.stack([embedder.embed_one(t) for t in texts])
    assert together.shape == (4, 384)
    # int8 activations are quantised per batch, so vectors agree closely rather than bit for bit
    assert np.all(np.sum(together * alone, axis=1) > 0.999)
    # and each row belongs to its own text: no row matches another text better
    similarity = together @ alone.T
    assert list(similarity.argmax(axis=1)) == [0, 1, 2, 3]


async def test_embedding_across_cores_gives_the_same_vectors_in_order_and_leaves_the_loop_free(
    embedder: MiniLM,
) -> None:
    import asyncio

    from echo_memory.libs.server.embed import embed_across_cores

    texts = [f"Turn {i}: the deploy of service {i % 7} waited on migration {i} before it went out." for i in range(200)]
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        parallel = await embed_across_cores(embedder, texts, batch_size=32, threads=3)
    finally:
        ticker.cancel()
    assert parallel.shape == (200, 384)
    np.testing.assert_allclose(parallel, embedder.embed(texts, batch_size=32), atol=1e-5)
    assert ticks >= 5  # the event loop kept running while the vectors were computed
    assert (await embed_across_cores(embedder, [])).shape == (0, 384)
    np.testing.assert_allclose((await embed_across_cores(embedder, texts[:3]))[2], embedder.embed_one(texts[2]),
                               atol=1e-5)
