"""Every command health advises is one the real parser accepts as written.

The checks are scored from figures alone, so every weak branch is reached with figures built here;
each `echo-memory ...` the actions name is parsed by the CLI's own parser (placeholders such as
`<client>` filled with a real value first).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from echo_memory.libs.core.contracts.health import (
    CalibrationState,
    ConsolidationState,
    EmbeddingState,
    HealthFigures,
    LexicalState,
)
from echo_memory.libs.local.cli.main import build_parser
from echo_memory.services.audit.health import score_checks

PLACEHOLDERS = {"<client>": "claude-code", "<agent>": "my-agent"}
COMMAND = re.compile(r"echo-memory [^`;)]+")


def figures(**changes: object) -> HealthFigures:
    """A store where every check is weak."""
    base: dict[str, object] = dict(
        scopes=["shared", "solo:alice"], window_days=7, facts=10, active_facts=8, bulk_facts=10, bulk_share=1.0,
        imported_episodes=3, last_real_write=None, last_write=None, hours_since_real_write=None, writers=[],
        agents_wired=[], agents_never_writing=[], reads=1, reads_per_day=0.1, reads_with_results=0,
        read_hit_share=0.0, recall_tokens_mean=900.0, full_dump_tokens=1000, recall_share_of_dump=0.9, saves=0,
        saves_per_read=0.0, deferred_waiting=2,
        lexical_stale=[LexicalState(scope="shared", corpus="facts", rows=3, stats_rows=None, format_version=None,
                                    reason="no statistics")],
        embedding_mismatch=[EmbeddingState(scope="solo:alice", model="other-model")],
        code_embedding_model="all-MiniLM-L6-v2", schema_version=11, code_schema_version=12,
        calibration=CalibrationState(ran=False),
        consolidation=ConsolidationState(failures=1, last_failure_at=datetime(2026, 1, 2, tzinfo=UTC),
                                         last_failure="internal: the run failed"),
    )
    base.update(changes)
    return HealthFigures.model_validate(base)


VARIANTS = {
    "nothing written": figures(),
    "writes stopped": figures(hours_since_real_write=500.0, agents_wired=["alice", "bob"],
                              agents_never_writing=["bob"]),
}


def advised_commands(f: HealthFigures) -> list[str]:
    actions = [c.action for c in score_checks(f) if c.action]
    return [m.group(0).strip() for action in actions for m in COMMAND.finditer(action)]


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_advised_command_parses(name: str) -> None:
    commands = advised_commands(VARIANTS[name])
    assert len(commands) >= 5, commands  # the walk reached the weak branches
    parser = build_parser()
    for command in commands:
        words = command.split()[1:]
        words = [PLACEHOLDERS.get(w, w) for w in words]
        assert not [w for w in words if w.startswith("<")], f"unknown placeholder in {command!r}"
        try:
            parser.parse_args(words)
        except SystemExit:
            pytest.fail(f"health advises `{command}`, which the CLI refuses")
