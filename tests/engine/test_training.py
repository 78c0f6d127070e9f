"""Training data layout: which ordering and batching the engines use for which locations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from geogpvae.datasets.synthetic import grid_points
from geogpvae.engine.batches import epoch_batches
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.data import context_index, field_data, gather_batch, is_lattice, neighbourhood_context, resolve_layout, visible_context, with_context_hiding


def _field(x, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.normal(size=(len(x), 2))
    observed = rng.random((len(x), 2)) > 0.3
    return y, observed


@pytest.mark.parametrize("shape", [(12, 9), (5, 7, 6), (40,)])
def test_full_grids_are_lattices(shape):
    assert is_lattice(grid_points(shape))


def test_masked_and_scaled_grids_are_lattices():
    x = grid_points((10, 20)) * np.array([10.0, 0.5]) + np.array([300.0, -2.0])
    keep = np.random.default_rng(0).random(len(x)) > 0.4  # 40% of the cells inactive
    assert is_lattice(x[keep])


def test_scattered_and_irregular_points_are_not_lattices():
    rng = np.random.default_rng(1)
    assert not is_lattice(rng.random((300, 2)))
    # a tensor grid with irregular spacing along one axis: geometries do not repeat
    gx, gy = np.meshgrid(np.cumsum(rng.random(12) + 0.1), np.arange(10.0), indexing="ij")
    assert not is_lattice(np.column_stack([gx.ravel(), gy.ravel()]))
    # a quarter-filled grid is too sparse to count
    x = grid_points((20, 20))
    assert not is_lattice(x[rng.random(len(x)) < 0.25])


def test_auto_layout_resolves_by_geometry_and_an_explicit_ordering_wins():
    grid = grid_points((8, 8, 4))
    scattered = np.random.default_rng(2).random((256, 3))
    cfg = GPVAEConfig()
    assert cfg.ordering == "auto"
    assert resolve_layout(grid, cfg) == ("sorted", "spatial")
    assert resolve_layout(scattered, cfg) == ("random", "random")
    assert resolve_layout(grid, GPVAEConfig(ordering="maxmin")) == ("maxmin", "spatial")
    # scattered locations trained in mini-batches get compact batches; whole-field steps keep theirs
    assert resolve_layout(scattered, GPVAEConfig(batch_size=64)) == ("random", "spatial")
    assert resolve_layout(scattered, GPVAEConfig(batch_size=256)) == ("random", "random")
    many = np.random.default_rng(4).random((3000, 2))
    assert resolve_layout(many, cfg) == ("random", "spatial")


def test_auto_layout_on_a_grid_shares_prior_factorisations_and_batches_compactly():
    x = grid_points((10, 12, 6))
    y, observed = _field(x)
    cfg = GPVAEConfig(neighbours=8, context=0)
    data = field_data(x, y, observed, cfg, device=torch.device("cpu"), dtype=torch.float64)
    assert data.stencil is not None and data.order is not None
    n_stencils = len(data.stencil_offsets)
    assert n_stencils < len(x) / 4  # geometries repeat
    # every location is visited exactly once per epoch
    batches = epoch_batches(data.n, 100, seed=0, epoch=3, order=data.order)
    assert torch.equal(torch.sort(torch.cat(batches)).values, torch.arange(data.n))

    random_cfg = GPVAEConfig(neighbours=8, context=0, ordering="random")
    plain = field_data(x, y, observed, random_cfg, device=torch.device("cpu"), dtype=torch.float64)
    assert plain.stencil is None or len(plain.stencil_offsets) > n_stencils


def test_auto_layout_on_scattered_points_is_random_for_whole_field_steps_and_compact_for_mini_batches():
    x = np.random.default_rng(3).random((400, 2))
    y, observed = _field(x)
    data = field_data(x, y, observed, GPVAEConfig(neighbours=6, context=0),
                         device=torch.device("cpu"), dtype=torch.float64)
    assert data.order is None
    data = field_data(x, y, observed, GPVAEConfig(neighbours=6, context=0, batch_size=50),
                      device=torch.device("cpu"), dtype=torch.float64)
    assert data.order is not None
    # compact batches: their neighbours overlap, so fewer distinct locations are encoded per batch
    batches = epoch_batches(data.n, 50, seed=0, epoch=0, order=data.order)
    assert torch.equal(torch.sort(torch.cat(batches)).values, torch.arange(data.n))
    compact = np.mean([len(torch.unique(torch.cat([b, data.nbr[b].clamp_min(0).reshape(-1)]))) for b in batches])
    loose = np.mean([len(torch.unique(torch.cat([b, data.nbr[b].clamp_min(0).reshape(-1)])))
                     for b in epoch_batches(data.n, 50, seed=0, epoch=0)])
    assert compact < 0.8 * loose


def _context_case(seed=0, n=200, k=3):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 2))
    observed = rng.random((n, k)) < 0.7
    y = np.where(observed, rng.normal(size=(n, k)), 0.0)
    hidden = observed & (rng.random((n, k)) < 0.3)
    return x, y, observed, hidden


@pytest.mark.parametrize("n", [200, 7])  # 7: fewer locations than the widest context
def test_visible_context_equals_the_context_built_without_the_hidden_values(n):
    """Every location encoded: the adjusted context is the one rebuilt as if the hidden values were missing."""
    x, y, observed, hidden = _context_case(n=n)
    hidden[0] = observed[0]  # at least one value hidden
    scales = (4, 8)
    index = context_index(x, scales)
    full = neighbourhood_context(x, y, observed, scales, index=index)
    expected = neighbourhood_context(x, np.where(hidden, 0.0, y), observed & ~hidden, scales, index=index)
    rows = torch.tensor(np.where(index >= 0, index, len(x)))
    got = visible_context(torch.tensor(full), rows, torch.tensor(y), torch.tensor(hidden), scales)
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-12)
    assert not np.allclose(full, expected)  # the hiding does change the context


@pytest.mark.parametrize("variables", [(True, True, True), (False, True, False)])
def test_gathered_batches_hide_their_hidden_values_from_every_context(variables):
    """Mini-batches: the context of each encoded location equals the rebuilt one, hidden values
    being those of the encoded locations (of the variables named); hiding off leaves the stored context."""
    x, y, observed, _ = _context_case(seed=1, n=300)
    cfg = GPVAEConfig(neighbours=6, context=(4, 8))
    plain_data = field_data(x, y, observed, cfg, device=torch.device("cpu"), dtype=torch.float64)
    assert plain_data.context_index is None  # kept only where the hiding uses it
    data = with_context_hiding(plain_data, context_index(x, (4, 8)), (4, 8), np.array(variables), share=1.0)
    idx = torch.arange(0, 300, 7)
    torch.manual_seed(3)
    batch = gather_batch(data, idx, mask_rate=0.4)
    uniq = torch.unique(torch.cat([idx, data.nbr[idx].clamp_min(0).reshape(-1)])).numpy()
    assert len(uniq) == batch.y.shape[0] < 300  # only part of the field is encoded
    hidden = np.zeros_like(observed)
    hidden[uniq] = (batch.observed & ~batch.visible).numpy() & np.array(variables)
    assert hidden.any()
    expected = neighbourhood_context(x, np.where(hidden, 0.0, y), observed & ~hidden, (4, 8))[uniq]
    np.testing.assert_allclose(batch.context.numpy(), expected, atol=1e-12)
    plain = gather_batch(plain_data, idx, mask_rate=0.4)
    np.testing.assert_allclose(plain.context.numpy(), data.context[uniq].numpy())


def test_a_share_of_the_hidden_values_leaves_the_context():
    """With ``context_hiding_share`` 0.5, about half the hidden values leave the context: every
    fraction lies between the full hiding's and the stored one, and about half the removals happen."""
    x, y, observed, _ = _context_case(seed=2, n=400)
    cfg = GPVAEConfig(neighbours=6, context=8)
    plain = field_data(x, y, observed, cfg, device=torch.device("cpu"), dtype=torch.float64)
    every = with_context_hiding(plain, context_index(x, 8), (8,), np.ones(3, bool), share=1.0)
    half = with_context_hiding(plain, context_index(x, 8), (8,), np.ones(3, bool), share=0.5)
    idx = torch.arange(400)
    shares = []
    for data in (every, half):
        torch.manual_seed(5)  # the same values hidden from the encoder
        shares.append(gather_batch(data, idx, mask_rate=0.3).context[:, 3:6].numpy())
    stored = plain.context[:, 3:6].numpy()
    assert np.all(shares[0] <= shares[1] + 1e-12) and np.all(shares[1] <= stored + 1e-12)
    removed = (stored - shares[1]).sum() / (stored - shares[0]).sum()
    assert 0.35 < removed < 0.65
