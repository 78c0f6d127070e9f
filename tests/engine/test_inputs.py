"""The engine's input checks and standardisation, on their own."""

from __future__ import annotations

import numpy as np
import pytest

from geogpvae.engine.inputs import (
    centre,
    check_coordinates,
    check_standardised,
    constant_values,
    missing_code_warnings,
    real_values,
    standardisation,
)
from geogpvae.errors import InputError


def test_coordinates_must_be_finite_and_two_dimensional():
    x = np.zeros((4, 2))
    assert check_coordinates(x).dtype == np.float64
    x[2, 1] = np.nan
    with pytest.raises(InputError, match=r"coordinate 1 has 1 NaN .* \(first at location 2\)"):
        check_coordinates(x)
    with pytest.raises(InputError, match=r"new locations must have shape \(N, D\)"):
        check_coordinates(np.zeros(3), "new locations")


def test_centre_is_the_middle_of_the_range():
    x = np.array([[1e8, 0.0], [1e8 + 4.0, 10.0], [1e8 + 1.0, 2.0]])
    np.testing.assert_array_equal(centre(x), [1e8 + 2.0, 5.0])
    assert centre(np.zeros((0, 3))).tolist() == [0.0, 0.0, 0.0]


def test_values_must_be_real():
    assert real_values(np.arange(3, dtype=np.int16), None).dtype == np.float64
    with pytest.raises(InputError, match="complex"):
        real_values(np.ones(3, dtype=complex), None)
    with pytest.raises(InputError, match="real numbers"):
        real_values(np.array(["a", "b"]), None)


def test_standardisation_of_observed_values_in_their_space():
    values = np.array([[1.0, 10.0], [3.0, 100.0], [np.nan, 1000.0], [5.0, np.nan]])
    observed = np.isfinite(values)
    loc, scale = standardisation(values, observed, np.array([False, True]), ["a", "b"])
    np.testing.assert_allclose(loc, [3.0, np.log(100.0)])
    np.testing.assert_allclose(scale, [np.std([1.0, 3.0, 5.0]), np.std(np.log([10.0, 100.0, 1000.0]))])
    # a constant variable keeps scale 1
    _, scale = standardisation(np.ones((3, 1)), np.ones((3, 1), bool), np.array([False]), ["c"])
    assert scale.tolist() == [1.0]


@pytest.mark.parametrize("unit", [1e-170, 1e-300, 1e170, 1e290])
def test_standardisation_keeps_the_spread_of_tiny_and_huge_values(unit):
    # squares of these underflow to 0 or overflow to inf; the spread must survive either way
    values = np.array([[1.0], [3.0], [np.nan], [5.0]]) * unit
    loc, scale = standardisation(values, np.isfinite(values), np.array([False]), ["v"])
    np.testing.assert_allclose(loc, [3.0 * unit], rtol=1e-12)
    np.testing.assert_allclose(scale, [np.std([1.0, 3.0, 5.0]) * unit], rtol=1e-12)


def test_values_over_eleven_decades_in_linear_units_are_accepted():
    # like SPE10's kz in mD (6.7e-8 to 6,000): heavy tails are data, not outliers
    values = 10.0 ** np.random.default_rng(0).uniform(-7.2, 3.8, size=(10_000, 1))
    loc, scale = standardisation(values, np.ones_like(values, bool), np.array([False]), ["kz"])
    assert np.isfinite(loc).all() and np.isfinite(scale).all()


def test_values_beyond_float64_headroom_are_refused():
    with pytest.raises(InputError, match=r"big: observed values as large as 1e\+305 leave no room"):
        standardisation(np.array([[1e305], [-1e305]]), np.ones((2, 1), bool), np.array([False]), ["big"])


def test_constant_values_are_found_per_variable():
    values = np.array([[2.5, 1.0, np.nan], [np.nan, 1.0, 7.0], [2.5, 1.0 + 1e-15, np.nan]])
    got = constant_values(values, np.isfinite(values))
    assert got[0] == 2.5 and np.isnan(got[1]) and got[2] == 7.0


def test_standardised_values_far_out_are_refused():
    check_standardised(np.array([[0.0, 1e14]]), ["a", "b"])
    with pytest.raises(InputError, match="b: values lie more than 1e15 standard deviations"):
        check_standardised(np.array([[0.0, 1e16]]), ["a", "b"])


def test_a_missing_value_code_among_the_data_is_named():
    rng = np.random.default_rng(0)
    v = rng.uniform(0.0, 100.0, (50, 4))
    v[:4, 0] = -9999.0  # codes beyond the others: warned, both of them
    v[4:6, 0] = 9999.0
    v[:3, 1] = -999.0  # inside the others' range (say, depths down to -2000 m): data
    v[:, 1] *= 20
    v[3:, 1] -= 2000
    v[:, 2] *= 10
    v[:2, 2] = 999.0  # at the top of the others' range (0 to 1000): data
    v[:, 3] /= 50
    v[0, 3] = 99.0  # far out, but 99 (like 9) is too often a real value to be called a code
    (text,) = missing_code_warnings(v, np.isfinite(v), ["a", "b", "c", "d"])
    assert text.startswith("a: -9999 (4 values), 9999 (2 values) far outside the other values")
    assert "ds['a'] = ds['a'].where(ds['a'] != -9999)" in text and "_FillValue" in text
