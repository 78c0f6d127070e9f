"""The scores benchmark scripts print are the ones their docs describe (checked on small arrays)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stations():
    spec = importlib.util.spec_from_file_location("stations_bench", REPO / "benchmarks" / "stations.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_station_coverage_counts_each_stations_own_hidden_values(stations):
    truth = np.array([[0.0, 0.0], [0.0, 3.0], [5.0, 0.0], [1.0, 1.0]])
    hidden = np.array([[1, 1], [1, 1], [0, 0], [0, 1]], dtype=bool)
    cov = stations.station_coverage(np.zeros((4, 2)), np.ones((4, 2)), truth, hidden)
    # station 0: both hidden values inside (the 5.0 miss is not hidden); station 1: 0 and 1 inside, 3 outside
    np.testing.assert_allclose(cov, [1.0, 2 / 3])
    none = stations.station_coverage(np.zeros((4, 2)), np.ones((4, 2)), truth, hidden & [True, False])
    assert np.isnan(none[1])


def test_calibrated_band_share_is_the_binomial_chance_of_landing_in_the_band(stations):
    from scipy.stats import binom

    # 28 values: only 26 or 27 covered gives a cov95 within 0.90-0.98 (28 of 28 is 1.0, 25 is 0.893)
    expected = binom.pmf(26, 28, 0.95) + binom.pmf(27, 28, 0.95)
    assert stations.calibrated_band_share(np.array([28])) == pytest.approx(expected)
    assert stations.calibrated_band_share(np.array([0, 28])) == pytest.approx(expected)  # no values: left out
    assert stations.calibrated_band_share(np.array([100_000])) == pytest.approx(1.0)
