"""The layering the package promises: which layer may import what.

* ``import geogpvae`` imports neither torch nor matplotlib (they come with first use);
* the engine and gp layers never import xarray, the fields layer never imports torch,
  errors.py imports nothing of the package;
checked twice: by importing each layer in a fresh interpreter (with the top-level package
stubbed, so that only the layer's own imports count), and statically over every import
statement of the layer's modules.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "geogpvae"

#: layer folder (or module) -> top-level modules it must never import, anywhere in its code
FORBIDDEN = {
    "engine": {"xarray", "matplotlib", "cartopy", "netCDF4", "h5netcdf"},
    "gp": {"xarray", "matplotlib", "cartopy", "netCDF4", "h5netcdf"},
    "fields": {"matplotlib", "cartopy"},
    "errors.py": None,  # nothing at all beyond the standard library
}
#: layer -> parts of geogpvae it must never import
FORBIDDEN_INTERNAL = {
    "engine": {"fields", "plot", "cli", "api", "api_imputer", "api_output", "accessor", "datasets"},
    "gp": {"engine", "fields", "plot", "cli", "api", "api_imputer", "api_output", "accessor", "datasets"},
    "fields": {"engine", "gp", "plot", "cli", "api", "api_imputer", "api_output", "datasets"},
}


def _modules(layer: str) -> list[Path]:
    path = PACKAGE / layer
    return [path] if path.is_file() else sorted(path.rglob("*.py"))


def _dotted(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(absolute module name, line, at module level) for every import in a file."""
    tree = ast.parse(path.read_text())
    package = _dotted(path) if path.name == "__init__.py" else _dotted(path).rpartition(".")[0]
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if node.level and not node.module:  # from . import x
                found += [(f"{name}.{alias.name}", node.lineno, id(node) in top) for alias in node.names]
            else:
                found.append((name, node.lineno, id(node) in top))
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_statically(layer):
    stdlib = sys.stdlib_module_names
    bad = []
    for path in _modules(layer):
        for name, line, at_top in _imports(path):
            root = name.split(".")[0]
            where = f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
            if FORBIDDEN[layer] is None:
                if root not in stdlib and root != "__future__":
                    bad.append(where)
                continue
            if root in FORBIDDEN[layer]:
                bad.append(where)
            if root == "geogpvae" and name.split(".")[1:2] and (
                name.split(".")[1] in FORBIDDEN_INTERNAL.get(layer, set())
            ):
                bad.append(where)
            if layer == "fields" and root == "torch" and at_top:
                bad.append(where + " at module level")
    assert not bad, "layering broken:\n" + "\n".join(bad)


_PROBE = """
import importlib, json, pkgutil, sys, types
root = {root!r}
stub = types.ModuleType("geogpvae")
stub.__path__ = [root]
sys.modules["geogpvae"] = stub  # skip geogpvae/__init__.py: only the layer's imports count
for layer in {layers!r}:
    mod = importlib.import_module("geogpvae." + layer)
    if hasattr(mod, "__path__"):
        for info in pkgutil.walk_packages(mod.__path__, mod.__name__ + "."):
            importlib.import_module(info.name)
print(json.dumps(sorted(m for m in {watch!r} if m in sys.modules)))
"""


def _loaded_after(layers: list[str], watch: list[str], stub: bool = True) -> list[str]:
    code = _PROBE.format(root=str(PACKAGE), layers=layers, watch=watch)
    if not stub:
        code = f"import json, sys, geogpvae\nprint(json.dumps(sorted(m for m in {watch!r} if m in sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=PACKAGE.parent, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_engine_and_gp_do_not_load_xarray():
    assert _loaded_after(["gp", "engine"], ["xarray", "matplotlib", "torch"]) == ["torch"]


def test_fields_do_not_load_torch():
    assert _loaded_after(["errors", "fields"], ["xarray", "matplotlib", "torch"]) == ["xarray"]


def test_import_geogpvae_is_light():
    assert _loaded_after([], ["torch", "matplotlib", "cartopy"], stub=False) == []


def _internal_imports() -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere (function bodies and type-checking
    blocks included), from the import statements of every module."""
    def name_of(path: Path) -> str:
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] + [f"{target}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            graph[module] |= {n for n in names if n in modules and n != module}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (a path that ends where it starts), or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_anywhere_in_the_package():
    assert _cycle(_internal_imports()) is None
