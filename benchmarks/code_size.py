"""Function and module sizes of the package, in code lines.

A *code line* is a line of a function's or module's source that holds code: blank lines,
comment-only lines and docstrings do not count. Run from the repository root::

    python benchmarks/code_size.py            # summary and every function over the limit
    python benchmarks/code_size.py --all      # every function, longest first

The limits are checked by ``tests/test_code_size.py``: no function over
:data:`MAX_FUNCTION` code lines, no module over :data:`MAX_MODULE` lines, and a median
function length of at most :data:`MAX_MEDIAN` code lines.
"""

from __future__ import annotations

import argparse
import ast
import io
import statistics
import tokenize
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "geogpvae"
MAX_FUNCTION = 60
MAX_MODULE = 700
MAX_MEDIAN = 10


@dataclass(frozen=True)
class Function:
    """One function or method: ``module:Qual.name`` and its size in code lines."""

    module: str
    name: str
    code_lines: int

    @property
    def key(self) -> str:
        return f"{self.module}:{self.name}"


def _code_line_numbers(source: str) -> set[int]:
    """Line numbers (1-based) that hold a token other than a comment, a newline or a docstring."""
    tree = ast.parse(source)
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(
                getattr(body[0], "value", None), ast.Constant
            ) and isinstance(body[0].value.value, str):
                docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER, tokenize.ENCODING}
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in skip:
            continue
        lines.update(n for n in range(tok.start[0], tok.end[0] + 1) if n not in docstrings)
    return lines


def functions(package: Path = PACKAGE) -> list[Function]:
    """Every function and method of the package with its code-line count."""
    found: list[Function] = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text()
        module = path.relative_to(package.parent).as_posix()
        _visit(ast.parse(source), "", module, _code_line_numbers(source), found)
    return found


def _visit(node: ast.AST, prefix: str, module: str, code: set[int], found: list[Function]) -> None:
    """Append the functions under ``node``; a nested function's lines count for it alone."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + child.name
            first = min([d.lineno for d in child.decorator_list] + [child.lineno])
            inner = {
                n
                for sub in ast.walk(child)
                if sub is not child and isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef))
                for n in range(sub.lineno, sub.end_lineno + 1)
            }
            count = sum(1 for n in range(first, child.end_lineno + 1) if n in code and n not in inner)
            found.append(Function(module, name, count))
            _visit(child, name + ".", module, code, found)
        elif isinstance(child, ast.ClassDef):
            _visit(child, prefix + child.name + ".", module, code, found)


def module_lines(package: Path = PACKAGE) -> dict[str, int]:
    """Physical lines of every module."""
    return {
        p.relative_to(package.parent).as_posix(): len(p.read_text().splitlines())
        for p in sorted(package.rglob("*.py"))
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="list every function")
    args = parser.parse_args()
    funcs = functions()
    sizes = sorted(f.code_lines for f in funcs)
    mods = module_lines()
    print(f"{len(funcs)} functions in {len(mods)} modules")
    print(f"code lines per function: median {statistics.median(sizes)}, "
          f"p90 {sizes[int(0.9 * (len(sizes) - 1))]}, max {sizes[-1]}")
    print(f"over {MAX_FUNCTION} code lines: {sum(s > MAX_FUNCTION for s in sizes)}; "
          f"over 50: {sum(s > 50 for s in sizes)}; over 100: {sum(s > 100 for s in sizes)}")
    print(f"longest module: {max(mods.values())} lines (limit {MAX_MODULE})")
    shown = funcs if args.all else [f for f in funcs if f.code_lines > MAX_FUNCTION]
    for f in sorted(shown, key=lambda f: -f.code_lines):
        print(f"  {f.code_lines:5d}  {f.key}")
    for m, n in sorted(mods.items(), key=lambda kv: -kv[1]):
        if n > MAX_MODULE:
            print(f"  module {m}: {n} lines")


if __name__ == "__main__":
    main()
