"""Every figure test runs offline and sees the once-per-process warnings anew.

The fixtures themselves are in tests/conftest.py: tests/cli/test_plot.py uses them too.
"""

import pytest


@pytest.fixture(autouse=True)
def _offline_figures(_no_network_and_fresh_warnings):
    return _no_network_and_fresh_warnings
