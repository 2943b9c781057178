"""The decoder block's ops beyond ops.py: ``hk.swiglu``, ``hk.rope``, ``hk.rope_tables`` and
``hk.linear_residual`` (a linear layer with the residual add in its GEMM's epilogue).

Each op is a ``torch.library.custom_op`` (``torch.ops.hopperkit.<name>``) with a fake
implementation (``torch.compile(fullgraph=True)`` and ``torch.export`` trace it) and autograd
through hopperkit's backward kernels; CPU tensors and NumPy arrays run the fp64 reference.
Declared with ``kernel_op`` (_op.py) like the ops in ops.py.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _op
from ._core import torch
from ._op import kernel_op, new_like
from .ops import _as_rows, _matmul

if TYPE_CHECKING:
    from torch import Tensor


def rope_layout_ok(t: Any) -> bool:
    """Whether the rope kernels take torch tensor ``t`` as it is: x / dy of rank 4 with any
    strides but a unit last stride (a slice of a fused QKV output, a transposed view); the
    tables (rank 2) must be contiguous. Other ranks pass to C++, which names the error."""
    if t.numel() == 0:
        return True
    if t.dim() == 4:
        return t.shape[-1] == 1 or t.stride(-1) == 1
    if t.dim() == 2:
        return t.is_contiguous()
    return True


# kernel_op picks what to copy by a named layout rule; rope's is registered beside the op.
_op._LAYOUTS.setdefault("rope", rope_layout_ok)


# ---- swiglu ----------------------------------------------------------------------------------

@kernel_op("swiglu", layout="rows")
def _swiglu(x: Tensor) -> Tensor:
    return new_like(x, shape=(*x.shape[:-1], x.shape[-1] // 2))


@kernel_op("swiglu", name="swiglu_backward", attrs={"backward": True}, layout="rows")
def _swiglu_backward(x: Tensor, dy: Tensor) -> Tensor:
    return new_like(x)


def _swiglu_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(inputs[0])


def _swiglu_grad(ctx: Any, dy: Any) -> Any:
    (x,) = ctx.saved_tensors
    return _swiglu_backward(x, dy)


_swiglu.register_autograd(_swiglu_grad, setup_context=_swiglu_setup_context)


def swiglu(x: Any) -> Any:
    """SwiGLU on a fused gate/up projection's output: ``x [..., 2F] = [g | u]`` gives
    ``silu(g) * u`` of shape ``[..., F]``, as ``F.silu(x[..., :F]) * x[..., F:]``.

    f32, f16 or bf16; math in f32, one rounding to ``x``'s dtype. Leading dims are flattened
    into rows (a view when they collapse into one row stride, else a copy); padded rows are taken
    as they are, a non-contiguous last dim is copied first. Differentiable: the backward runs
    hopperkit's swiglu_backward kernel, which writes d[g | u] in one pass.
    """
    y = _swiglu(_as_rows(x))
    return y.reshape(*x.shape[:-1], x.shape[-1] // 2)


def swiglu_backward(x: Any, dy: Any) -> Any:
    """``d[g | u]`` of ``swiglu`` from its input ``x [rows, 2F]`` and ``dy [rows, F]``."""
    return _swiglu_backward(x, dy)


# ---- rope ------------------------------------------------------------------------------------

@kernel_op("rope", layout="rope")
def _rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    return new_like(x)


@kernel_op("rope", name="rope_backward", attrs={"backward": True}, layout="rope")
def _rope_backward(dy: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    return new_like(dy)


def _rope_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(inputs[1], inputs[2])


def _rope_grad(ctx: Any, dy: Any) -> tuple:
    # The tables are constants of the positions: no gradient flows into them.
    cos, sin = ctx.saved_tensors
    return _rope_backward(dy, cos, sin), None, None


_rope.register_autograd(_rope_grad, setup_context=_rope_setup_context)


def rope(x: Any, cos: Any, sin: Any) -> Any:
    """Rotary position embedding, "rotate_half" form (GPT-NeoX, Llama, Hugging Face's
    ``apply_rotary_pos_emb``): for ``i < R/2``, ``y[i] = x[i] cos - x[i + R/2] sin`` and
    ``y[i + R/2] = x[i + R/2] cos + x[i] sin``; dims from ``R`` on pass through.

    ``x``: [B, S, H, D] in f32, f16 or bf16, any strides with a contiguous last dim (q or k as a
    slice of a fused QKV projection's output runs without a copy). ``cos``, ``sin``: f32
    [S, R/2] (``hk.rope_tables``): row s holds the angles of the token at sequence index s, so a
    rotary dim ``R = 2 * cos.shape[-1]`` below D rotates the first R dims only. Hugging Face's
    tables are [S, R] with the half repeated: pass ``cos[:, :R // 2]``. Returns a new contiguous
    tensor of ``x``'s shape. Differentiable in ``x`` (the backward is the same rotation by
    ``-sin``, one kernel); the tables are not.
    """
    return _rope(x, cos, sin)


def rope_backward(dy: Any, cos: Any, sin: Any) -> Any:
    """``dx`` of ``rope``: ``dy`` rotated by ``-sin``."""
    return _rope_backward(dy, cos, sin)


def rope_tables(seq_len: int, rotary_dim: int, theta: float = 10000.0, positions: Any = None,
                device: Any = None) -> tuple:
    """``cos, sin``: f32 ``[seq_len, rotary_dim // 2]`` for ``hk.rope``, angle
    ``positions[s] * theta ** (-2 i / rotary_dim)`` (positions default to ``0..seq_len-1``).

    Computed in f64 and rounded once to f32. With torch installed: torch tensors on ``device``
    (traceable by ``torch.compile``); without it, NumPy arrays.
    """
    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"hk.rope_tables: rotary_dim must be even and >= 2, got {rotary_dim}")
    half = rotary_dim // 2
    if torch is None:
        pos = np.arange(seq_len, dtype=np.float64) if positions is None else np.asarray(positions, np.float64)
        inv = theta ** (-2.0 * np.arange(half, dtype=np.float64) / rotary_dim)
        ang = pos[:, None] * inv[None, :]
        return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    if positions is None:
        pos = torch.arange(seq_len, dtype=torch.float64, device=device)
    else:
        pos = torch.as_tensor(positions, device=device).to(torch.float64)
    inv = torch.exp(torch.arange(half, dtype=torch.float64, device=pos.device) * (-2.0 * math.log(theta) / rotary_dim))
    ang = pos[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


# ---- linear_residual -------------------------------------------------------------------------

@kernel_op("gemm", name="matmul_add", attrs={"beta": 1.0}, layout="matrix")
def _matmul_add(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    # a @ b + c in one GEMM: the gemm family's C_in (beta = 1) read by the epilogue.
    return new_like(a, shape=(*a.shape[:-1], b.shape[-1]))


def _matmul_add_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(inputs[0], inputs[1])


def _matmul_add_grad(ctx: Any, dy: Any) -> tuple:
    a, b = ctx.saved_tensors
    da = _matmul(dy, b.transpose(-1, -2), None, None) if ctx.needs_input_grad[0] else None
    db = _matmul(a.transpose(-1, -2), dy, None, None) if ctx.needs_input_grad[1] else None
    return da, db, dy


_matmul_add.register_autograd(_matmul_add_grad, setup_context=_matmul_add_setup_context)


def linear_residual(x: Any, weight: Any, residual: Any) -> Any:
    """``residual + x @ weight^T`` in one GEMM, as ``residual + F.linear(x, weight)``: the
    residual is read by the GEMM's epilogue (C_in with beta = 1) instead of by a separate add
    kernel, which would read both operands and write the sum once more.

    ``x``: [*, in_features]; ``weight``: [out_features, in_features]; ``residual``:
    [*, out_features] (``x``'s leading dims); bf16 or f16, one dtype; f32 accumulation, one
    rounding. Differentiable in all three (the residual's gradient is the upstream one).
    """
    rows = x.reshape(-1, x.shape[-1])
    res = residual.reshape(-1, weight.shape[0])
    y = _matmul_add(rows, weight.swapaxes(-1, -2), res)
    return y.reshape(*x.shape[:-1], weight.shape[0])
