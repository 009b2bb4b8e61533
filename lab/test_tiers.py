"""How many test functions each directory of tests/ runs on each tier (libs/testing/tiers.py).

    python -m lab.test_tiers [--markdown] [ROOT]

Read from the source, without importing or collecting anything: a test function's tier is the most
expensive thing it reaches, through the fixtures it requests (conftest.py and its own module,
followed transitively by name) and the names its body and its module's helpers use.

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


class Module:
    """One file's top-level functions and classes, each with the names it uses."""

    def __init__(self, path: Path) -> None:
        self.path = path
        tree = ast.parse(path.read_text(), str(path))
        self.tests: dict[str, set[str]] = {}
        self.fixtures: dict[str, set[str]] = {}
        self.helpers: dict[str, set[str]] = {}

        def visit(body: list[ast.stmt], in_test_class: bool) -> None:
            for node in body:
                if isinstance(node, ast.ClassDef):
                    is_test_class = node.name.startswith("Test")
                    if is_test_class:
                        visit(node.body, True)
                    else:
                        self.helpers[node.name] = _names(node)
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    used = _names(node)
                    if _is_fixture(node):
                        self.fixtures[node.name] = used
                    elif node.name.startswith("test") and (in_test_class or node.col_offset == 0):
                        key = node.name if not in_test_class else f"{node.name}@{node.lineno}"
                        self.tests[key] = used
                    else:
                        self.helpers[node.name] = used

        visit(tree.body, False)


def _closure(start: set[str], graphs: list[dict[str, set[str]]]) -> set[str]:
    """`start` and every name reached by following fixtures and helpers by name."""
    seen = set(start)
    todo = list(start)
    while todo:
        name = todo.pop()
        for graph in graphs:
            for more in graph.get(name, ()):
                if more not in seen:
                    seen.add(more)
                    todo.append(more)
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


def inventory(root: Path) -> dict[str, Counter[str]]:
    """{directory under root: Counter of tiers}, for every test_*.py under root."""
    root_conftest = root.parent / "conftest.py"
    table: dict[str, Counter[str]] = {}
    for path in sorted(root.rglob("test_*.py")):
        if "fixtures" in path.relative_to(root).parts:
            continue
        module = Module(path)
        confs = [Module(c) for c in (root_conftest, *_conftests(root, path)) if c.exists()]
        # The root conftest's `stack` and `handlers` are the tiers themselves: stop there, not at
        # the servers they start.
        fixtures: dict[str, set[str]] = {}
        for conf in confs:
            fixtures.update(conf.fixtures)
        fixtures.update(module.fixtures)
        for name in ("stack", "handlers"):
            fixtures.pop(name, None)
        up = _uses_up(path)
        directory = path.relative_to(root).parts[0] if len(path.relative_to(root).parts) > 1 else "."
        counts = table.setdefault(directory, Counter())
        for used in module.tests.values():
            reached = _closure(used, [fixtures, module.helpers])
            tier = tier_of(reached)
            if tier == "other" and up:
                tier = "full stack"
            counts[tier] += 1
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
    args = parser.parse_args(argv)
    print(render(inventory(Path(args.root)), args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
