"""The helper package stays readable: no module over 280 lines, no function
(nested functions and methods included) over 60 lines."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
MAX_MODULE_LINES = 280
MAX_FUNCTION_LINES = 60


def _modules():
    paths = sorted(SRC.rglob("*.py"))
    assert paths, f"no modules found under {SRC}"
    return paths


def test_no_module_over_280_lines():
    long = {p.relative_to(SRC).as_posix(): n for p in _modules()
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (path: lines): {long}"


def test_no_function_over_60_lines():
    long = []
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text(), filename=str(p))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1   # from `def` to its last line
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{p.relative_to(SRC).as_posix()}:{node.lineno} {node.name} ({n} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: " + "; ".join(long)


def test_verdict_code_stays_under_1000_lines():
    # the verdict machinery (tool/verdict.py, course/claims.py, each case's claims.py): few claims, small code
    paths = [SRC / "ddp_lessons/tool/verdict.py", SRC / "ddp_lessons/course/claims.py",
             *sorted((SRC / "ddp_lessons/cases").glob("*/claims.py"))]
    total = sum(len(p.read_text().splitlines()) for p in paths)
    assert total <= 1000, f"{total} lines of verdict code in {[p.name for p in paths]}"
