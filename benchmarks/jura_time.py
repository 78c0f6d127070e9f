"""Jura: seconds per ``geogpvae.impute`` call on the paper task, without scoring anything.

Times the scored task's call (Ni, Zn, Cd at 359 sites, Cd hidden at the 100 validation sites,
H = 10, package defaults plus ``--options``) for model seeds 0 to ``--seeds`` - 1 in one
process, and prints each time and their mean. For A/B timings of two versions of the code, run
it for each, back to back, on an otherwise idle machine; no validation value is read.

    python benchmarks/jura_time.py --threads 2 --seeds 4
    python benchmarks/jura_time.py --threads 2 --seeds 4 --options '{"hidden_variance": false}'
"""

from __future__ import annotations

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
from jura import task


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--options", default="{}", help="extra impute options as JSON")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    options = json.loads(args.options)
    _, work, _, _ = task()
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
