"""``hk.nn``: drop-in ``torch.nn`` modules running hopperkit's kernels (needs torch)."""

from __future__ import annotations

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
