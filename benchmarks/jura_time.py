"""Jura: seconds per ``geogpvae.impute`` call on the paper task, without scoring anything.

Times the scored task's call (Ni, Zn, Cd at 359 sites, Cd hidden at the 100 validation sites,
H = 10, package defaults plus ``--options``) for model seeds 0 to ``--seeds`` - 1 in one
process, and prints each time and their mean. For A/B timings of two versions of the code, run
it for each, back to back, on an otherwise idle machine; no validation value is read.

    python benchmarks/jura_time.py --threads 2 --seeds 4
    python benchmarks/jura_time.py --threads 2 --seeds 4 --options '{"beta": 1.0}'
    python benchmarks/jura_time.py --threads 2 --per-step     # milliseconds per training step
    python benchmarks/jura_time.py --threads 2 --per-step --cpu-time

``--copies N`` (with ``--per-step``) trains on N copies of the survey side by side, each moved
100 km east of the last (no site has a neighbour in another copy): what one step of N models
trained together as one batch would cost.

    python benchmarks/jura_time.py --threads 2 --per-step --copies 2

``--per-step`` times the training steps alone: with a fixed KL weight and no calibration, the
difference between a 400-epoch and a 100-epoch call (every epoch is one whole-field step),
divided by 300; five repeats and their median. ``--cpu-time`` takes the process's CPU time (both
threads together) instead of the wall clock: time the VM's host takes from the process is not
counted, so two codes compare more steadily. Alternate the codes, several rounds.
"""

from __future__ import annotations

import os
import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

import geogpvae

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import reference_line
from jura import task


def per_step(work, options: dict, repeats: int = 5, clock=time.perf_counter) -> None:
    """Print the milliseconds per whole-field training step (see the module's docstring)."""
    call = dict(vars=["Ni", "Zn", "Cd"], neighbours=10, seed=0, progress=False, beta=1.0, calibrate=False)
    call.update(options)
    print(reference_line(), flush=True)
    geogpvae.impute(work, **{**call, "epochs": 20})  # warm-up
    ms = []
    for _ in range(repeats):
        times = []
        for epochs in (400, 100):
            start = clock()
            geogpvae.impute(work, **{**call, "epochs": epochs})
            times.append(clock() - start)
        ms.append(1e3 * (times[0] - times[1]) / 300)
    print(f"{platform.machine()}, {torch.get_num_threads()} threads, geogpvae {geogpvae.__version__}; "
          f"options {json.dumps(options)}")
    what = "CPU" if clock is time.process_time else "wall"
    print(f"milliseconds ({what}) per training step:", ", ".join(f"{v:.2f}" for v in ms), f"; median {np.median(ms):.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--options", default="{}", help="extra impute options as JSON")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--per-step", action="store_true", help="milliseconds per training step instead")
    p.add_argument("--cpu-time", action="store_true", help="with --per-step: the process's CPU time")
    p.add_argument("--copies", type=int, default=1, help="train on this many copies of the survey, side by side")
    args = p.parse_args()
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # what geogpvae reads: torch's own count set before
        # the engine is imported looks like torch's default to it
        torch.set_num_threads(args.threads)
    options = json.loads(args.options)
    _, work, _, _ = task()
    if args.copies > 1:
        import xarray as xr

        work = xr.concat([work.assign_coords(x=work.x + 100.0 * c) for c in range(args.copies)], dim="site")
    if args.per_step:
        per_step(work, options, clock=time.process_time if args.cpu_time else time.perf_counter)
        return
    print(reference_line(), flush=True)
    seconds = []
    for seed in range(args.seeds):
        start = time.perf_counter()
        geogpvae.impute(work, vars=["Ni", "Zn", "Cd"], neighbours=10, seed=seed, progress=False, **options)
        seconds.append(time.perf_counter() - start)
    print(f"{platform.machine()}, {torch.get_num_threads()} threads, geogpvae {geogpvae.__version__}; "
          f"options {json.dumps(options)}")
    print("seconds per call:", ", ".join(f"{s:.2f}" for s in seconds), f"; mean {np.mean(seconds):.2f}")


if __name__ == "__main__":
    main()
