"""The accelerator code path, exercised on the CPU: device choice, no per-step device syncs,
faiss GPU resources made once, and batches planned on the host."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from geogpvae.datasets.synthetic import grid_points
from geogpvae.engine.batches import batch_plan, plan_to_device
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.data import field_data, gather_batch, resolve_device
from geogpvae.gp import neighbours as nb
from geogpvae.gp.priors._blocks import checked_cholesky, spd_solve


def test_auto_device_picks_cuda_when_present(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device("cpu") == torch.device("cpu")


def test_auto_keeps_launch_bound_fits_on_the_cpu_when_a_gpu_is_present(monkeypatch):
    """Whole-field steps and small mini-batches are launch-bound on a GPU (docs/performance.md):
    "auto" trains such fields on the CPU; larger fields, and an explicit "cuda", go to the GPU."""
    from geogpvae.engine.config import GPU_MIN_BATCH
    from geogpvae.engine.core import GPVAEEngine

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    eng = GPVAEEngine(progress=False)
    assert eng.device.type == "cuda"  # nothing fitted yet: as resolve_device
    for n, where in [(1024, "cpu"), (2025, "cpu"), (32 * GPU_MIN_BATCH - 1, "cpu"), (32 * GPU_MIN_BATCH, "cuda"),
                     (141_900, "cuda")]:
        eng.n_points_ = n
        assert eng.device.type == where, n
    given = GPVAEEngine(batch_size=GPU_MIN_BATCH, progress=False)  # the user's batches decide
    given.n_points_ = 3000
    assert given.device.type == "cuda"
    wide = GPVAEEngine(batch_size=5000, progress=False)  # whole-field steps asked for
    wide.n_points_ = 3000
    assert wide.device.type == "cpu"
    asked = GPVAEEngine(device="cuda", progress=False)
    asked.n_points_ = 300
    assert asked.device.type == "cuda"
    # a whole fit of a survey-sized field with "a GPU present": trained and predicted on the CPU
    x = np.random.default_rng(0).random((120, 2))
    values = np.sin(4 * x) + 0.1 * np.random.default_rng(1).standard_normal((120, 2))
    values[::7, 0] = np.nan
    fitted = GPVAEEngine(epochs=3, neighbours=6, progress=False).fit(x, values)
    assert {p.device.type for p in fitted.model.parameters()} == {"cpu"}
    assert np.isfinite(fitted.predict(samples=4).mean).all()


def test_failed_factorisations_raise_on_cpu_and_turn_nan_without_a_sync():
    good = torch.eye(3, dtype=torch.float64) * 2.0
    bad = torch.tensor([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    cov = torch.stack([good, bad])
    with pytest.raises(torch.linalg.LinAlgError, match="jitter"):
        checked_cholesky(cov)  # CPU: immediate, clear error
    chol = checked_cholesky(cov, eager_check=False)  # what an accelerator gets
    torch.testing.assert_close(chol[0], torch.linalg.cholesky(good))
    assert torch.isnan(chol[1]).all()
    # the solve used by SPA matches a dense solve on good blocks
    rhs = torch.randn(2, 3, 1, dtype=torch.float64)
    torch.testing.assert_close(spd_solve(good.expand(2, 3, 3), rhs), torch.linalg.solve(good, rhs))


class _FakeGpuFaiss:
    """faiss with a pretend GPU: counts the GPU resources made, searches on the CPU."""

    def __init__(self, real):
        self.real, self.made, self.moved = real, 0, 0
        self.IndexFlatL2 = real.IndexFlatL2

    def StandardGpuResources(self):  # faiss's name
        self.made += 1
        return object()

    def get_num_gpus(self):
        return 1

    def index_cpu_to_gpu(self, res, device, index):
        assert device == 0 and res is not None
        self.moved += 1
        return index


def test_faiss_gpu_resources_are_made_once_and_reused(monkeypatch):
    real = pytest.importorskip("faiss")
    fake = _FakeGpuFaiss(real)
    monkeypatch.setattr(nb, "_faiss", lambda: fake)
    nb._gpu_resources.cache_clear()
    try:
        pts = np.random.default_rng(0).random((300, 3))
        assert nb.choose_backend("auto", 3) == "faiss"  # a GPU build is preferred when present
        d1, i1 = nb.knn(pts, 6, backend="faiss")
        nb.knn(pts, 6, backend="faiss", exclude_self=True)
        dk, ik = nb.knn(pts, 6, backend="kdtree")
        assert fake.made == 1 and fake.moved >= 2
        np.testing.assert_allclose(d1, dk, rtol=1e-5, atol=1e-6)
        assert (i1 == ik).mean() > 0.99
    finally:
        nb._gpu_resources.cache_clear()


def test_without_faiss_the_kdtree_serves(monkeypatch):
    monkeypatch.setattr(nb, "_faiss", lambda: None)
    assert nb.choose_backend("auto", 2) == "kdtree"
    with pytest.raises(ImportError, match="faiss"):
        nb.choose_backend("faiss", 2)


@pytest.mark.parametrize("shape,batch", [((9, 8, 5), 64), ((12, 10), 240)])
def test_batches_are_planned_on_the_host_and_gather_the_right_rows(shape, batch):
    x = grid_points(shape)
    rng = np.random.default_rng(1)
    y, observed = rng.normal(size=(len(x), 2)), rng.random((len(x), 2)) > 0.3
    data = field_data(x, y, observed, GPVAEConfig(neighbours=6, context=4), device=torch.device("cpu"),
                         dtype=torch.float64)
    assert data.host("nbr") is data.host("nbr")  # one copy, made once
    idx = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))[:batch]
    plan = batch_plan(data, idx)
    b = gather_batch(data, idx)
    # the batch's own rows and its neighbours' rows point at the right locations
    enc = torch.arange(len(x)) if plan["uniq"] is None else plan["uniq"]
    assert torch.equal(enc[b.batch_pos], idx)
    nbr = data.nbr[idx]
    assert torch.equal(torch.where(b.nbr_valid, enc[b.nbr_pos], -1), torch.where(nbr >= 0, nbr, -1))
    torch.testing.assert_close(b.y[b.batch_pos], data.y[idx])
    torch.testing.assert_close(b.context[b.nbr_pos], data.context[nbr.clamp_min(0)])
    if data.stencil is not None:  # each location's stencil is the one its id names
        used = plan["stencils"]
        assert torch.equal(used[b.stencil_index], data.stencil[idx])


@pytest.mark.parametrize("shape,batch", [((9, 8, 5), 64), ((12, 10), 70), ((6, 5), 30)])
def test_a_plan_packed_into_one_copy_unpacks_to_the_same_tensors(shape, batch):
    """What an accelerator gets (one int64 buffer, unpacked there) equals the host plan, key by
    key, dtype included, with or without distinct rows, stencils or absent neighbours."""
    x = grid_points(shape)
    rng = np.random.default_rng(2)
    y, observed = rng.normal(size=(len(x), 2)), rng.random((len(x), 2)) > 0.3
    data = field_data(x, y, observed, GPVAEConfig(neighbours=6, context=4), device=torch.device("cpu"),
                      dtype=torch.float64)
    short = torch.nonzero((data.nbr < 0).any(1)).flatten()[:2]  # locations with absent neighbours
    rest = torch.randperm(len(x), generator=torch.Generator().manual_seed(1))
    idx = torch.cat([short, rest[~torch.isin(rest, short)]])[:batch]
    plan = batch_plan(data, idx)
    assert not plan["valid"].all()
    packed = plan_to_device(plan, torch.device("cpu"))
    assert packed.keys() == plan.keys()
    for key, value in plan.items():
        if value is None:
            assert packed[key] is None, key
        else:
            assert packed[key].dtype == value.dtype and torch.equal(packed[key], value), key
    # a tensor held under two names (whole-field plans) is copied once
    for a, b in (("idx", "batch_pos"), ("safe", "nbr_pos")):
        assert (plan[a] is plan[b]) == (packed[a] is packed[b]), (a, b)


def test_moment_updates_on_an_accelerator_skip_empty_batches_without_reading_the_flag_back():
    """On an accelerator the "any value hidden?" flag stays on the device and selects the old
    moments (the CPU returns early instead); both give the same moments."""
    from geogpvae.engine.core import GPVAEEngine

    x = np.random.default_rng(0).random((60, 2))
    values = np.sin(3 * x)
    values[::5, 1] = np.nan
    model = GPVAEEngine(epochs=2, neighbours=4, progress=False).fit(x, values).model
    old = torch.rand(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    batch = torch.rand(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    on_cpu, kept, skipped = old.clone(), old.clone(), old.clone()
    model._fold(on_cpu, batch, None)
    model._fold(kept, batch, torch.tensor(True))
    model._fold(skipped, batch, torch.tensor(False))
    assert not torch.equal(on_cpu, old)
    assert torch.equal(kept, on_cpu) and torch.equal(skipped, old)
    # and on the CPU a batch with nothing hidden leaves the moments as they were
    before = model.hidden_moments.clone()
    y = torch.zeros(10, 2, dtype=before.dtype)
    model.update_hidden_moments(y, torch.zeros(10, 2, dtype=torch.bool), torch.zeros(10, model.latent_dim, dtype=y.dtype),
                                torch.ones(10, model.latent_dim, dtype=y.dtype))
    assert torch.equal(model.hidden_moments, before)
