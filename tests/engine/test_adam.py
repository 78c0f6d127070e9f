"""FusedAdam against torch.optim.Adam(fused=True): the same steps, bit for bit, and the same state."""

from __future__ import annotations

import copy

import pytest
import torch

from geogpvae.engine.adam import FusedAdam


def _model(dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)).to(dtype)


def _groups(model: torch.nn.Module, extra: torch.nn.Parameter) -> list[dict]:
    return [{"params": list(model.parameters()), "scale": 1.0}, {"params": [extra], "scale": 10.0, "lr": 0.05}]


def _train(model, extra, opt, steps: int, start: int = 0) -> list[float]:
    """A few steps with changing rates; ``extra`` gets a gradient only on every third step."""
    losses = []
    for i in range(start, start + steps):
        gen = torch.Generator().manual_seed(i)
        x = torch.randn(16, 3, generator=gen, dtype=extra.dtype)
        loss = model(x).pow(2).mean()
        if i % 3 == 0:
            loss = loss + (extra.sum() - 1.0) ** 2
        opt.zero_grad(set_to_none=True)
        loss.backward()
        for group in opt.param_groups:
            group["lr"] = 0.01 * (1 + i % 4) * group["scale"]
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def _pair(dtype):
    runs = []
    for cls in (FusedAdam, lambda g, lr: torch.optim.Adam(g, lr=lr, fused=True)):
        model, extra = _model(dtype), torch.nn.Parameter(torch.tensor([0.3, -0.2], dtype=dtype))
        runs.append((model, extra, cls(_groups(model, extra), lr=0.01)))
    return runs


def _same(a, b) -> None:
    for p, q in zip(list(a[0].parameters()) + [a[1]], list(b[0].parameters()) + [b[1]]):
        assert torch.equal(p, q)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_steps_equal_torch_fused_adam_bit_for_bit(dtype):
    ours, theirs = _pair(dtype)
    assert _train(*ours, 12) == _train(*theirs, 12)
    _same(ours, theirs)
    assert not torch.equal(ours[1], torch.tensor([0.3, -0.2], dtype=dtype))  # it did train
    mine, ref = ours[2].state_dict(), theirs[2].state_dict()
    assert [{k: v for k, v in g.items()} for g in mine["param_groups"]] == ref["param_groups"]
    assert mine["state"].keys() == ref["state"].keys()
    for i, s in ref["state"].items():
        for key, value in s.items():
            assert torch.equal(mine["state"][i][key], value) and mine["state"][i][key].dtype == value.dtype


def test_state_moves_between_the_two_optimisers():
    """A checkpoint of either resumes in the other and goes on as the uninterrupted run would."""
    ours, theirs = _pair(torch.float32)
    _train(*ours, 5)
    _train(*theirs, 5)
    # swap: torch's state into ours and ours into torch's, on copies of the weights
    ours_copy, theirs_copy = _pair(torch.float32)
    for src, dst in ((ours, theirs_copy), (theirs, ours_copy)):
        dst[0].load_state_dict(src[0].state_dict())
        dst[1].data.copy_(src[1])
        dst[2].load_state_dict(copy.deepcopy(src[2].state_dict()))  # as from a checkpoint file
        assert [g["lr"] for g in dst[2].param_groups] == [g["lr"] for g in src[2].param_groups]
    _train(*ours, 6, start=5)
    _train(*ours_copy, 6, start=5)
    _train(*theirs_copy, 6, start=5)
    _same(ours, ours_copy)
    _same(ours, theirs_copy)


def test_zero_grad_and_refusals():
    model, extra = _model(torch.float32), torch.nn.Parameter(torch.ones(2))
    opt = FusedAdam(_groups(model, extra), lr=0.01)
    model(torch.ones(1, 3)).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert all(torch.count_nonzero(p.grad) == 0 for p in model.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    with pytest.raises(ValueError, match="other parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": opt.state_dict()["param_groups"][:1]})
    with pytest.raises(ValueError, match="float32/float64"):
        FusedAdam([{"params": [torch.nn.Parameter(torch.ones(2, dtype=torch.float16))]}], lr=0.1)


def test_builds_without_the_fused_kernel_fall_back_to_torch_optim(monkeypatch):
    from geogpvae.engine import adam
    from geogpvae.engine.config import GPVAEConfig
    from geogpvae.engine.model import GPVAE
    from geogpvae.engine.training import TrainState, _optimizer

    p = torch.zeros(3)
    monkeypatch.setattr(adam, "_PROBED", {})
    assert adam.fused_supported(p)  # this build has it
    monkeypatch.setattr(adam, "_PROBED", {})
    monkeypatch.delattr(torch, "_fused_adam_")  # as torch 2.1-2.3 on the CPU
    assert not adam.fused_supported(p)
    opt = _optimizer(GPVAE(2, 2, 2, context_dim=0), GPVAEConfig(), TrainState(), 100)
    assert isinstance(opt, torch.optim.Adam)
