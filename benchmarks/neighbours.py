"""Time to build the SPA conditioning sets (each point's H nearest earlier points).

    python benchmarks/neighbours.py            # 141,900 and 1,122,000 grid points, 10^6 random points

The reference implementation builds them with a per-point Python loop (~35 s for 141,900
points on a 2-core CPU); here they come from geometric prefix blocks of KD-tree queries, or, on
a regular lattice, from stencils of cell offsets (``geogpvae.gp.lattice``). The last lines time
every neighbour structure the SPA engine builds before training on the full-size SPE10 grid.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from geogpvae.datasets.synthetic import grid_points
from geogpvae.gp.neighbours import knn, order_points, ordered_neighbours, shared_stencils

SPE10_STEPS = np.array([1.64042, 0.328084, 0.164042])  # z, y, x cell steps of full SPE10 in engine units


def engine_structures(pts: np.ndarray, h: int) -> None:
    """Everything the SPA engine searches before training, on a lattice (package defaults)."""
    steps = {}
    t = time.perf_counter()
    order = order_points(pts, "sorted")
    nbr = ordered_neighbours(pts, h, order)
    steps["earlier neighbours (sorted)"] = time.perf_counter() - t
    t = time.perf_counter()
    shared_stencils(pts, nbr)
    steps["shared stencils"] = time.perf_counter() - t
    t = time.perf_counter()
    knn(pts, 8, exclude_self=True)
    steps["context neighbours (k = 8)"] = time.perf_counter() - t
    t = time.perf_counter()
    knn(pts, h, exclude_self=True)
    steps["initial lengthscale (k = H)"] = time.perf_counter() - t
    for name, sec in steps.items():
        print(f"  {name:30s} {sec:6.2f} s")
    print(f"  {'all neighbour structures':30s} {sum(steps.values()):6.2f} s")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--neighbours", type=int, default=20)
    p.add_argument("--large", type=int, default=1_000_000)
    args = p.parse_args()
    h = args.neighbours
    print(f"machine: {platform.processor() or platform.machine()}; H = {h}")
    cases = [("43x110x30 grid", grid_points((43, 110, 30))),
             ("85x220x60 grid (full SPE10)", grid_points((85, 220, 60))),
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
    full = grid_points((85, 220, 60)) * SPE10_STEPS
    print(f"full SPE10 grid, {len(full):,} cells, SPE10's cell steps, as the engine builds them:")
    engine_structures(full, h)


if __name__ == "__main__":
    main()
