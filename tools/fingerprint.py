"""Behaviour fingerprint of the engine, for refactors that must change nothing.

Runs five small fits with fixed seeds on one thread (whole-field defaults with save/load and a
new field; HPA with a log variable; clustered gaps in mini-batches; anisotropic axes with the
metric warm-up; a checkpoint resumed) and saves every prediction array. Two fingerprints are
compared bit for bit. About 30 s on a 2-core VM::

    python tools/fingerprint.py before.npz          # on the code before the change
    python tools/fingerprint.py after.npz           # on the code after it
    python tools/fingerprint.py --compare before.npz after.npz
"""
import sys
import time
import warnings

import numpy as np
import torch

from geogpvae.datasets.synthetic import grid_points, make_field
from geogpvae.engine.core import GPVAEEngine

def fingerprint() -> dict[str, np.ndarray]:
    """Every output array of the five fits, by ``case.field`` name."""
    out = {}
    def put(name, pred):
        for f in ("mean", "std", "mean_model", "std_model", "source"):
            out[f"{name}.{f}"] = np.asarray(getattr(pred, f))

    def case(name, fn):
        t = time.time(); fn(); print(f"{name}: {time.time()-t:.1f}s", flush=True)

    # 1 defaults, whole-field, random gaps (Jura-like size)
    f1 = make_field(grid_points((20, 20), 1/19), n_vars=3, missing=0.5, rng=1)
    def c1():
        e = GPVAEEngine(progress=False, threads=1).fit(f1.points, f1.values)
        put("c1", e.predict()); put("c1new", e.predict(np.random.default_rng(0).random((50, 2))))
        out["c1.kl"] = np.array([e.kl_factor_]); out["c1.cal"] = np.asarray(e.calibration_)
        put("c1field", e.predict(f1.points[:100] + 0.001, f1.values[:100]))
        st = e.state_dict(); e2 = GPVAEEngine.from_state_dict(st, progress=False)
        put("c1load", e2.predict())
        out["c1.mode"] = np.array([str(e.predict_mode_)])
    case("c1", c1)

    # 2 HPA, log variable, fixed epochs
    f2 = make_field(grid_points((16, 16), 1/15), n_vars=2, missing=0.4, rng=2)
    def c2():
        v = f2.values.copy(); v[:, 1] = np.exp(v[:, 1])
        e = GPVAEEngine(progress=False, engine="hpa", epochs=40, threads=1).fit(f2.points, v, log=[False, True])
        put("c2", e.predict()); out["c2.kl"] = np.array([e.kl_factor_])
    case("c2", c2)

    # 3 clustered gaps (outages), mini-batches: scattered sites x time-ish
    rng = np.random.default_rng(3)
    pts = rng.random((1500, 2))
    f3 = make_field(pts, n_vars=3, missing=0.0, rng=3)
    obs = f3.observed.copy()
    centres = rng.random((25, 2))
    for j in range(3):
        for c in centres[rng.choice(25, 8, replace=False)]:
            obs[np.linalg.norm(pts - c, axis=1) < 0.06, j] = False
    obs &= rng.random(obs.shape) > 0.1
    v3 = np.where(obs, f3.truth, np.nan)
    def c3():
        e = GPVAEEngine(progress=False, epochs=30, threads=1).fit(pts, v3)
        put("c3", e.predict()); out["c3.cal"] = np.asarray(e.calibration_)
        out["c3.gaps"] = np.asarray(e.clustered_gaps_); out["c3.mode"] = np.array([str(e.predict_mode_)])
        put("c3new", e.predict(rng.random((40, 2))))
    case("c3", c3)

    # 4 anisotropic units (metric warm-up), defaults, mini-batch field > 1024
    rng4 = np.random.default_rng(4)
    p4 = np.c_[rng4.random(1200) * 100.0, rng4.random(1200)]
    f4 = make_field(p4, n_vars=2, missing=0.3, lengthscale=np.array([60.0, 0.08]), rng=4)
    def c4():
        e = GPVAEEngine(progress=False, epochs=150, threads=1).fit(p4, f4.values); out["c4.trace"] = np.array(e.metric_trace_)
        put("c4", e.predict()); out["c4.scale"] = np.atleast_1d(e.x_scale_)
    case("c4", c4)

    # 5 checkpoint/resume with beta=auto on whole field
    def c5():
        stop = {"n": 0}
        def should_stop():
            stop["n"] += 1; return stop["n"] == 7
        e = GPVAEEngine(progress=False, epochs=60, threads=1)
        e.fit(f2.points, f2.values, should_stop=should_stop)
        ck = e.checkpoint()
        e2 = GPVAEEngine(progress=False, epochs=60, threads=1).fit(f2.points, f2.values, resume=ck)
        put("c5", e2.predict())
        e3 = GPVAEEngine(progress=False, epochs=60, threads=1).fit(f2.points, f2.values)
        put("c5full", e3.predict())
    case("c5", c5)
    return out


def compare(path_a: str, path_b: str) -> int:
    """Print every array that differs between two fingerprints; the number of them."""
    a, b = np.load(path_a), np.load(path_b)
    bad = 0
    for k in sorted(set(a) | set(b)):
        if k not in a or k not in b:
            print("missing", k)
            bad += 1
            continue
        x, y = a[k], b[k]
        if x.dtype.kind in "US" or y.dtype.kind in "US":
            same, d = np.array_equal(x, y), "text"
        else:
            same = x.shape == y.shape and np.array_equal(x, y, equal_nan=True)
            d = np.nanmax(np.abs(x.astype(float) - y.astype(float))) if x.shape == y.shape else "shape"
        if not same:
            print(k, d)
            bad += 1
    print("DIFFERENT" if bad else "IDENTICAL", bad)
    return bad


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        sys.exit(1 if compare(sys.argv[2], sys.argv[3]) else 0)
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    np.savez(sys.argv[1], **fingerprint())
