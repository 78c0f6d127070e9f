"""Benchmark scripts say which extra they need before doing any work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# run a script as __main__ with some modules made unimportable (None in sys.modules)
_RUN = (
    "import runpy, sys\n"
    "for name in sys.argv[2].split(','):\n"
    "    sys.modules[name] = None\n"
    "script = sys.argv[1]\n"
    "sys.argv = [script, *sys.argv[3:]]\n"
    "runpy.run_path(script, run_name='__main__')\n"
)


def _run(script: str, hidden: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "GEOGPVAE_DATA_DIR": str(REPO / "no-such-folder")}
    return subprocess.run([sys.executable, "-c", _RUN, str(REPO / script), hidden, *args],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=600, check=False)


@pytest.mark.parametrize("script, hidden, needs", [
    ("benchmarks/jura.py", "pykrige", "PyKrige"),
    ("benchmarks/jura.py", "sklearn,sklearn.impute", "scikit-learn"),
    ("benchmarks/spe10.py", "sklearn", "scikit-learn"),
    ("benchmarks/stations.py", "sklearn", "scikit-learn"),
])
def test_missing_extra_is_named_before_any_work(script, hidden, needs):
    res = _run(script, hidden)
    assert res.returncode == 2, res.stderr
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and needs in err[0] and 'pip install -e ".[bench]"' in err[0], res.stderr
    # it stopped before loading data (the data folder does not exist) or training anything
    assert res.stdout == ""


def test_spe10_without_references_does_not_need_the_extra():
    res = _run("benchmarks/spe10.py", "sklearn", "--no-references")
    # it goes on to the data, which are absent here: a data error, not an extra error
    assert ".[bench]" not in res.stderr
    assert res.returncode != 0 and ("SPE10" in res.stderr or "spe10" in res.stderr)


def test_beta_trace_needs_no_extra_and_goes_to_the_data():
    """benchmarks/beta_trace.py wraps the SPE10 task without its references: it starts, installs
    its trace and stops at the (absent) data with a data error."""
    res = _run("benchmarks/beta_trace.py", "sklearn", "--mask-seed", "1")
    assert ".[bench]" not in res.stderr
    assert res.returncode != 0 and ("SPE10" in res.stderr or "spe10" in res.stderr), res.stderr


def test_memorisation_probe_runs_without_an_extra_and_withholds_its_probe(monkeypatch):
    """benchmarks/memorisation.py needs no extra, and the model never sees the probe's values:
    they are missing in what it imputes (so it predicts them) and the rest of the field is intact."""
    import importlib.util

    import numpy as np

    res = _run("benchmarks/memorisation.py", "sklearn", "--seeds", "1", "--options", '{"epochs": 2}')
    assert res.returncode == 0, res.stderr
    assert "mean calibrated z2 of never-trained values" in res.stdout

    spec = importlib.util.spec_from_file_location("memorisation", REPO / "benchmarks" / "memorisation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    seen = {}

    def fake_impute(work, vars, **_):
        seen["values"] = np.column_stack([work[n].values for n in vars])
        return work.assign({f"{n}_std": work[n] * 0 + 1.0 for n in vars}).fillna(0.0)

    monkeypatch.setattr(mod.geogpvae, "impute", fake_impute)
    ds, names, hidden, truth, eligible = mod.station_case(100)
    rec = mod.run_case(ds, names, hidden, truth, eligible, share=0.05, seed=100, options={})
    given = np.isfinite(np.column_stack([ds[n].values for n in names]))
    withheld = given & ~np.isfinite(seen["values"])
    assert withheld.sum() == rec["probe"] > 0
    assert abs(withheld.sum() / given.sum() - 0.05) < 0.01
