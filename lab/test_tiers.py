"""How many test functions each directory of tests/ runs on each tier (libs/testing/tiers.py).

    python -m lab.test_tiers [--markdown] [--list DIRECTORY] [ROOT]

Read from the source, without importing or collecting anything: a test function's tier is the most
expensive thing it reaches: the fixtures it requests (conftest.py and its own module, followed
through their own parameters) and the names its body and the helpers of its module it calls use.

- full stack: the `stack` fixture, `EchoStack(...)`, or a subprocess that runs `echo-memory up`
- broker: `routed(...)` or `routed_services(...)` (FastStream's in-memory broker)
- handler: the `handlers` fixture, `Handlers(...)` or `rolled_back(...)`
- other: anything else (pure functions, a database alone, a CLI subprocess, a browser)

A parametrized function counts once, as the test functions in the README do.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path

TIERS = ("handler", "broker", "full stack", "other")
# Names whose use puts a function on a tier, most expensive first.
MARKS: tuple[tuple[str, frozenset[str]], ...] = (
    ("full stack", frozenset({"stack", "EchoStack"})),
    ("broker", frozenset({"routed", "routed_services"})),
    ("handler", frozenset({"handlers", "Handlers", "rolled_back"})),
)


def _names(node: ast.AST) -> set[str]:
    """Every bare name and attribute name `node` uses (calls, references, fixture parameters).

    Type annotations are left out: a helper typed `Answers | EchoStack` starts nothing.
    """
    found: set[str] = set()
    todo = [node]
    while todo:
        sub = todo.pop()
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
        elif isinstance(sub, ast.arg):
            found.add(sub.arg)
        for field, value in ast.iter_fields(sub):
            if field in ("annotation", "returns"):
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    todo.append(child)
    return found


def _is_fixture(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for deco in func.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(target, ast.Attribute) and target.attr == "fixture":
            return True
        if isinstance(target, ast.Name) and target.id == "fixture":
            return True
    return False


def _params(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    return {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}


class Module:
    """One file's tests, fixtures and helpers: for each, the fixtures it requests and the names it uses."""

    def __init__(self, path: Path) -> None:
        self.path = path
        tree = ast.parse(path.read_text(), str(path))
        # name -> (fixture parameters, names used)
        self.tests: dict[str, tuple[set[str], set[str]]] = {}
        self.fixtures: dict[str, tuple[set[str], set[str]]] = {}
        self.helpers: dict[str, set[str]] = {}

        def visit(body: list[ast.stmt], in_test_class: bool) -> None:
            for node in body:
                if isinstance(node, ast.ClassDef):
                    if node.name.startswith("Test"):
                        visit(node.body, True)
                    else:
                        self.helpers[node.name] = _names(node)
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    entry = (_params(node), _names(node))
                    if _is_fixture(node):
                        self.fixtures[node.name] = entry
                    elif node.name.startswith("test"):
                        self.tests[f"{node.name}@{node.lineno}" if in_test_class else node.name] = entry
                    else:
                        self.helpers[node.name] = entry[1]

        visit(tree.body, False)


def _reach(params: set[str], names: set[str], fixtures: dict[str, tuple[set[str], set[str]]],
           helpers: dict[str, set[str]]) -> set[str]:
    """Every name a test reaches: fixtures through the parameters that request them, helpers of its
    module through the names that call them (a local variable named like a fixture requests nothing)."""
    seen = set(params) | set(names)
    todo_fixtures = list(params)
    todo_helpers = list(names)
    done_fixtures: set[str] = set()
    done_helpers: set[str] = set()
    while todo_fixtures or todo_helpers:
        if todo_fixtures:
            name = todo_fixtures.pop()
            if name in done_fixtures or name not in fixtures:
                continue
            done_fixtures.add(name)
            more_params, more_names = fixtures[name]
            seen |= more_params | more_names
            todo_fixtures.extend(more_params)
            todo_helpers.extend(more_names)
        else:
            name = todo_helpers.pop()
            if name in done_helpers or name not in helpers:
                continue
            done_helpers.add(name)
            seen |= helpers[name]
            todo_helpers.extend(helpers[name])
    return seen


def _uses_up(module: Path) -> bool:
    """A subprocess that starts the whole system (`echo-memory up`, tests/e2e)."""
    text = module.read_text()
    return '"up"' in text and "subprocess" in text


def tier_of(reached: set[str]) -> str:
    for tier, names in MARKS:
        if reached & names:
            return tier
    return "other"


def inventory(root: Path, listing: list[tuple[str, str, str]] | None = None) -> dict[str, Counter[str]]:
    """{directory under root: Counter of tiers}, for every test_*.py under root; each (directory,
    test, tier) is appended to `listing` when given."""
    root_conftest = root.parent / "conftest.py"
    table: dict[str, Counter[str]] = {}
    for path in sorted(root.rglob("test_*.py")):
        if "fixtures" in path.relative_to(root).parts:
            continue
        module = Module(path)
        confs = [Module(c) for c in (root_conftest, *_conftests(root, path)) if c.exists()]
        # The root conftest's `stack` and `handlers` are the tiers themselves: stop there, not at
        # the servers they start.
        fixtures: dict[str, tuple[set[str], set[str]]] = {}
        for conf in confs:
            fixtures.update(conf.fixtures)
        fixtures.update(module.fixtures)
        for name in ("stack", "handlers"):
            fixtures.pop(name, None)
        up = _uses_up(path)
        directory = path.relative_to(root).parts[0] if len(path.relative_to(root).parts) > 1 else "."
        counts = table.setdefault(directory, Counter())
        for name, (params, used) in module.tests.items():
            reached = _reach(params, used, fixtures, module.helpers)
            tier = tier_of(reached)
            if tier == "other" and up:
                tier = "full stack"
            counts[tier] += 1
            if listing is not None:
                listing.append((directory, f"{path.relative_to(root)}::{name.split('@')[0]}", tier))
    return table


def _conftests(root: Path, path: Path) -> list[Path]:
    out = []
    folder = path.parent
    while True:
        out.append(folder / "conftest.py")
        if folder == root:
            break
        folder = folder.parent
    return list(reversed(out))


def render(table: dict[str, Counter[str]], markdown: bool) -> str:
    total: Counter[str] = Counter()
    for counts in table.values():
        total.update(counts)
    rows = [(d, table[d]) for d in sorted(table)] + [("total", total)]
    head = ("directory", *TIERS, "all")
    lines = []
    if markdown:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for name, counts in rows:
            cells = [f"**{name}**" if name == "total" else name, *(str(counts[t]) for t in TIERS), str(sum(counts.values()))]
            lines.append("| " + " | ".join(cells) + " |")
    else:
        lines.append(f"{head[0]:<14}" + "".join(f"{h:>12}" for h in head[1:]))
        for name, counts in rows:
            lines.append(f"{name:<14}" + "".join(f"{counts[t]:>12}" for t in TIERS) + f"{sum(counts.values()):>12}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parents[1] / "tests"))
    parser.add_argument("--markdown", action="store_true", help="a Markdown table")
    parser.add_argument("--list", metavar="DIRECTORY", help="each test of DIRECTORY and its tier, instead of the table")
    args = parser.parse_args(argv)
    listing: list[tuple[str, str, str]] = []
    table = inventory(Path(args.root), listing)
    if args.list:
        for directory, test, tier in listing:
            if directory == args.list:
                print(f"{tier:<12} {test}")
    else:
        print(render(table, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
