"""Shared test configuration.

The real Jura and SPE10 files are third-party data and are never committed. Tests that need
them look in ``GEOGPVAE_DATA_DIR``; when it is unset we point it at ``../shared/datasets``
beside the checkout (where CI keeps them) and tests skip with a reason when that is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

_REPO = Path(__file__).resolve().parents[1]
_SHARED = _REPO.parent / "shared" / "datasets"

if "GEOGPVAE_DATA_DIR" not in os.environ and _SHARED.is_dir():
    os.environ["GEOGPVAE_DATA_DIR"] = str(_SHARED)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The directory holding the real data sets, or skip."""
    path = os.environ.get("GEOGPVAE_DATA_DIR")
    if not path or not Path(path).is_dir():
        pytest.skip("real data sets not available: set GEOGPVAE_DATA_DIR (see datasets/README.md)")
    return Path(path)
