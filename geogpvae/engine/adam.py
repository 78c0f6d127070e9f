"""Adam with torch's fused kernel and none of ``torch.optim``'s per-step Python overhead.

:class:`FusedAdam` calls ``torch._fused_adam_`` on the same state as
``torch.optim.Adam(fused=True)``: the same steps bit for bit and the same ``state_dict`` layout.
No weight decay, AMSGrad, ``maximize`` or gradient scaling; ``group["lr"]`` is set by the caller.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

__all__ = ["FusedAdam", "fused_supported"]

#: the hyperparameters torch.optim.Adam keeps in every group (and in its state_dict)
_GROUP_DEFAULTS = dict(betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False, foreach=None,
                       capturable=False, differentiable=False, fused=True, decoupled_weight_decay=False)


_PROBED: dict[str, bool] = {}


def _kernel_runs(device_type: str) -> bool:
    """Whether this torch build has the fused Adam kernel for ``device_type`` (tried once)."""
    if device_type not in _PROBED:
        try:
            p = torch.zeros(1, device=device_type)
            torch._fused_adam_([p], [torch.ones_like(p)], [torch.zeros_like(p)], [torch.zeros_like(p)], [],
                               [torch.ones((), device=device_type)], amsgrad=False, lr=0.1, beta1=0.9, beta2=0.999,
                               weight_decay=0.0, eps=1e-8, maximize=False, grad_scale=None, found_inf=None)
            _PROBED[device_type] = bool(torch.isfinite(p).all())
        except (AttributeError, RuntimeError, NotImplementedError):
            _PROBED[device_type] = False
    return _PROBED[device_type]


def fused_supported(param: torch.Tensor) -> bool:
    """Whether the fused kernel serves ``param`` (CPU or CUDA, float32 or float64)."""
    return (param.device.type in ("cpu", "cuda") and param.dtype in (torch.float32, torch.float64)
            and _kernel_runs(param.device.type))


class FusedAdam:
    """Adam over parameter groups, as ``torch.optim.Adam(groups, lr=lr, fused=True)`` computes it.

    Parameters
    ----------
    groups : iterable of dict
        Each with ``"params"``; other entries (e.g. ``"scale"``) are kept.
    lr : float
        Learning rate of every group that does not give its own ``"lr"``.
    """

    def __init__(self, groups: Iterable[dict[str, Any]], lr: float) -> None:
        self.param_groups: list[dict[str, Any]] = []
        for group in groups:
            params = list(group["params"])
            bad = [tuple(p.shape) for p in params if not fused_supported(p)]
            if bad:
                raise ValueError(f"FusedAdam needs float32/float64 parameters on the CPU or CUDA; got {bad}")
            self.param_groups.append({"lr": lr, **_GROUP_DEFAULTS, **group, "params": params})
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients (``None``, or zeros with ``set_to_none=False``)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach_().zero_()

    def _state(self, p: torch.Tensor) -> dict[str, torch.Tensor]:
        state = self.state.get(p)
        if state is None:  # as torch.optim.Adam(fused=True) starts a parameter
            state = self.state[p] = {
                "step": torch.zeros((), dtype=torch.float32, device=p.device),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
            }
        return state

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step for every parameter that has a gradient."""
        for group in self.param_groups:
            by_kind: dict[tuple, list[torch.Tensor]] = {}
            for p in group["params"]:
                if p.grad is not None:
                    by_kind.setdefault((p.device, p.dtype), []).append(p)
            beta1, beta2 = group["betas"]
            for params in by_kind.values():
                states = [self._state(p) for p in params]
                steps = [s["step"] for s in states]
                torch._foreach_add_(steps, 1)
                torch._fused_adam_(params, [p.grad for p in params], [s["exp_avg"] for s in states],
                                   [s["exp_avg_sq"] for s in states], [], steps, amsgrad=False, lr=float(group["lr"]),
                                   beta1=beta1, beta2=beta2, weight_decay=group["weight_decay"], eps=group["eps"],
                                   maximize=False, grad_scale=None, found_inf=None)

    def state_dict(self) -> dict[str, Any]:
        """The state in ``torch.optim.Optimizer.state_dict``'s layout (the tensors, not copies)."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            ids = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append({**{k: v for k, v in group.items() if k != "params"}, "params": ids})
        state = {index[id(p)]: dict(s) for p, s in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Take the state of :meth:`state_dict` or of a ``torch.optim.Adam`` over the same groups."""
        groups = saved["param_groups"]
        if len(groups) != len(self.param_groups) or any(
            len(g["params"]) != len(mine["params"]) for g, mine in zip(groups, self.param_groups)
        ):
            raise ValueError("the saved optimiser state has other parameter groups than this model")
        self.state = {}
        for g, mine in zip(groups, self.param_groups):
            for key, value in g.items():
                if key not in ("params", "fused", "foreach"):
                    mine[key] = tuple(value) if key == "betas" else value
            for i, p in zip(g["params"], mine["params"]):
                if i in saved["state"]:
                    s = saved["state"][i]
                    self.state[p] = {
                        "step": s["step"].to(dtype=torch.float32, device=p.device),
                        "exp_avg": s["exp_avg"].to(dtype=p.dtype, device=p.device),
                        "exp_avg_sq": s["exp_avg_sq"].to(dtype=p.dtype, device=p.device),
                    }
