"""On a CUDA device: a fit and its predictions, against the same work on the CPU.

Skipped where torch sees no GPU, as in CI. The accelerator code path is also exercised on
the CPU in ``test_device.py``; ``benchmarks/gpu_check.sh`` runs this file on a GPU machine.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import geogpvae
from geogpvae.datasets import make_gaussian_field

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

OPTIONS = dict(neighbours=8, epochs=80, seed=0, progress=False)


def _field():
    return make_gaussian_field((18, 18), n_vars=2, missing=0.4, seed=3, return_truth=True)


def _hidden_rmse(out, ds, truth) -> float:
    errors = [(out[v] - truth[v]).values[np.isnan(ds[v].values)] for v in ds.data_vars]
    return float(np.sqrt(np.mean(np.concatenate(errors) ** 2)))


def test_a_fit_on_cuda_trains_there_and_scores_like_the_cpu():
    ds, truth = _field()
    imp = geogpvae.GPVAEImputer(device="cuda", **OPTIONS).fit(ds)
    assert {p.device.type for p in imp.engine_.model.parameters()} == {"cuda"}
    out = imp.impute(ds)
    cpu = geogpvae.impute(ds, device="cpu", **OPTIONS)
    for v in ds.data_vars:
        seen = ~np.isnan(ds[v].values)
        np.testing.assert_array_equal(out[v].values[seen], ds[v].values[seen])  # unchanged
        assert np.isfinite(out[v].values).all() and (out[f"{v}_std"].values[~seen] > 0).all()
    # different random streams, the same model: the two fits score alike on the hidden values
    assert _hidden_rmse(out, ds, truth) < 1.3 * _hidden_rmse(cpu, ds, truth) + 0.02


def test_a_model_fitted_on_the_cpu_predicts_the_same_on_cuda(tmp_path):
    ds, _ = _field()
    # 1,024 draws per prediction, so that the two devices' random streams differ by little
    imp = geogpvae.GPVAEImputer(device="cpu", samples=1024, **OPTIONS).fit(ds)
    path = imp.save(tmp_path / "model.pt")
    on_cpu = imp.impute(ds)
    on_gpu = geogpvae.GPVAEImputer.load(path, device="cuda").impute(ds)
    for v in ds.data_vars:
        hidden = np.isnan(ds[v].values)
        std = on_cpu[f"{v}_std"].values[hidden]
        diff = np.abs(on_gpu[v].values[hidden] - on_cpu[v].values[hidden])
        # Monte Carlo averages of 1,024 draws: equal up to their sampling error (on the CPU, two seeds: at most 0.03 std in the mean, 8 % in the std)
        assert np.all(diff < 0.25 * std + 1e-3), float((diff / std).max())
        np.testing.assert_allclose(on_gpu[f"{v}_std"].values[hidden], std, rtol=0.2)
