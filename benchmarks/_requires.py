"""Check, before any work, that a benchmark's optional packages are installed."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping


def missing(modules: Mapping[str, str]) -> list[str]:
    """The distribution names (values) of the modules (keys) that cannot be imported."""
    out = []
    for module, dist in modules.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(dist)
    return out


def require(script: str, modules: Mapping[str, str], extra: str = "bench", hint: str = "") -> None:
    """Exit with status 2 and a one-line message naming the extra when modules are missing."""
    absent = missing(modules)
    if absent:
        print(
            f"{script}: needs {', '.join(absent)}, which {'is' if len(absent) == 1 else 'are'} "
            f"not installed: pip install -e \".[{extra}]\"{hint}",
            file=sys.stderr,
        )
        raise SystemExit(2)
