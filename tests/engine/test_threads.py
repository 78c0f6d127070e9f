"""The CPU thread default: never more threads than the process may use, and say why."""

import logging

import numpy as np
import pytest
import torch

from geogpvae.engine import threads
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.threads import available_cores, choose_threads, configure_threads


@pytest.fixture(autouse=True)
def _restore_torch_threads(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "_TORCH_DEFAULT", before)
    monkeypatch.setattr(threads, "_last_reported", None)
    yield
    torch.set_num_threads(before)


def test_affinity_is_the_default():
    assert available_cores({}, affinity=6) == (6, "CPU affinity: 6 cores")
    assert available_cores({}, affinity=1) == (1, "CPU affinity: 1 core")


def test_slurm_allocation_caps_the_affinity():
    cores, reason = available_cores({"SLURM_CPUS_PER_TASK": "4"}, affinity=64)
    assert cores == 4 and "SLURM_CPUS_PER_TASK=4" in reason
    # an allocation larger than the mask does not raise the count
    assert available_cores({"SLURM_CPUS_PER_TASK": "16"}, affinity=8)[0] == 8
    # SLURM's "4(x2)" form and garbage
    assert available_cores({"SLURM_CPUS_PER_TASK": "4(x2)"}, affinity=64)[0] == 4
    assert available_cores({"SLURM_CPUS_PER_TASK": "lots"}, affinity=64)[0] == 64


def test_data_parallel_processes_share_the_node():
    assert available_cores({"LOCAL_WORLD_SIZE": "4"}, affinity=16)[0] == 4
    assert available_cores({"SLURM_NTASKS_PER_NODE": "8"}, affinity=4)[0] == 1
    # srun's tasks each have SLURM_CPUS_PER_TASK cores of their own
    assert available_cores({"SLURM_NTASKS_PER_NODE": "4", "SLURM_CPUS_PER_TASK": "8"}, affinity=64)[0] == 8
    # torchrun's workers inside one srun task share that task's cores
    cores, reason = available_cores({"LOCAL_WORLD_SIZE": "4", "SLURM_CPUS_PER_TASK": "32"}, affinity=32)
    assert cores == 8 and "shared by LOCAL_WORLD_SIZE=4 processes; SLURM_CPUS_PER_TASK=32" in reason
    # torchrun in the batch step of a job of 4 tasks of 8 cores: it sees the node's 32
    assert available_cores({"LOCAL_WORLD_SIZE": "4", "SLURM_CPUS_PER_TASK": "8"}, affinity=32)[0] == 8


def test_precedence_request_then_caller_then_omp_then_cores():
    default = threads._TORCH_DEFAULT
    env = {"OMP_NUM_THREADS": "3", "SLURM_CPUS_PER_TASK": "2"}
    assert choose_threads(5, env=env, affinity=8, current=default) == threads.ThreadChoice(5, "requested")
    caller = choose_threads(env=env, affinity=8, current=default + 1)
    assert caller.threads == default + 1 and "torch.set_num_threads" in caller.reason
    assert choose_threads(env=env, affinity=8, current=default).threads == 3
    assert choose_threads(env={"SLURM_CPUS_PER_TASK": "2"}, affinity=8, current=default).threads == 2
    assert choose_threads(env={}, affinity=8, current=default).threads == 8


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(ValueError, match="threads"):
        choose_threads(bad)
    with pytest.raises(ValueError, match="threads"):
        GPVAEConfig(threads=bad)


def test_configure_sets_torch_and_logs_once(monkeypatch, caplog):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    with caplog.at_level(logging.INFO, logger="geogpvae"):
        choice = configure_threads()
        configure_threads()
    assert choice.threads == 1 and torch.get_num_threads() == 1
    lines = [r.getMessage() for r in caplog.records if "CPU thread" in r.getMessage()]
    assert lines == ["using 1 CPU thread (OMP_NUM_THREADS=1)"]


def test_a_count_the_caller_set_is_kept(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    wanted = threads._TORCH_DEFAULT + 1
    torch.set_num_threads(wanted)
    choice = configure_threads()
    assert choice.threads == wanted and torch.get_num_threads() == wanted


def test_engine_applies_and_reports_the_choice(monkeypatch):
    from geogpvae import GPVAEEngine, impute
    from geogpvae.datasets import make_gaussian_field

    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    eng = GPVAEEngine(epochs=1, progress=False)
    assert torch.get_num_threads() == 1
    assert eng.threads_.threads == 1 and "SLURM_CPUS_PER_TASK=1" in eng.threads_.reason

    ds = make_gaussian_field((10, 10), n_vars=2, missing=0.3)
    out = impute(ds, epochs=1, threads=1, neighbours=4, progress=False)
    assert out.attrs["geogpvae_threads"] == "1 CPU thread (requested)"
    assert np.isfinite(out.v0.values).all()

