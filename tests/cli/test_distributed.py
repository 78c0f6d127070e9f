"""Several processes: launch detection, and a two-process gloo run of ``geogpvae impute``.

The two-process run uses ``python -m torch.distributed.run --standalone --nproc_per_node 2``
on the CPU (gloo) with a tiny model; it checks that the run completes, that rank 0 writes an
output of the same format as a single-process run, and that its accuracy matches that run's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import geogpvae
from geogpvae.cli import jobs, main
from geogpvae.datasets import make_gaussian_field

from cli_helpers import SMALL

REPO = Path(__file__).resolve().parents[2]
_LAUNCH_VARS = (
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "MASTER_ADDR",
    "MASTER_PORT",
)


@pytest.fixture
def clean_env(monkeypatch):
    for key in _LAUNCH_VARS:
        monkeypatch.delenv(key, raising=False)
    return monkeypatch


def test_single_process_is_not_a_launch():
    assert jobs.launch_environment({}) is None
    assert jobs.launch_environment({"WORLD_SIZE": "1", "RANK": "0"}) is None
    # a batch script in an allocation of 4 tasks, outside any srun step
    assert jobs.launch_environment({"SLURM_NTASKS": "4", "SLURM_PROCID": "0"}) is None


def test_torchrun_and_srun_launches():
    torchrun = jobs.launch_environment({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1"})
    assert (torchrun.rank, torchrun.world, torchrun.local_rank) == (3, 4, 1)
    assert torchrun.launcher == "torchrun"
    srun = jobs.launch_environment(
        {"SLURM_STEP_NUM_TASKS": "8", "SLURM_PROCID": "5", "SLURM_LOCALID": "1"}
    )
    assert (srun.rank, srun.world, srun.local_rank, srun.launcher) == (5, 8, 1, "srun")
    with pytest.raises(ValueError, match="outside"):
        jobs.launch_environment({"WORLD_SIZE": "2", "RANK": "2"})
    with pytest.raises(ValueError, match="not an integer"):
        jobs.launch_environment({"WORLD_SIZE": "two", "RANK": "0"})


def test_srun_launch_needs_a_master_address(clean_env):
    clean_env.setenv("SLURM_STEP_NUM_TASKS", "2")
    clean_env.setenv("SLURM_PROCID", "0")
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        jobs.start_cluster("cpu")


def test_single_process_cluster_is_a_no_op(clean_env):
    cluster, device = jobs.start_cluster("cpu")
    assert (cluster.rank, cluster.world, cluster.is_main, cluster.parallel) == (0, 1, True, False)
    assert device == "cpu"
    assert cluster.max(3) == 3 and cluster.share({"a": 1}) == {"a": 1}
    cluster.close()


def test_distributed_off_runs_alone_inside_a_launch(clean_env, tmp_path):
    clean_env.setenv("SLURM_STEP_NUM_TASKS", "2")
    clean_env.setenv("SLURM_PROCID", "0")
    src = geogpvae.to_netcdf(make_gaussian_field((10, 10), seed=2), tmp_path / "in.nc")
    out = tmp_path / "out.nc"
    args = [
        "impute",
        str(src),
        str(out),
        "--neighbours",
        "4",
        "--epochs",
        "2",
        "-q",
        "--option",
        "encoder_hidden=[8]",
        "--option",
        "decoder_hidden=[8]",
        "--option",
        "samples=4",
        "--option",
        "calibrate=false",
    ]
    assert main([*args, "--distributed", "off"]) == 0
    assert out.exists()
    assert main([*args, "--overwrite"]) == 2  # auto: joins the launch, which lacks MASTER_ADDR


def _rmse(out: xr.Dataset, field: xr.Dataset, truth: xr.Dataset) -> float:
    errors = []
    for name in field.data_vars:
        hidden = field[name].isnull().values
        errors.append((out[name].values - truth[name].values)[hidden])
    return float(np.sqrt(np.mean(np.concatenate(errors) ** 2)))


def _mean_fill_rmse(field: xr.Dataset, truth: xr.Dataset) -> float:
    errors = []
    for name in field.data_vars:
        hidden = field[name].isnull().values
        errors.append(float(field[name].mean()) - truth[name].values[hidden])
    return float(np.sqrt(np.mean(np.concatenate(errors) ** 2)))


def test_two_gloo_processes_match_a_single_process_run(clean_env, tmp_path):
    field, truth = make_gaussian_field((16, 16), seed=5, lengthscale=0.3, return_truth=True)
    src = geogpvae.to_netcdf(field, tmp_path / "in.nc")
    job = [
        "--neighbours",
        "6",
        "--epochs",
        "100",
        "--device",
        "cpu",
        "-q",
        *SMALL,
    ]
    # Each rank takes its share of every epoch's batches and a step averages the ranks'
    # gradients: a per-rank batch of 32 on two ranks makes the same steps as 64 on one.
    two, one = tmp_path / "two.nc", tmp_path / "one.nc"
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "geogpvae",
        "impute",
        str(src),
        str(two),
        *job,
        "--option",
        "batch_size=32",
    ]
    res = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert main(["impute", str(src), str(one), *job, "--option", "batch_size=64"]) == 0

    with xr.open_dataset(two) as a, xr.open_dataset(one) as b:
        assert set(a.data_vars) == set(b.data_vars)
        for name in a.data_vars:
            assert a[name].dims == b[name].dims and a[name].dtype == b[name].dtype
            assert set(a[name].attrs) == set(b[name].attrs)
        assert set(a.attrs) == set(b.attrs)
        for name in field.data_vars:
            observed = field[name].notnull().values
            np.testing.assert_array_equal(a[name].values[observed], field[name].values[observed])
        rmse_two, rmse_one = _rmse(a, field, truth), _rmse(b, field, truth)
    baseline = _mean_fill_rmse(field, truth)
    assert rmse_two < 0.6 * baseline, (rmse_two, baseline)
    assert rmse_two < 1.35 * rmse_one + 0.03, (rmse_two, rmse_one)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.nc", "one.nc", "two.nc"]


def test_a_process_that_started_a_group_skips_the_interpreter_shutdown(tmp_path, monkeypatch):
    """After a gloo run the group's threads outlive destroy_process_group; a shutdown racing
    with them aborted the process (SIGABRT) after a successful run, so main ends it early."""
    ended: list[int] = []
    monkeypatch.setattr(jobs.os, "_exit", ended.append)
    missing = str(tmp_path / "absent.nc")
    assert main(["info", missing]) == 2 and ended == []  # no group: main returns
    monkeypatch.setattr(jobs, "_GROUP_STARTED", True)
    assert main(["info", missing]) == 2 and ended == [2]
