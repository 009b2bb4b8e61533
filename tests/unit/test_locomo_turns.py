"""LoCoMo turns as imported: speaker, text, and the caption of a shared photo."""

from __future__ import annotations

import json
from pathlib import Path

from echo_memory.libs.local.eval import locomo


def _sample(turns: list[dict]) -> list[dict]:
    return [{
        "sample_id": "conv-x",
        "conversation": {"speaker_a": "Ann", "speaker_b": "Bo", "session_1": turns,
                         "session_1_date_time": "1:56 pm on 8 May, 2023"},
        "qa": [{"question": "What did Bo paint?", "answer": "a sunset", "evidence": ["D1:2"], "category": 4}],
    }]


def test_a_shared_photo_is_imported_with_its_caption_and_without_the_search_query(tmp_path: Path) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(_sample([
        {"speaker": "Ann", "dia_id": "D1:1", "text": "How was your weekend?"},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "Look what I made!", "img_url": ["http://x/1.jpg"],
         "blip_caption": "a photo of a painting of a sunset over a lake", "query": "painting sunrise"},
    ])))
    (conv,) = locomo.load(path)
    assert [t.content for t in conv.turns] == [
        "Ann: How was your weekend?",
        "Bo: Look what I made! [shares a photo of a painting of a sunset over a lake]",
    ]
    assert "sunrise" not in conv.turns[1].content
    assert conv.questions[0].evidence == ["D1:2"]
