"""Time to build the SPA conditioning sets (each point's H nearest earlier points).

    python benchmarks/neighbours.py            # 141,900 grid points and 10^6 random points

The reference implementation builds them with a per-point Python loop (~35 s for 141,900
points on a 2-core CPU); here they come from geometric prefix blocks of KD-tree queries.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from geogpvae.datasets.synthetic import grid_points
from geogpvae.gp.neighbours import knn, order_points, ordered_neighbours


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--neighbours", type=int, default=20)
    p.add_argument("--large", type=int, default=1_000_000)
    args = p.parse_args()
    h = args.neighbours
    print(f"machine: {platform.processor() or platform.machine()}; H = {h}")
    cases = [("43x110x30 grid", grid_points((43, 110, 30))),
             (f"{args.large:,} uniform random 3-D points", np.random.default_rng(0).random((args.large, 3)))]
    for name, pts in cases:
        for ordering in ("random", "maxmin", "sorted"):
            t = time.perf_counter()
            order = order_points(pts, ordering, seed=0)
            t1 = time.perf_counter()
            ordered_neighbours(pts, h, order)
            t2 = time.perf_counter()
            print(f"{name:34s} {ordering:7s}: ordering {t1 - t:6.2f} s, earlier neighbours {t2 - t1:6.2f} s")
        t = time.perf_counter()
        knn(pts, h, exclude_self=True)
        print(f"{name:34s} plain kNN (HPA, prediction): {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
