"""Size limits of the package, measured by benchmarks/code_size.py.

No function over 60 code lines, no module over 700 lines, median function at most 10 code
lines. Every function and module of the package is within the limits, and must stay so.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "code_size", Path(__file__).resolve().parents[1] / "benchmarks" / "code_size.py"
)
code_size = importlib.util.module_from_spec(_SPEC)
sys.modules["code_size"] = code_size  # dataclasses look their module up there
_SPEC.loader.exec_module(code_size)


def test_no_function_over_the_limit():
    over = {f.key: f.code_lines for f in code_size.functions() if f.code_lines > code_size.MAX_FUNCTION}
    assert not over, f"functions over {code_size.MAX_FUNCTION} code lines: {over}"


def test_no_module_over_the_limit():
    over = {m: n for m, n in code_size.module_lines().items() if n > code_size.MAX_MODULE}
    assert not over, f"modules over {code_size.MAX_MODULE} lines: {over}"


def test_median_function_length():
    sizes = [f.code_lines for f in code_size.functions()]
    assert statistics.median(sizes) <= code_size.MAX_MEDIAN


def test_the_counter_counts_code_not_docstrings_or_comments():
    source = '''
def f(a):
    """Doc
    string."""
    # a comment

    x = (a +
         1)
    return x
'''
    assert code_size._code_line_numbers(source) == {2, 7, 8, 9}
