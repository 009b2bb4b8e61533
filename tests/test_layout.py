"""Guards on the test tree and on the line between the product and the lab."""

import ast
import tomllib
from collections import Counter
from fnmatch import fnmatchcase
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
PRODUCT = ("libs", "services", "operator")


def test_test_modules_have_unique_basenames() -> None:
    # pytest's default (prepend) import mode imports test modules by basename; a duplicate breaks
    # collection of the whole suite, which runs tests/ and lab/tests/ together.
    files = [*(REPOSITORY / "tests").rglob("test_*.py"), *(REPOSITORY / "lab" / "tests").rglob("test_*.py")]
    names = Counter(p.name for p in files)
    assert [n for n, c in names.items() if c > 1] == []


def test_the_product_never_imports_the_lab() -> None:
    offenders = []
    for folder in PRODUCT:
        for path in (REPOSITORY / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                offenders += [f"{path.relative_to(REPOSITORY)}: {n}" for n in names if n.split(".")[0] == "lab"]
    assert offenders == []


def test_the_wheel_leaves_the_lab_out() -> None:
    # setuptools' packages.find keeps a dotted package name that matches an include pattern and
    # no exclude pattern (fnmatch); the same rule, on every top-level package the `where` folders hold.
    found = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]

    def shipped(name: str) -> bool:
        return any(fnmatchcase(name, p) for p in found["include"]) and not any(
            fnmatchcase(name, p) for p in found.get("exclude", ()))

    tops = {p.parent.name for where in found["where"] for p in (REPOSITORY / where).glob("*/__init__.py")}
    assert {"lab", "libs", "services", "echo_memory"} <= tops
    assert not shipped("lab") and not shipped("lab.tests")
    # The design's folders ship only through the one package that links to them.
    assert not shipped("libs") and not shipped("services")
    assert shipped("echo_memory.libs.local.eval") and shipped("echo_memory.services.retrieval")
    assert shipped("echo_memory.operator")
