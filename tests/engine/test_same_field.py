"""Tests of geogpvae.engine.same_field: the training field is recognised in any row order and
through float32, and nothing else is."""

from __future__ import annotations

import numpy as np
import pytest

from geogpvae.engine.same_field import matching_rows


def _field(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.column_stack([4.2e5 + 3e4 * rng.random(n), 5.1e6 + 3e4 * rng.random(n)])  # UTM metres
    values = np.column_stack([rng.normal(280.0, 5.0, n), rng.lognormal(0.0, 2.0, n)])
    values[rng.random(values.shape) < 0.3] = np.nan
    return x, values


def test_a_reordered_copy_gives_the_permutation_back():
    x, values = _field()
    order = np.random.default_rng(1).permutation(len(x))
    rows = matching_rows(x, values, x[order], values[order])
    np.testing.assert_array_equal(rows, order)


def test_a_copy_through_float32_is_recognised():
    x, values = _field()
    order = np.random.default_rng(2).permutation(len(x))
    x32 = x.astype(np.float32).astype(float)[order]
    v32 = values.astype(np.float32).astype(float)[order]
    assert not np.array_equal(x32, x[order]) and not np.array_equal(v32[:, 0], values[order, 0], equal_nan=True)
    np.testing.assert_array_equal(matching_rows(x, values, x32, v32), order)


def _changed(kind: str, x: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x, values = x.copy(), values.copy()
    i = int(np.flatnonzero(np.isfinite(values[:, 0]))[0])
    if kind == "value":  # one observed value, in its fifth digit
        values[i, 0] *= 1.0 + 1e-5
    elif kind == "gap moved":  # a value moved into a gap: the same values, other places
        k, j = (int(np.flatnonzero(m)[0]) for m in (np.isfinite(values[:, 1]), np.isnan(values[:, 1])))
        values[j, 1], values[k, 1] = values[k, 1], np.nan
    elif kind == "gap filled":
        values[np.flatnonzero(np.isnan(values[:, 0]))[0], 0] = 280.0
    elif kind == "location":  # one site moved by 50 m (float32 rounds these to 0.5 m)
        x[i, 0] += 50.0
    elif kind == "repeated location":  # two sites at one place cannot be told apart
        x[1] = x[0]
        values[1] = values[0]
    elif kind == "columns swapped":
        values = values[:, ::-1]
    return x, values


@pytest.mark.parametrize("kind", ["value", "gap moved", "gap filled", "location", "columns swapped"])
def test_another_field_is_not_taken_for_the_training_field(kind):
    x, values = _field()
    other_x, other_values = _changed(kind, x, values)
    assert matching_rows(x, values, other_x, other_values) is None


def test_repeated_locations_are_not_matched():
    x, values = _field()
    x, values = _changed("repeated location", x, values)
    assert matching_rows(x, values, x, values) is None


def test_fields_of_other_shapes_are_not_matched():
    x, values = _field()
    assert matching_rows(x, values, x[:-1], values[:-1]) is None
    assert matching_rows(x, values, x, values[:, :1]) is None


def test_a_regional_lon_lat_field_through_float32_is_recognised_near_90_east():
    """On the sphere, the x column of a grid near 90 degrees east is tiny; float32 rounds the
    lon/lat, and so the positions, on the sphere's scale."""
    from geogpvae.fields.geometry import sphere_positions

    lon, lat = np.meshgrid(np.linspace(89.0, 91.0, 15), np.linspace(30.0, 32.0, 12))
    values = np.random.default_rng(3).normal(size=(lon.size, 2))
    x = sphere_positions(lon.ravel(), lat.ravel())
    x32 = sphere_positions(lon.ravel().astype(np.float32).astype(float), lat.ravel().astype(np.float32).astype(float))
    assert not np.array_equal(x, x32)
    np.testing.assert_array_equal(matching_rows(x, values, x32, values), np.arange(lon.size))


def test_rows_that_rounding_reorders_are_matched_by_their_nearest_location():
    """Sorting finds most copies; where rounding swaps two nearly equal coordinates, the
    nearest-location match takes over."""
    x = np.array([[0.0, 5.0], [2e-7, 0.0], [4.0, 1.0], [10.0, 3.0]])
    values = np.arange(8.0).reshape(4, 2)
    copy = x.copy()
    copy[0, 0] = 3e-7  # within the tolerance (1e-6 * 10), but now sorts after row 1
    order = np.array([3, 1, 0, 2])
    np.testing.assert_array_equal(matching_rows(x, values, copy[order], values[order]), order)
