"""Tests of geogpvae.fields.torch_files: saving torch files atomically."""

from __future__ import annotations

import pytest

from geogpvae.fields import torch_files


def test_atomic_torch_save_refuses_to_overwrite_and_leaves_no_temporary_file(tmp_path):
    import torch

    target = tmp_path / "state.pt"
    assert torch_files.atomic_torch_save({"a": torch.arange(3)}, target) == target
    before = target.read_bytes()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        torch_files.atomic_torch_save({"a": 1}, target)
    assert target.read_bytes() == before
    torch_files.atomic_torch_save({"a": 2}, target, overwrite=True)
    assert torch.load(target, weights_only=True) == {"a": 2}
    with pytest.raises(FileNotFoundError, match="does not exist"):
        torch_files.atomic_torch_save({"a": 1}, tmp_path / "missing" / "x.pt")
    with pytest.raises(IsADirectoryError):
        torch_files.atomic_torch_save({"a": 1}, tmp_path, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.pt"]
