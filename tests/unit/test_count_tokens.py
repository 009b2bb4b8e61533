"""count_tokens: what max_tokens budgets and tokens-per-recall figures count, in every script."""

from __future__ import annotations

from echo_memory.libs.server.embed import count_tokens


def test_english_counts_words_and_punctuation() -> None:
    # 7 units: Hello , world ! snake_case and x86_64
    assert count_tokens("Hello, world! snake_case and x86_64") == round(7 * 1.3)


def test_each_cjk_character_counts_as_a_unit() -> None:
    # 16 Han characters and a full stop. Taken as one word per clause, this sentence counted 3.
    assert count_tokens("数据库技术大会的门票价格是八百元。") == round(17 * 1.3)
    # Kana as well as Han: 11 characters, no spaces.
    assert count_tokens("東京タワーに行きました") == round(11 * 1.3)
    # Hangul syllables one by one, beside a Latin word and digits kept whole.
    assert count_tokens("안녕 Postgres 16") == round(4 * 1.3)


def test_mixed_text_keeps_latin_words_whole_beside_cjk() -> None:
    assert count_tokens("Postgres 16的索引") == round(5 * 1.3)


def test_a_longer_text_never_counts_fewer_tokens() -> None:
    text = ""
    last = count_tokens(text)
    for piece in ["我", "的", "同事", " Wang", "喜欢", "喝", "乌龙茶", "。"]:
        text += piece
        assert count_tokens(text) >= last
        last = count_tokens(text)
    assert count_tokens("") == 1
