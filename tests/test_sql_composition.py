"""No SQL text is assembled at run time: values are bind parameters, identifiers go through psycopg.sql.

The scan parses every module of the product (services/, libs/, the operator) and looks inside every
function for SQL text built with an f-string, `%`, `+`, `.format` or `.replace`. Module-level
composition is allowed: it runs once at import, from code constants only, and names the result.
A function that only builds such constants at import time is listed in IMPORT_TIME_TEMPLATES, and
a second test checks that nothing calls it at run time.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
PRODUCT = (REPOSITORY / "services", REPOSITORY / "libs", REPOSITORY / "operator" / "echo_memory.operator")
_VERB = re.compile(r"\b(SELECT|INSERT INTO|UPDATE|DELETE FROM|WITH)\b")
_CLAUSE = re.compile(r"\b(FROM|INTO|SET|WHERE|VALUES|AS)\b")
# Functions that turn code constants into named SQL constants, called only at module level.
IMPORT_TIME_TEMPLATES = {
    ("services/retrieval/queries.py", "_bm25"),
    ("services/retrieval/queries.py", "_candidates"),
    ("services/retrieval/queries.py", "_table_rows"),
    ("services/retrieval/queries.py", "_hot_indexed"),
    ("services/retrieval/queries.py", "_hot_with_pending"),
    ("services/retrieval/queries.py", "_ts_rank"),
    ("services/retrieval/queries.py", "_query_terms"),
    ("services/retrieval/queries.py", "_facts_walk"),
    ("services/retrieval/queries.py", "_hot_walk"),
    ("services/retrieval/queries.py", "_graph_neighbourhood"),
    ("services/consolidation/queries.py", "_move_tiers"),
    ("services/consolidation/queries.py", "_copy_pending"),
}


def _looks_like_sql(text: str) -> bool:
    return bool(_VERB.search(text) and _CLAUSE.search(text))


def _modules() -> list[tuple[str, ast.Module]]:
    found = []
    for folder in PRODUCT:
        for path in sorted(folder.rglob("*.py")):
            found.append((path.relative_to(REPOSITORY).as_posix(), ast.parse(path.read_text(encoding="utf-8"))))
    return found


def _module_sql_names(tree: ast.Module) -> set[str]:
    """Module-level names bound to SQL text (literal or composed at import), not to psycopg.sql objects."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            composable = isinstance(node.value, ast.Call) and ast.unparse(node.value.func).startswith(("sql.", "SQL"))
            if _looks_like_sql(ast.unparse(node.value)) and not composable:
                names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _is_sql_text(node: ast.AST, sql_names: set[str]) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _looks_like_sql(node.value)
    if isinstance(node, ast.JoinedStr):
        return _looks_like_sql("".join(v.value for v in node.values if isinstance(v, ast.Constant)))
    return isinstance(node, ast.Name) and node.id in sql_names


def _built_at_run_time(function: ast.AST, sql_names: set[str]) -> list[int]:
    """Lines inside `function` that assemble SQL text."""
    lines = []
    for node in ast.walk(function):
        if isinstance(node, ast.JoinedStr) and _is_sql_text(node, sql_names):
            lines.append(node.lineno)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
            if _is_sql_text(node.left, sql_names) or _is_sql_text(node.right, sql_names):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("format", "replace") and _is_sql_text(node.func.value, sql_names)
        ):
            lines.append(node.lineno)
    return lines


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def test_no_function_assembles_sql_text() -> None:
    modules = _modules()
    assert len(modules) > 100  # the scan saw the whole product, so an empty result means something
    offenders = []
    for path, tree in modules:
        sql_names = _module_sql_names(tree)
        for function in _functions(tree):
            if (path, function.name) in IMPORT_TIME_TEMPLATES:
                continue
            offenders += [f"{path}:{line} in {function.name}()" for line in _built_at_run_time(function, sql_names)]
    assert offenders == [], "build SQL with psycopg.sql (identifiers) and bind parameters (values)"


def test_the_scan_sees_run_time_composition() -> None:
    tree = ast.parse(
        "T = 'SELECT * FROM {t}'\n"
        "def a(t): return T.format(t=t)\n"
        "def b(v): return f'SELECT * FROM facts WHERE id = {v}'\n"
        "def c(v): return 'DELETE FROM facts WHERE id = ' + v\n"
        "def d(t): return sql.SQL('SELECT * FROM {}').format(sql.Identifier(t))\n"
        "Q = sql.SQL('SELECT * FROM {t}')\n"
        "def e(t): return Q.format(t=sql.Identifier(t))\n"
    )
    names = _module_sql_names(tree)
    found = {f.name: bool(_built_at_run_time(f, names)) for f in _functions(tree)}
    assert found == {"a": True, "b": True, "c": True, "d": False, "e": False}


def test_import_time_templates_are_called_only_at_import() -> None:
    trees = dict(_modules())
    for path, name in IMPORT_TIME_TEMPLATES:
        tree = trees[path]
        assert any(f.name == name for f in _functions(tree)), f"{path}:{name} is gone: drop it from the list"
        for function in _functions(tree):
            calls = [n for n in ast.walk(function) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
            callers = [c for c in calls if c.func.id == name]  # type: ignore[attr-defined]
            if function.name not in {n for p, n in IMPORT_TIME_TEMPLATES if p == path}:
                assert callers == [], f"{function.name}() calls the template {name}() at run time"
