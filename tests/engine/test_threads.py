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
    quiet = {"quota": None, "others": None}
    assert choose_threads(5, env=env, affinity=8, current=default) == threads.ThreadChoice(5, "requested")
    caller = choose_threads(env=env, affinity=8, current=default + 1)
    assert caller.threads == default + 1 and "torch.set_num_threads" in caller.reason
    assert choose_threads(env=env, affinity=8, current=default).threads == 3
    assert choose_threads(env={"SLURM_CPUS_PER_TASK": "2"}, affinity=8, current=default, **quiet).threads == 2
    assert choose_threads(env={}, affinity=8, current=default, **quiet).threads == 8


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



# --------------------------------------------------------------------------- quotas and busy machines
@pytest.mark.parametrize("files, cpus", [
    ({"cpu.max": "150000 100000\n"}, 2), ({"cpu.max": "max 100000\n"}, None),
    ({"cpu.max": "50000 100000"}, 1), ({"cpu.max": "garbage"}, None),
    ({"cpu/cpu.cfs_quota_us": "400000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 4),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None), ({}, None)])
def test_the_cgroup_cpu_quota_is_read_from_v2_and_v1_files(tmp_path, files, cpus):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert threads.cgroup_cpus(tmp_path) == cpus


def test_a_cgroup_quota_caps_the_cores():
    assert available_cores({}, affinity=16, quota=3) == (3, "CPU affinity: 16 cores; cgroup CPU quota: 3 cores")
    assert available_cores({}, affinity=2, quota=8) == (2, "CPU affinity: 2 cores")
    assert available_cores({"SLURM_CPUS_PER_TASK": "4"}, affinity=16, quota=2)[0] == 2


def _tasks(folder, states):
    """A fake /proc/self/task: one thread per state letter."""
    for i, state in enumerate(states):
        (folder / str(100 + i)).mkdir(parents=True)
        (folder / str(100 + i) / "stat").write_text(f"{100 + i} (py) thread) {state} 1 1 1 0 -1\n")
    return folder


def test_running_threads_of_other_processes_are_counted_without_this_ones(tmp_path):
    path = tmp_path / "loadavg"
    path.write_text("7.31 6.48 3.92 9/212 12261\n")
    one = _tasks(tmp_path / "one", "RSS")
    assert threads.other_running(samples=3, loadavg=path, tasks=one) == 8
    # this process's threads still spinning after its last operation are not others
    three = _tasks(tmp_path / "three", "RRRS")
    assert threads.other_running(samples=1, loadavg=path, tasks=three) == 6
    assert threads._own_running(tmp_path / "none") == 1  # at least the reader
    path.write_text("0.00 0.01 0.05 1/80 1\n")
    assert threads.other_running(samples=1, loadavg=path, tasks=one) == 0
    path.write_text("nonsense")
    assert threads.other_running(samples=1, loadavg=path, tasks=one) is None
    assert threads.other_running(samples=1, loadavg=tmp_path / "absent", tasks=one) is None


def test_a_busy_machine_gets_the_cpus_the_others_leave_free():
    default = threads._TORCH_DEFAULT

    def pick(others, cpus=8, **kw):
        return choose_threads(env={}, affinity=8, current=default, quota=None, others=others, cpus=cpus, **kw)

    assert pick(0).threads == 8 and "busy" not in pick(0).reason
    assert pick(None).threads == 8  # unknown: as if quiet
    assert pick(3).threads == 5
    busy = pick(12)
    assert busy.threads == 1
    assert busy.reason == "CPU affinity: 8 cores; machine busy: 12 other running processes on 8 CPUs"
    # an explicit request, a caller's count and OMP_NUM_THREADS are kept on a busy machine too
    assert choose_threads(4, env={}, affinity=8, current=default, others=12, cpus=8).threads == 4
    assert choose_threads(env={"OMP_NUM_THREADS": "2"}, affinity=8, current=default, others=12, cpus=8).threads == 2
    # a 64-CPU node whose other jobs leave more than this job's 4 cores free
    assert choose_threads(env={"SLURM_CPUS_PER_TASK": "4"}, affinity=64, current=default, quota=None, others=40,
                          cpus=64).threads == 4


def test_a_busy_machine_is_said_once_as_a_warning(monkeypatch, caplog):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    monkeypatch.setattr(threads, "_affinity", lambda: 2)
    monkeypatch.setattr(threads, "cgroup_cpus", lambda: None)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    counts = iter([8, 9, 8])
    monkeypatch.setattr(threads, "other_running", lambda: next(counts))
    with caplog.at_level(logging.INFO, logger="geogpvae"):
        choices = [configure_threads() for _ in range(3)]
    assert [c.threads for c in choices] == [1, 1, 1] and torch.get_num_threads() == 1
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warned] == [
        "the machine is busy: using 1 CPU thread (CPU affinity: 2 cores; "
        "machine busy: 8 other running processes on 2 CPUs)"]


def test_a_process_seen_in_one_reading_only_does_not_count(tmp_path, monkeypatch):
    path, one = tmp_path / "loadavg", _tasks(tmp_path / "one", "R")
    path.write_text("0.1 0.1 0.1 3/80 1\n")
    later = iter(["0.1 0.1 0.1 1/80 1\n", "0.1 0.1 0.1 3/80 1\n"])
    monkeypatch.setattr(threads.time, "sleep", lambda seconds: path.write_text(next(later)))
    assert threads.other_running(samples=3, loadavg=path, tasks=one) == 0
    path.write_text("0.1 0.1 0.1 3/80 1\n")
    monkeypatch.setattr(threads.time, "sleep", lambda seconds: None)
    assert threads.other_running(samples=3, loadavg=path, tasks=one) == 2  # in every reading: it holds a CPU
