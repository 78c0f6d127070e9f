"""Shared set-up of the command-line tests."""

from pathlib import Path

import pytest
import torch

# the shared helpers assert too: their failures say what was found, as in a test module
pytest.register_assert_rewrite("cli_helpers")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One torch thread in the test process: two are very slow when other jobs hold the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    """A gridded and a scattered file, and one tiny imputation of the grid with its model."""
    from cli_helpers import TINY, _write

    from geogpvae.cli import main
    from geogpvae.datasets import make_gaussian_field

    root = tmp_path_factory.mktemp("cli")
    grid = _write(make_gaussian_field((16, 16), seed=0), root / "grid.nc")
    points = _write(make_gaussian_field(n_points=150, seed=1), root / "points.nc")
    out, model = root / "grid_filled.nc", root / "grid.pt"
    assert main(["impute", str(grid), str(out), *TINY, "--save-model", str(model)]) == 0
    return {"root": root, "grid": grid, "points": points, "out": out, "model": model}
