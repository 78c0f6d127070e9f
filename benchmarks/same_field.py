"""What recognising the training field costs ``imputer.impute`` (geogpvae.engine.same_field).

``imputer.impute(ds)`` first compares a hash of the field with the training field's. When the
hash differs but the shapes match, :func:`~geogpvae.engine.same_field.matching_rows` checks
whether the field is the training one in another row order or read back through float32:
first the sorted values of each variable (a quick way out for another field), then a KD-tree
match of the locations. This script times the three cases a user meets, on fields of
SPE10's benchmark size and full size (K = 4 variables, 3-D locations, half missing):

* ``another field``: the same grid with other values (a later day): the quick way out;
* ``re-sorted copy``: the training field in another row order, through float32: a full match;
* ``worst case``: the same values with one gap moved: the KD-tree runs, then the values differ.

    python benchmarks/same_field.py            # 141,900 and 1,122,000 rows
    python benchmarks/same_field.py --rows 1000
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from geogpvae.engine.same_field import matching_rows


def _field(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    side = round(n ** (1 / 3)) + 1
    cells = rng.choice(side**3, size=n, replace=False)
    x = np.column_stack(np.unravel_index(cells, (side, side, side))).astype(float) * [20.0, 10.0, 0.6]
    values = rng.normal(size=(n, 4))
    values[rng.random(values.shape) < 0.5] = np.nan
    return x, values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[141_900, 1_122_000])
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}; NumPy {np.__version__}")
    for n in args.rows:
        x, values = _field(n)
        order = np.random.default_rng(1).permutation(n)
        other = np.random.default_rng(2).normal(size=values.shape)
        other[np.isnan(values)] = np.nan
        moved = values.copy()
        k, j = (int(np.flatnonzero(m)[0]) for m in (np.isfinite(values[:, 0]), np.isnan(values[:, 0])))
        moved[j, 0], moved[k, 0] = moved[k, 0], np.nan
        cases = {
            "another field": (x, other),
            "re-sorted copy": (x.astype(np.float32).astype(float)[order], values.astype(np.float32).astype(float)[order]),
            "worst case": (x, moved),
        }
        for name, (cx, cv) in cases.items():
            start = time.perf_counter()
            rows = matching_rows(x, values, cx, cv)
            seconds = time.perf_counter() - start
            found = "matched" if rows is not None else "not the training field"
            print(f"{n:>9,d} rows, {name:15s}: {seconds:7.3f} s ({found})")


if __name__ == "__main__":
    main()
