"""Every command the README and the docs show runs, verbatim, on small stand-in files.

The ``geogpvae`` command lines of the shell blocks of README.md and docs/**/*.md are run in
the order they appear, page by page, in a folder holding small files with the names the pages
use (``input.nc``, ``spe10.nc``, ``soil.nc``, ``tiles/*.nc``, the job file of
``docs/slurm``...). The Python blocks of the README run the same way. Training is cut to two
epochs (the commands themselves are unchanged): these tests check that the documented
commands work, not how well they impute.

Commands that need what a test machine lacks are listed in ``NOT_RUN_HERE`` with the test or
build that covers them instead.
"""

from __future__ import annotations

import re
import shlex
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geogpvae
from geogpvae.cli import main
from geogpvae.datasets import make_gaussian_field

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

#: Shell commands shown in the docs that are not ``geogpvae`` runs, and what covers them.
NOT_RUN_HERE = {
    "pip install": ".ci/run installs the package exactly as the README says",
    "python -m pytest": ".ci/run runs it",
    "python -m sphinx": ".ci/run builds the documentation with it",
    "python benchmarks/": "tests/test_benchmark_requirements.py starts them; a full run is a benchmark",
    "python -m torch.distributed.run": "tests/test_distributed.py launches torchrun",
    "jupyter": "tests/test_notebooks.py executes the notebooks",
}


