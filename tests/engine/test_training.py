"""Training data layout: which ordering and batching the engines use for which locations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from geogpvae.datasets.synthetic import grid_points
from geogpvae.engine.config import GPVAEConfig
from geogpvae.engine.training import epoch_batches, field_data, is_lattice, resolve_layout


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


def test_auto_layout_resolves_by_geometry_and_explicit_choices_win():
    grid = grid_points((8, 8, 4))
    scattered = np.random.default_rng(2).random((256, 3))
    cfg = GPVAEConfig()
    assert (cfg.ordering, cfg.batching) == ("auto", "auto")
    assert resolve_layout(grid, cfg) == ("sorted", "spatial")
    assert resolve_layout(scattered, cfg) == ("random", "random")
    assert resolve_layout(grid, GPVAEConfig(ordering="maxmin", batching="random")) == ("maxmin", "random")
    assert resolve_layout(scattered, GPVAEConfig(batching="spatial")) == ("random", "spatial")


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

    random_cfg = GPVAEConfig(neighbours=8, context=0, ordering="random", batching="random")
    plain = field_data(x, y, observed, random_cfg, device=torch.device("cpu"), dtype=torch.float64)
    assert plain.order is None
    assert plain.stencil is None or len(plain.stencil_offsets) > n_stencils


def test_auto_layout_on_scattered_points_is_random():
    x = np.random.default_rng(3).random((400, 2))
    y, observed = _field(x)
    data = field_data(x, y, observed, GPVAEConfig(neighbours=6, context=0),
                         device=torch.device("cpu"), dtype=torch.float64)
    assert data.order is None
