"""`python -m lab.test_tiers`: each test function counted once, on the most expensive tier it reaches."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.test_tiers import inventory, main

ROOT_CONFTEST = '''
import pytest

@pytest.fixture
async def stack(database_url): ...

@pytest.fixture
async def handlers(tier_database_url): ...
'''

CONFTEST = '''
import pytest

@pytest.fixture
async def bus(stack): ...

@pytest.fixture
async def routes(database_url):
    async with routed_services(...) as running:
        yield running
'''

TESTS = '''
import pytest

def build(answers: Handlers | EchoStack) -> None: ...

async def start_the_system():
    return EchoStack(...)

async def test_through_a_fixture(bus): ...

async def test_on_handlers(handlers):
    build(handlers)

async def test_a_local_named_like_a_fixture(handlers):
    bus = Bus(handlers)

async def test_on_routes(routes): ...

async def test_through_a_helper():
    await start_the_system()

@pytest.mark.parametrize("n", [1, 2, 3])
def test_pure(n): ...

class TestGrouped:
    def test_one(self, handlers): ...
'''


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    (tmp_path / "conftest.py").write_text(ROOT_CONFTEST)
    tests = tmp_path / "tests"
    (tests / "writes").mkdir(parents=True)
    (tests / "writes" / "conftest.py").write_text(CONFTEST)
    (tests / "writes" / "test_sample.py").write_text(TESTS)
    return tests


def test_each_function_counts_once_on_the_tier_it_reaches(suite: Path) -> None:
    listing: list[tuple[str, str, str]] = []
    table = inventory(suite, listing)
    tiers = {test.split("::")[1]: tier for _, test, tier in listing}
    assert tiers == {
        "test_through_a_fixture": "full stack",  # bus requests stack
        "test_on_handlers": "handler",  # an annotation naming EchoStack starts nothing
        "test_a_local_named_like_a_fixture": "handler",
        "test_on_routes": "broker",
        "test_through_a_helper": "full stack",
        "test_pure": "other",
        "test_one": "handler",
    }
    assert dict(table["writes"]) == {"full stack": 2, "handler": 3, "broker": 1, "other": 1}


def test_the_table_and_the_listing_print(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(suite), "--markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| directory | handler | broker | full stack | other | all |"
    assert "| writes | 3 | 1 | 2 | 1 | 7 |" in lines and lines[-1] == "| **total** | 3 | 1 | 2 | 1 | 7 |"
    assert main([str(suite), "--list", "writes"]) == 0
    assert "broker       writes/test_sample.py::test_on_routes" in capsys.readouterr().out