def _shell_lines(text: str) -> list[str]:
    lines = []
    for block in re.findall(r"```(?:bash|sh|shell)\n(.*?)```", text, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def _geogpvae_args(line: str) -> list[str] | None:
    """The arguments of a ``geogpvae`` command line (``srun`` and comments dropped)."""
    words = shlex.split(line, comments=True)
    if words[:1] == ["srun"]:
        words = words[1:]
    if words[:1] == ["geogpvae"]:
        return words[1:]
    return None


def _commands(page: Path) -> list[list[str]]:
    return [a for a in map(_geogpvae_args, _shell_lines(page.read_text())) if a is not None]


PAGES_WITH_COMMANDS = [p for p in PAGES if _commands(p)]


# ------------------------------------------------------------------ stand-in files
def _reservoir(seed: int = 0) -> xr.Dataset:
    """A small SPE10-like volume: porosity and positive permeabilities on (z, y, x)."""
    base = make_gaussian_field((44, 6, 5), n_vars=4, missing=0.3, seed=seed)
    ds = xr.Dataset(coords=base.coords)
    ds["porosity"] = (0.2 + 0.05 * base.v0).assign_attrs(units="1", long_name="porosity")
    for name, v in zip(("kx", "ky", "kz"), ("v1", "v2", "v3")):
        ds[name] = np.exp(2.0 + base[v]).assign_attrs(units="9.869233e-16 m2",
                                                       long_name=f"permeability {name} (mD)")
    return ds


def _survey() -> tuple[xr.Dataset, xr.Dataset]:
    pair = make_gaussian_field(n_points=80, n_vars=3, names=["Cd", "Ni", "Zn"], seed=1,
                               return_truth=True)
    return tuple(ds.assign({n: np.exp(ds[n]).assign_attrs(units="mg kg-1")
                            for n in ("Cd", "Ni", "Zn")}) for ds in pair)


def _tile(i: int) -> xr.Dataset:
    rng = np.random.default_rng(i)
    shape = (3, 4, 5)
    t2m = 280 + rng.normal(size=shape)
    tp = np.exp(rng.normal(size=shape))
    for a in (t2m, tp):
        a[rng.random(shape) < 0.3] = np.nan
    return xr.Dataset(
        {"t2m": (("time", "lat", "lon"), t2m, {"units": "K"}),
         "tp": (("time", "lat", "lon"), tp, {"units": "m"})},
        coords={"time": pd.date_range("2024-01-01", periods=3),
                "lat": ("lat", 40.0 + np.arange(4.0) + i, {"units": "degrees_north"}),
                "lon": ("lon", 5.0 + np.arange(5.0), {"units": "degrees_east"})})


def _prepare(folder: Path) -> None:
    reservoir = _reservoir()
    for path in ("input.nc", "spe10.nc", "data/spe10.nc"):
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        geogpvae.to_netcdf(reservoir, folder / path)
    (folder / "results").mkdir()
    shutil.copy(REPO / "docs" / "slurm" / "job.toml", folder / "job.toml")
    soil = make_gaussian_field(n_points=80, n_vars=3, seed=2)
    geogpvae.to_netcdf(soil, folder / "soil.nc")
    # 2000 rows: docs/cluster.md's jobs each fill 1000 of them
    grid = xr.Dataset(coords={"y": np.linspace(0, 1, 2000), "x": np.linspace(0, 1, 3)})
    for c in ("x", "y"):
        grid[c].attrs = dict(soil[c].attrs)
    geogpvae.to_netcdf(grid, folder / "grid.nc")
    survey, truth = _survey()
    geogpvae.to_netcdf(survey, folder / "survey.nc")
    geogpvae.to_netcdf(truth, folder / "survey_truth.nc")
    (folder / "tiles").mkdir()
    (folder / "filled").mkdir()
    for i in range(2):
        geogpvae.to_netcdf(_tile(i), folder / "tiles" / f"tile{i}.nc")


@pytest.fixture
def quick(monkeypatch, tmp_path):
    """A folder with the stand-in files, and training cut to two epochs."""
    original = geogpvae.GPVAEConfig.n_epochs
    monkeypatch.setattr(geogpvae.GPVAEConfig, "n_epochs", lambda self, n: min(2, original(self, n)))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for key in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_PROCID", "WORLD_SIZE",
                "SLURM_NTASKS", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    _prepare(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ------------------------------------------------------------------ the tests
def test_every_shell_command_is_run_here_or_covered_elsewhere():
    uncovered = []
    for page in PAGES:
        for line in _shell_lines(page.read_text()):
            if _geogpvae_args(line) is not None:
                continue
            words = line.split()
            while words and re.match(r"^[A-Za-z_]\w*=", words[0]) and len(words) > 1:
                words = words[1:]  # environment assignments before the command
            if words[:1] == ["srun"]:
                words = words[1:]
            cmd = " ".join(words)
            if not any(cmd.startswith(k) for k in NOT_RUN_HERE) and _is_command(line):
                uncovered.append(f"{page.relative_to(REPO)}: {line}")
    assert uncovered == [], "documented commands no test runs:\n" + "\n".join(uncovered)


def _is_command(line: str) -> bool:
    """Shell plumbing of the SLURM scripts (export, if, rc=$?, scontrol, sbatch) is not one."""
    first = line.split()[0]
    plumbing = ("export", "if", "fi", "exit", "rc=", "n=", "S=", "scontrol", "sbatch")
    return not first.startswith(plumbing)


@pytest.mark.parametrize("page", PAGES_WITH_COMMANDS, ids=lambda p: str(p.relative_to(REPO)))
def test_documented_geogpvae_commands_run(page, quick, capsys, monkeypatch):
    for args in _commands(page):
        tasks = [None]
        if any("{stem}" in a or "{name}" in a for a in args):
            # a job-array command (docs/slurm/array.sbatch): one run per array task
            tasks = [str(i) for i in range(len(list((quick / "tiles").glob("*.nc"))))]
        if "--config" in args:
            # each SLURM script of docs/cluster.md is a job of its own: start it afresh
            for folder in ("results", "checkpoints"):
                shutil.rmtree(quick / folder, ignore_errors=True)
            (quick / "results").mkdir()
        for task in tasks:
            if task is not None:
                monkeypatch.setenv("SLURM_ARRAY_TASK_ID", task)
            code = main(args)
            out = capsys.readouterr()
            assert code == 0, f"{page.name}: geogpvae {shlex.join(args)} -> exit {code}\n{out.err}"
        monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)


def test_readme_python_blocks_run_as_pasted(quick, capsys, monkeypatch):
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert blocks
    (quick / "empty").mkdir()
    monkeypatch.chdir(quick / "empty")  # no stand-in file: the blocks make their own data
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102
    capsys.readouterr()


def test_getting_started_examples_run_as_pasted(quick, monkeypatch):
    import doctest

    text = (REPO / "docs" / "getting-started.md").read_text()
    blocks = re.findall(r"```\{doctest\}\n(.*?)```", text, re.DOTALL)
    assert blocks
    (quick / "empty").mkdir()
    monkeypatch.chdir(quick / "empty")
    test = doctest.DocTestParser().get_doctest("".join(blocks), {}, "getting-started.md", "getting-started.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", geogpvae.errors.TrainingWarning)  # the page shows none
        runner.run(test)
    assert runner.failures == 0 and runner.tries == len(test.examples) > 5
