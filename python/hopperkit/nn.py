"""``hk.nn``: drop-in ``torch.nn`` modules running hopperkit's kernels (needs torch)."""

from __future__ import annotations

import math
import numbers

import torch

from . import ops


class GELU(torch.nn.Module):
    """Drop-in for ``torch.nn.GELU`` (same ``approximate`` argument and default)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class RMSNorm(torch.nn.Module):
    """Drop-in for ``torch.nn.RMSNorm`` (same arguments, parameter and state dict), running
    ``hk.rms_norm``.

    ``normalized_shape``: the trailing dims normalized over (an int or a tuple); several are
    flattened into one row of their product (a view for inputs whose trailing dims are
    contiguous). ``eps=None`` is ``torch.finfo(x.dtype).eps``, as in torch. The weight is cast to
    the input's dtype when they differ (the kernels take one dtype; its gradient flows back in
    the weight's dtype); without ``elementwise_affine`` a ones vector stands in for it.
    """

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(d) for d in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            torch.nn.init.ones_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = len(self.normalized_shape)
        if x.ndim < k or tuple(x.shape[x.ndim - k:]) != self.normalized_shape:
            raise ValueError(f"hk.nn.RMSNorm: normalized_shape={list(self.normalized_shape)} needs an input "
                             f"of shape [*, {', '.join(map(str, self.normalized_shape))}], got {list(x.shape)}")
        d = math.prod(self.normalized_shape)
        eps = torch.finfo(x.dtype).eps if self.eps is None else self.eps
        if self.weight is None:
            weight = x.new_ones(d)
        else:
            weight = self.weight.reshape(d).to(x.dtype)
        rows = x.reshape(*x.shape[:x.ndim - k], d) if k != 1 else x
        return ops.rms_norm(rows, weight, eps).reshape(x.shape)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class Linear(torch.nn.Linear):
    """Drop-in for ``torch.nn.Linear`` (same arguments, parameters, initialization and state
    dict): ``y = x W^T + b`` through ``hk.linear``, one GEMM with the bias fused.

    ``W`` [out_features, in_features] is read through its transpose, a column-major view: no
    copy. Inputs, weight and bias share one dtype, bf16 or f16 (create the module with
    ``dtype=torch.bfloat16`` or convert it with ``.to``): the kernels take 16-bit operands only,
    and other dtypes are a TypeError naming them.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.linear(x, self.weight, self.bias)
