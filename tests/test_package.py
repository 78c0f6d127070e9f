"""The package as ``import geogpvae`` presents it."""

import subprocess
import sys


def test_plot_is_reachable_after_a_plain_import():
    code = ("import sys, geogpvae; assert 'geogpvae.plot' not in sys.modules; "
            "print(geogpvae.plot.layers.__name__, geogpvae.to_netcdf.__name__)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["layers", "to_netcdf"]
