"""Public ops: PyTorch functions that also take NumPy arrays.

Each is a ``torch.library.custom_op`` (``torch.ops.hopperkit.<name>``) with a fake implementation
(``torch.compile(fullgraph=True)`` and ``torch.export`` trace it without graph breaks) and, where a
backward exists, registered autograd. CUDA tensors run the family's default variant on the
current stream of their device; CPU tensors and NumPy arrays run the fp64 reference and return
the input's dtype. Each op is declared once with ``kernel_op`` (see _op.py, docs/python.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._op import kernel_op, new_like

if TYPE_CHECKING:
    from torch import Tensor


# ---- gelu ----------------------------------------------------------------------------------

@kernel_op("gelu")
def _gelu(x: Tensor, approximate: str = "none") -> Tensor:
    return new_like(x)


@kernel_op("gelu", name="gelu_backward", attrs={"backward": True})
def _gelu_backward(x: Tensor, dy: Tensor, approximate: str = "none") -> Tensor:
    return new_like(x)


def _gelu_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    x, approximate = inputs
    ctx.save_for_backward(x)
    ctx.approximate = approximate


def _gelu_grad(ctx: Any, dy: Any) -> tuple:
    (x,) = ctx.saved_tensors
    return _gelu_backward(x, dy, ctx.approximate), None


_gelu.register_autograd(_gelu_grad, setup_context=_gelu_setup_context)


def gelu(x: Any, approximate: str = "none") -> Any:
    """GeLU, as ``torch.nn.functional.gelu``: ``approximate="none"`` (erf, the default, as in
    torch) or ``"tanh"``.

    ``x``: f32, f16 or bf16, any shape; a non-contiguous ``x`` is copied to contiguous first (the
    kernels stream one flat array). Math in f32, one rounding to ``x``'s dtype. Differentiable:
    the backward runs hopperkit's gelu_backward kernel.
    """
    return _gelu(x, approximate)


def gelu_backward(x: Any, dy: Any, approximate: str = "none") -> Any:
    """``dy * gelu'(x)``: the gradient of ``gelu`` (same dtype and shape for ``x`` and ``dy``;
    non-contiguous inputs are copied to contiguous first)."""
    return _gelu_backward(x, dy, approximate)
