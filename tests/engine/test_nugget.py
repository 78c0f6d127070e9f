"""The data-driven start of the likelihood variance (the empirical nugget)."""

import numpy as np
import pytest

from geogpvae.datasets.synthetic import grid_points, make_field, sample_gp_rff
from geogpvae.engine.core import GPVAEEngine
from geogpvae.engine.nugget import NUGGET_BOUNDS, nugget


@pytest.mark.parametrize("noise_var", [0.05, 0.2, 0.4])
def test_nugget_recovers_white_noise_on_a_smooth_field(noise_var):
    rng = np.random.default_rng(0)
    x = rng.random((3000, 2))
    smooth = sample_gp_rff(x, 0.3, kernel="matern52", rng=1)[:, 0]
    y = np.sqrt(1 - noise_var) * smooth + np.sqrt(noise_var) * rng.standard_normal(3000)
    y = (y - y.mean()) / y.std()
    observed = np.ones((3000, 1), dtype=bool)
    est = nugget(x, y[:, None], observed)
    assert est[0] == pytest.approx(noise_var, rel=0.3, abs=0.02)


def test_nugget_ignores_missing_values_and_handles_sparse_variables():
    rng = np.random.default_rng(2)
    x = rng.random((500, 2))
    y = rng.standard_normal((500, 2))
    observed = rng.random((500, 2)) > 0.4
    observed[:, 1] = False
    observed[:3, 1] = True  # too few values to estimate: the upper bound
    poisoned = np.where(observed, y, 1e6)
    a = nugget(x, poisoned, observed)
    b = nugget(x, np.where(observed, y, 0.0), observed)
    np.testing.assert_array_equal(a, b)
    assert a[1] == 0.5
    assert a[0] == 0.5  # white noise of unit variance: the estimate hits the upper bound


def test_engine_starts_noise_at_the_nugget_unless_given():
    f = make_field(grid_points((12, 12), 1 / 11), n_vars=2, missing=0.3, noise=0.3, rng=0)
    auto = GPVAEEngine(epochs=1, progress=False, calibrate=False).fit(f.points, f.values)
    y = auto._y
    want = nugget(f.points, y, auto._observed, bounds=(0.01, 0.5))
    np.testing.assert_allclose(auto.noise_start_, want)
    np.testing.assert_allclose(auto.model.noise_var.detach().numpy(), want, rtol=0.05)
    given = GPVAEEngine(epochs=1, progress=False, calibrate=False, noise=0.2).fit(f.points, f.values)
    np.testing.assert_allclose(given.model.noise_var.detach().numpy(), 0.2, rtol=0.05)
    np.testing.assert_array_equal(given.noise_start_, [0.2, 0.2])
    # the range of the start: NUGGET_BOUNDS
    assert (auto.noise_start_ >= NUGGET_BOUNDS[0]).all() and NUGGET_BOUNDS == (0.01, 0.5)
    low = nugget(f.points, y, auto._observed, bounds=(0.3, 0.5))
    assert (low >= 0.3).all()
