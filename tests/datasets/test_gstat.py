"""The gstat surveys (load_gstat): shapes, values and CF attributes from the real files, and the
checks every loader runs (checksums, missing files) on copies."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from geogpvae.datasets import GSTAT_SURVEYS, ChecksumError, DataFileNotFoundError, load_gstat

data = pytest.mark.data


@pytest.fixture(scope="module")
def gstat_dir(data_dir: Path) -> Path:
    if not (data_dir / "gstat" / "oxford.csv").is_file():
        pytest.skip("the gstat surveys are not in the data directory")
    return data_dir


@data
@pytest.mark.parametrize("name, dim, size, variable", [
    ("oxford", "site", 126, "CEC1"), ("coalash", "site", 208, "coalash"),
    ("fulmar", "site", 1324, "fulmar"), ("pcb", "site", 216, "PCB138")])
def test_scattered_surveys(gstat_dir, name, dim, size, variable):
    ds = load_gstat(name, gstat_dir)
    assert ds[variable].dims == (dim,) and ds.sizes[dim] == size
    assert ds.x.dims == ds.y.dims == (dim,)
    assert np.isfinite(ds.x).all() and np.isfinite(ds.y).all()
    assert ds.attrs["title"] == GSTAT_SURVEYS[name] and "GPL" in ds.attrs["license"]


@data
def test_known_values(gstat_dir):
    coal = load_gstat("coalash", gstat_dir)
    assert (float(coal.x[0]), float(coal.y[0]), float(coal.coalash[0])) == (1.0, 14.0, 10.21)
    ox = load_gstat("oxford", gstat_dir)
    assert float(ox.x[0]) == 100.0 and float(ox.y[0]) == 2100.0 and float(ox.PH1[0]) == 7.7
    assert set(np.unique(load_gstat("fulmar", gstat_dir).year.values)) == {1998, 1999}


@data
def test_the_chloride_network_is_a_time_station_field(gstat_dir):
    ds = load_gstat("tull", gstat_dir)
    assert ds.chloride.dims == ("time", "station") and ds.chloride.shape == (161, 36)
    assert ds.x.dims == ("station",) and ds.station.values[0] == "S411"
    assert ds.time.values[0] == np.datetime64("1992-01-15T23:00:00")
    assert bool((np.diff(ds.time.values) > np.timedelta64(0)).all())
    observed = int(ds.chloride.notnull().sum())
    assert 700 < observed < 800 and ds.chloride.attrs["units"] == "mg l-1"


@data
def test_a_changed_byte_is_refused(gstat_dir, tmp_path):
    folder = tmp_path / "gstat"
    folder.mkdir()
    raw = bytearray((gstat_dir / "gstat" / "coalash.csv").read_bytes())
    raw[-3] = ord("9") if raw[-3] != ord("9") else ord("8")
    (folder / "coalash.csv").write_bytes(bytes(raw))
    with pytest.raises(ChecksumError, match="coalash.csv"):
        load_gstat("coalash", tmp_path)


@data
def test_the_network_needs_its_well_locations(gstat_dir, tmp_path):
    folder = tmp_path / "gstat"
    folder.mkdir()
    shutil.copyfile(gstat_dir / "gstat" / "tull_Chlorid92.csv", folder / "tull_Chlorid92.csv")
    with pytest.raises(DataFileNotFoundError, match="tull_tull36.csv"):
        load_gstat("tull", tmp_path)


def test_missing_files_say_where_to_get_them(tmp_path):
    with pytest.raises(DataFileNotFoundError, match=r"(?s)gstat data not found.*data\(oxford\)"):
        load_gstat("oxford", tmp_path)


def test_unknown_survey():
    with pytest.raises(ValueError, match="unknown gstat survey 'meuse'"):
        load_gstat("meuse")
