"""Shared test configuration.

The real Jura and SPE10 files are third-party data and are never committed. Tests that need
them look in ``GEOGPVAE_DATA_DIR``; when it is unset we point it at ``../shared/datasets``
beside the checkout (where CI keeps them) and tests skip with a reason when that is absent.

The figure tests (tests/plot/, and ``geogpvae plot`` in tests/cli/) run offline: the fixtures
below refuse any download and point cartopy at empty data folders.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
# the figure tests' helpers assert too: their failures say what was found, as in a test module
pytest.register_assert_rewrite("figure_helpers")

_REPO = Path(__file__).resolve().parents[1]
_SHARED = _REPO.parent / "shared" / "datasets"

if "GEOGPVAE_DATA_DIR" not in os.environ and _SHARED.is_dir():
    os.environ["GEOGPVAE_DATA_DIR"] = str(_SHARED)
# one thread per test process (the suite runs in two): a fit's default thread count otherwise
# follows the machine's load at that moment, and two fits compared bit for bit could differ
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The directory holding the real data sets, or skip."""
    path = os.environ.get("GEOGPVAE_DATA_DIR")
    if not path or not Path(path).is_dir():
        pytest.skip("real data sets not available: set GEOGPVAE_DATA_DIR (see datasets/README.md)")
    return Path(path)


@pytest.fixture
def _no_network_and_fresh_warnings(monkeypatch):
    """No test may download anything; each test sees the once-per-process warnings anew.

    Every test in tests/plot/ uses it (tests/plot/conftest.py); it yields the downloads attempted.
    """
    import matplotlib.pyplot as plt

    from geogpvae.plot import style

    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError(f"download attempted: {args!r}")

    import urllib.request

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    try:
        import cartopy.io
        from cartopy.io import shapereader

        monkeypatch.setattr(cartopy.io, "urlopen", refuse)
        # geogpvae looks for files itself: cartopy's downloaders must never be consulted
        for cls in (cartopy.io.Downloader, shapereader.NEShpDownloader,
                    shapereader.GSHHSShpDownloader):
            for name in ("path", "acquire_resource", "_urlopen"):
                if name in vars(cls):
                    monkeypatch.setattr(cls, name, refuse)
    except ImportError:
        pass
    monkeypatch.setattr(style, "_WARNED", set())
    yield calls
    plt.close("all")


@pytest.fixture
def no_map_data(monkeypatch, tmp_path):
    """cartopy's data folders point at empty directories."""
    from geogpvae.plot import cartography

    cartopy = pytest.importorskip("cartopy")
    for key in ("pre_existing_data_dir", "data_dir", "repo_data_dir"):
        d = tmp_path / key
        d.mkdir()
        monkeypatch.setitem(cartopy.config, key, d)
    monkeypatch.delenv("CARTOPY_DATA_DIR", raising=False)
    monkeypatch.setattr(cartography, "_SYSTEM_DATA_DIRS", ())
    return tmp_path
