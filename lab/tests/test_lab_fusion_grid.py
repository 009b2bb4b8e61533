"""`python -m lab fusion-grid`: captured pools re-fused under other weights.

The property that makes the grid worth trusting: re-fusing a captured pool with the service's
own weights gives exactly the ranking the running service returns for that question.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from echo_memory.libs.core.config.retrieval import FusionWeights, RetrievalSettings
from echo_memory.libs.testing import EchoStack
from echo_memory.services.retrieval.fusion import fuse
from lab import fusion_grid


def test_grid_spec_gives_every_combination_with_the_service_first() -> None:
    base = FusionWeights()
    grid = fusion_grid.parse_grid("neighbour=0.1,0.2; reply=0.5,0.6", base)
    assert grid[0] == base
    assert {(w.neighbour, w.reply) for w in grid[1:]} == {(0.1, 0.5), (0.1, 0.6), (0.2, 0.5), (0.2, 0.6)} - {
        (base.neighbour, base.reply)
    }
    assert all(w.episode_lexical == base.episode_lexical for w in grid)
    assert fusion_grid.parse_grid("", base) == [base]


@pytest.mark.parametrize(
    ("spec", "message"),
    [("neighbor=0.1", "unknown weight 'neighbor'"), ("reply=high", "not a list of numbers"), ("reply", "name=value")],
)
def test_a_bad_grid_spec_is_refused_with_the_reason(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fusion_grid.parse_grid(spec, FusionWeights())


@pytest.mark.datasets
async def test_the_service_row_reproduces_the_service(stack: EchoStack, datasets: Path) -> None:
    settings = RetrievalSettings()
    path = datasets / "locomo" / "locomo10.json"
    captured = await fusion_grid.capture(stack, path, conversations=1, questions=30, settings=settings)
    assert len(captured) == 30 and all(item.pool for item in captured)

    # The same questions on the same scope, asked of the running service over the bus.
    served: list[list[str]] = []
    for item in captured:
        result = await stack.admin_call(
            "retrieval", "query_memory", {"query": item.question, "scope": item.scope, "top_k": fusion_grid.K}
        )
        served.append([r["id"] for r in result["results"]])
    refused = [
        [c.id for c, _ in fuse(item.pool, settings.fusion, settings.channels)[: fusion_grid.K]] for item in captured
    ]
    assert refused == served

    grid = fusion_grid.parse_grid("reply=0 question_penalty=0", settings.fusion)
    rows = fusion_grid.run_grid(captured, grid, settings.channels)
    service = next(row for row in rows if row["service"])
    assert service["mrr"] == fusion_grid.score(captured, settings.fusion, settings.channels)["mrr"]
    other = next(row for row in rows if not row["service"])
    assert other["weights"] == {"reply": 0.0, "question_penalty": 0.0}
    assert other["mrr"] != service["mrr"]  # the re-fusion really uses the weights it is given
