"""The worked examples in ``notebooks/`` run top to bottom.

Each notebook is executed with nbclient on the ``python3`` kernel, which is the interpreter
running the tests. ``GEOGPVAE_NOTEBOOK_QUICK=1`` makes the notebooks cut their work to a smoke
test: 20 epochs on Jura; on SPE10, layers 22-26 (two of the paper's layers) with every fourth
cell along x and y, and 2 epochs. Each should take well under a minute. The notebooks need the
real data; without it the tests skip with a reason.

The executed notebook stays in memory. Nothing is written back to ``notebooks/``, and the
tests check that nothing lands in ``docs/figures/`` (``GEOGPVAE_SAVE_FIGURES`` is cleared, and
the notebooks ignore it in quick mode anyway).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from geogpvae.datasets import available

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (the test extra)")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (the test extra)")

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
FIGURES = REPO / "docs" / "figures"

# notebook -> (the data sets it loads, the fewest figures it must show)
CASES = {
    "jura": (("jura", "jura_grid"), 4),
    "spe10": (("spe10",), 4),
}


def _kernel_problem() -> str | None:
    """Why the python3 kernel cannot start, or None when it can."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        KernelSpecManager().get_kernel_spec("python3")
    except Exception as err:  # noqa: BLE001 - any failure means no kernel
        return f"no python3 Jupyter kernel ({type(err).__name__}: {err}); install ipykernel"
    return None


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    if not folder.is_dir():
        return {}
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}


@pytest.mark.slow
@pytest.mark.data
@pytest.mark.parametrize("name", sorted(CASES))
def test_notebook_runs_in_quick_mode(name, data_dir, monkeypatch):
    datasets, min_figures = CASES[name]
    found = available(data_dir)
    missing = [d for d in datasets if found.get(d) is None]
    if missing:
        pytest.skip(f"{name} notebook: data set(s) {missing} not found in {data_dir}")
    problem = _kernel_problem()
    if problem:
        pytest.skip(problem)

    path = NOTEBOOKS / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    # the kernel inherits this process's environment
    monkeypatch.setenv("GEOGPVAE_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("GEOGPVAE_DATA_DIR", str(data_dir))
    monkeypatch.delenv("GEOGPVAE_SAVE_FIGURES", raising=False)
    figures_before = _snapshot(FIGURES)

    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=600,  # per cell; a quick run takes well under a minute in all
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError, with the traceback, if a cell fails
    seconds = time.perf_counter() - start

    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    n_images = sum("image/png" in o.get("data", {}) for o in outputs)
    assert n_images >= min_figures, f"{name}: {n_images} figures shown, expected {min_figures}"
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "quick mode" in text
    assert _snapshot(FIGURES) == figures_before, "the notebook wrote into docs/figures"
    print(f"{name}.ipynb ran in quick mode in {seconds:.0f} s")
