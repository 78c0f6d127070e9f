"""Benchmark scripts say which extra they need before doing any work."""

from __future__ import annotations

import os
import runpy
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


@pytest.mark.parametrize("script, hidden, needs, extra", [
    ("benchmarks/jura.py", "pykrige", "PyKrige", "bench"),
    ("benchmarks/jura.py", "sklearn,sklearn.impute", "scikit-learn", "bench"),
    ("benchmarks/spe10.py", "sklearn", "scikit-learn", "bench"),
    ("benchmarks/stations.py", "sklearn", "scikit-learn", "bench"),
    ("benchmarks/real_surveys.py", "pykrige", "PyKrige", "bench"),
    ("benchmarks/real_surveys.py", "sklearn", "scikit-learn", "bench"),
    ("benchmarks/dask_predict.py", "distributed", "distributed", "dask"),
    ("benchmarks/dask_impute.py", "distributed", "distributed", "dask"),
    ("benchmarks/simulation_gstools.py", "gstools", "gstools", "bench"),
])
def test_missing_extra_is_named_before_any_work(script, hidden, needs, extra, monkeypatch, capsys):
    """(In this process, as the runner above does it: the scripts stop before importing anything heavy.)"""
    for name in hidden.split(","):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(sys, "argv", [str(REPO / script)])
    monkeypatch.setenv("GEOGPVAE_DATA_DIR", str(REPO / "no-such-folder"))
    monkeypatch.chdir(REPO)
    with pytest.raises(SystemExit) as stop:
        runpy.run_path(str(REPO / script), run_name="__main__")
    out, err_text = capsys.readouterr()
    assert stop.value.code == 2, err_text
    err = err_text.strip().splitlines()
    assert len(err) == 1 and needs in err[0] and f'pip install -e ".[{extra}]"' in err[0], err_text
    # it stopped before loading data (the data folder does not exist) or training anything
    assert out == ""


def test_spe10_without_references_does_not_need_the_extra():
    res = _run("benchmarks/spe10.py", "sklearn", "--no-references")
    # it goes on to the data, which are absent here: a data error, not an extra error
    assert ".[bench]" not in res.stderr
    assert res.returncode != 0 and ("SPE10" in res.stderr or "spe10" in res.stderr)
