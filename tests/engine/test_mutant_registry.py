"""Every registered mutant (tests/engine/mutants.py) still finds the code it breaks.

A mutant whose original text is gone from the code can no longer be applied, so it checks
nothing; this keeps the registry in step with the code as it changes.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _registry() -> dict:
    spec = importlib.util.spec_from_file_location("mutants", ROOT / "tests" / "engine" / "mutants.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MUTANTS


def test_every_mutant_applies_to_exactly_one_place():
    stale = {name: (path, (ROOT / path).read_text().count(original))
             for name, (path, original, _) in _registry().items()
             if (ROOT / path).read_text().count(original) != 1}
    assert not stale, f"mutants whose text is missing or ambiguous (file, count): {stale}"
