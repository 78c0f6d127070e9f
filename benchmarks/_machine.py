"""The machine a benchmark ran on, and how fast it was that day: a fixed reference workload.

Shared virtual machines change speed between days (this project's 2-core VM ran one day
about 50 % slower than the one before, on the same code). A benchmark that prints
:func:`reference_line` beside its machine line gives readers the seconds of one fixed workload, timed in
the same process and threads just before the benchmark: dividing a timing by it compares runs
made on different days or machines roughly; paired A/B runs remain the fair comparison.

The workload is shaped like a whole-field training step on a small survey (Jura's 359 sites):
a two-layer MLP forward and backward pass on 400 rows, and a batch of 400 Cholesky factors of
11 x 11 matrices with their solves, repeated 200 times.

    python benchmarks/_machine.py          # print the line alone
"""

from __future__ import annotations

import platform
import statistics
import time

import torch

#: repetitions of the step in one timing, and timings whose median is reported
STEPS, REPEATS = 200, 5


def _workload(steps: int = STEPS) -> float:
    """Seconds of ``steps`` reference steps (fixed seed, float32, on the CPU)."""
    gen = torch.Generator().manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(20, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128),
                              torch.nn.ReLU(), torch.nn.Linear(128, 6))
    x = torch.randn(400, 20, generator=gen)
    a = torch.randn(400, 11, 11, generator=gen)
    spd = a @ a.mT + 11 * torch.eye(11)
    rhs = torch.randn(400, 11, 1, generator=gen)
    start = time.perf_counter()
    for _ in range(steps):
        net.zero_grad()
        loss = net(x).square().mean()
        chol = torch.linalg.cholesky(spd)
        loss = loss + torch.cholesky_solve(rhs, chol).square().mean()
        loss.backward()
    return time.perf_counter() - start


def reference_seconds(repeats: int = REPEATS) -> float:
    """Median seconds of the reference workload over ``repeats`` timings (after a warm-up)."""
    _workload(10)
    return statistics.median(_workload() for _ in range(repeats))


def reference_line() -> str:
    """One line: the reference workload's seconds on the current threads."""
    return (f"reference workload: {reference_seconds():.3f} s (wall clock) on {torch.get_num_threads()} threads "
            "(benchmarks/_machine.py; divide timings by it to compare days or machines)")


if __name__ == "__main__":
    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}")
    print(reference_line())
