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

from . import _C, _core, _op
from ._core import torch
from .attention import _attention, _attention_backward
from ._op import kernel_op, new_like
from .ops import _as_rows, _grad_b, _matmul

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


# ---- rope_attention --------------------------------------------------------------------------

def _rope_attention_eager(qkv: Any, cos: Any, sin: Any, hq: int, hkv: int, scale: float) -> tuple:
    q = _rope(qkv[:, :, :hq], cos, sin)
    k = _rope(qkv[:, :, hq:hq + hkv], cos, sin)
    o, lse = _attention(q, k, qkv[:, :, hq + hkv:], True, scale)
    return o, lse, q, k


def _rope_attention_backward_eager(qkv: Any, q: Any, k: Any, o: Any, lse: Any, dout: Any, cos: Any, sin: Any,
                                   hq: int, hkv: int, scale: float) -> Any:
    v = qkv[:, :, hq + hkv:]
    dout = dout.contiguous()
    if qkv.device.type != "cuda":  # the fp64 references, composed
        dq, dk, dv = _attention_backward(q, k, v, o, dout, lse, True, scale)
        return torch.cat([_rope_backward(dq, cos, sin), _rope_backward(dk, cos, sin), dv], dim=2)
    # dv lands in its slice of d(qkv) and dq, dk are rotated into theirs: no zero fill, no
    # strided copy, no add (autograd's slice backward would do all three for each of q, k, v).
    dqkv = torch.empty(qkv.shape, dtype=qkv.dtype, device=qkv.device)
    dq, dk = torch.empty_like(q), torch.empty_like(k)
    meta = _core._metadata_view
    with torch.cuda.device(qkv.device):
        stream = _core.current_stream(qkv.device)
        _C.attention_backward_into([meta(t) for t in (q, k, v, o, dout, lse)],
                                   [dq, dk, dqkv[:, :, hq + hkv:]], True, scale, False, stream)
        _C.rope_backward_into([dq, meta(cos), meta(sin)], dqkv[:, :, :hq], stream)
        _C.rope_backward_into([dk, meta(cos), meta(sin)], dqkv[:, :, hq:hq + hkv], stream)
    return dqkv


if torch is not None:
    @torch.library.custom_op("hopperkit::rope_attention", mutates_args=(),
                             schema="(Tensor qkv, Tensor cos, Tensor sin, int hq, int hkv, float scale) "
                                    "-> (Tensor, Tensor, Tensor, Tensor)")
    def _rope_attention(qkv, cos, sin, hq, hkv, scale):
        return _rope_attention_eager(qkv, cos, sin, hq, hkv, scale)

    @_rope_attention.register_fake
    def _rope_attention_fake(qkv, cos, sin, hq, hkv, scale):
        b, s, _, d = qkv.shape
        return (qkv.new_empty((b, s, hq, d)), qkv.new_empty((b, hq, s), dtype=torch.float32),
                qkv.new_empty((b, s, hq, d)), qkv.new_empty((b, s, hkv, d)))

    @torch.library.custom_op("hopperkit::rope_attention_backward", mutates_args=(),
                             schema="(Tensor qkv, Tensor q, Tensor k, Tensor o, Tensor lse, Tensor dout, Tensor cos, "
                                    "Tensor sin, int hq, int hkv, float scale) -> Tensor")
    def _rope_attention_backward(qkv, q, k, o, lse, dout, cos, sin, hq, hkv, scale):
        return _rope_attention_backward_eager(qkv, q, k, o, lse, dout, cos, sin, hq, hkv, scale)

    @_rope_attention_backward.register_fake
    def _rope_attention_backward_fake(qkv, q, k, o, lse, dout, cos, sin, hq, hkv, scale):
        return qkv.new_empty(qkv.shape)

    def _rope_attention_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        qkv, cos, sin, ctx.hq, ctx.hkv, ctx.scale = inputs
        o, lse, q, k = output
        ctx.save_for_backward(qkv, q, k, o, lse, cos, sin)
        ctx.mark_non_differentiable(lse, q, k)

    def _rope_attention_grad(ctx: Any, dout: Any, _dlse: Any, _dq: Any, _dk: Any) -> tuple:
        qkv, q, k, o, lse, cos, sin = ctx.saved_tensors
        return (_rope_attention_backward(qkv, q, k, o, lse, dout, cos, sin, ctx.hq, ctx.hkv, ctx.scale),
                None, None, None, None, None)

    _rope_attention.register_autograd(_rope_attention_grad, setup_context=_rope_attention_setup_context)


def rope_attention(qkv: Any, cos: Any, sin: Any, n_heads: int, n_kv_heads: int, scale: float | None = None) -> Any:
    """Causal attention of a fused QKV projection's heads with RoPE on q and k:
    ``attention(rope(q), rope(k), v, causal=True)`` for ``q, k, v`` the head slices ``[:, :, :Hq]``,
    ``[:, :, Hq:Hq + Hkv]`` and ``[:, :, Hq + Hkv:]`` of ``qkv [B, S, Hq + 2 Hkv, D]`` (bf16 or
    f16, contiguous). Returns ``o [B, S, Hq, D]``.

    The same result as the three ops composed; the difference is the backward: it writes one
    ``d(qkv)``, dv by the attention backward straight into its slice and dq, dk rotated into
    theirs, where autograd would zero-fill a ``qkv``-sized gradient per slice, copy each slice's
    gradient into it and add the three (about 1 ms of a 2.7B block's 5.5 ms step on an H200).
    """
    if not isinstance(qkv, torch.Tensor):
        raise TypeError(f"hk.rope_attention: takes torch tensors, got {type(qkv).__name__}")
    if qkv.dim() != 4 or qkv.shape[2] != n_heads + 2 * n_kv_heads:
        raise ValueError(f"hk.rope_attention: qkv must be [B, S, n_heads + 2 n_kv_heads = "
                         f"{n_heads + 2 * n_kv_heads}, D], got {list(qkv.shape)}")
    return _rope_attention(qkv.contiguous(), cos, sin, n_heads, n_kv_heads, 0.0 if scale is None else scale)[0]


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
    db = _grad_b(a, dy, b) if ctx.needs_input_grad[1] else None
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
