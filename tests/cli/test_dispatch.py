"""Exit codes of the ``geogpvae`` command: usage errors and bad input exit 2 with one line, other
failures 1, ``--debug`` shows the traceback, a closed pipe is no error (geogpvae/cli/dispatch.py)."""

from __future__ import annotations

import pytest
import torch
from cli_helpers import TINY, _error_line, _no_training

from geogpvae.api import GPVAEImputer
from geogpvae.cli import main


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "choose a command" in _error_line(capsys)


@pytest.mark.parametrize(
    "case, words",
    [
        ("unknown_var", ["'nope'", "available: v0, v1, v2"]),
        ("missing_file", ["not found"]),
        ("missing_pattern", ["no file matches"]),
        ("bad_option", ["unknown option", "foo"]),
        ("bad_option_syntax", ["KEY=VALUE"]),
        ("bad_option_value", ["batch_size"]),
        ("retired_option", ["the option members is no longer available", "got members=2"]),
        ("widths_as_text", ["encoder_hidden must be a list of integers", "--option encoder_hidden=[...]"]),
        ("seed_twice", ["seed is given twice", "--seed 5 and --option seed=3", "give it once"]),
        ("seed_twice_in_file", ["seed is given twice", "seed = 1 and [options] seed = 2"]),
        ("out_exists", ["already exists", "--overwrite"]),
        ("out_is_in", ["is the input file", "never writes over"]),
        ("out_links_to_in", ["is the input file"]),
        ("no_folder", ["does not exist"]),
        ("bad_engine", ["invalid choice", "--engine"]),
        ("bad_config_key", ["unknown key", "colour"]),
        ("resume_without_folder", ["--resume needs --checkpoint-dir"]),
        ("too_few_points", ["fewer than neighbours + 1"]),
        ("only_output", ["input file(s) and then the output"]),
        ("cuda_missing", ["cuda"]),
    ],
)
def test_bad_input_exits_2_with_one_line(case, words, data, tmp_path, capsys, monkeypatch):
    grid = str(data["grid"])
    out = tmp_path / "out.nc"
    args = {
        "unknown_var": [grid, str(out), "--vars", "v0,nope"],
        "missing_file": [str(tmp_path / "absent.nc"), str(out)],
        "missing_pattern": [str(tmp_path / "none*.nc"), str(out)],
        "bad_option": [grid, str(out), "--option", "foo=1"],
        "bad_option_syntax": [grid, str(out), "--option", "batch_size"],
        "bad_option_value": [grid, str(out), "--option", "batch_size=-3"],
        "retired_option": [grid, str(out), "--option", "members=2"],
        "widths_as_text": [grid, str(out), "--option", "encoder_hidden=64,64"],
        "seed_twice": [grid, str(out), "--seed", "5", "--option", "seed=3"],
        "seed_twice_in_file": [grid, str(out), "--config", str(tmp_path / "seeds.toml")],
        "out_exists": [grid, str(data["out"])],
        "out_is_in": [grid, grid, "--overwrite"],
        "out_links_to_in": [grid, str(tmp_path / "link.nc"), "--overwrite"],
        "no_folder": [grid, str(tmp_path / "no" / "out.nc")],
        "bad_engine": [grid, str(out), "--engine", "krige"],
        "bad_config_key": [grid, str(out), "--config", str(tmp_path / "bad.toml")],
        "resume_without_folder": [grid, str(out), "--resume"],
        "too_few_points": [grid, str(out), "--neighbours", "300"],
        "only_output": [str(out)],
        "cuda_missing": [grid, str(out), "--device", "cuda"],
    }[case]
    if case == "out_links_to_in":
        (tmp_path / "link.nc").symlink_to(grid)
    if case == "bad_config_key":
        (tmp_path / "bad.toml").write_text('colour = "red"\n')
    if case == "seed_twice_in_file":
        (tmp_path / "seeds.toml").write_text("seed = 1\n[options]\nseed = 2\n")
    if case == "cuda_missing" and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    monkeypatch.setattr(GPVAEImputer, "fit_field", _no_training)
    before = data["out"].stat().st_mtime_ns
    assert main(["impute", *args, "--epochs", "1", "-q"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("geogpvae: error: "), err
    for word in words:
        assert word in lines[0]
    assert "Traceback" not in err
    assert not out.exists()
    assert data["out"].stat().st_mtime_ns == before


def test_debug_shows_the_traceback(data, tmp_path, capsys):
    out = tmp_path / "out.nc"
    assert main(["impute", str(data["grid"]), str(out), "--vars", "nope", "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_other_failures_exit_1(data, tmp_path, capsys, monkeypatch):
    def explode(*args, **kwargs):
        raise FloatingPointError("training diverged at epoch 2")

    monkeypatch.setattr(GPVAEImputer, "fit_field", explode)
    assert main(["impute", str(data["grid"]), str(tmp_path / "o.nc"), *TINY]) == 1
    assert "training diverged" in _error_line(capsys)
    assert not (tmp_path / "o.nc").exists()


def test_a_reader_that_stops_early_is_not_an_error(data, capsys, monkeypatch):
    import geogpvae.cli.parser as cli_parser

    def closed(args, argv):
        raise BrokenPipeError(32, "Broken pipe")  # as print() into `| head` raises

    monkeypatch.setattr(cli_parser, "cmd_info", closed)
    monkeypatch.setattr("geogpvae.cli.dispatch._quiet_stdout", lambda: None)
    assert main(["info", str(data["grid"])]) == 141
    assert capsys.readouterr().err == ""
