"""FP8: ``hk.quantize_fp8`` and ``hk.matmul_fp8`` (family ``gemm_fp8``, docs/gemm_fp8.md).

``matmul_fp8(a, sa, b, sb)`` is ``D = sa sb (a b^T) [+ bias]`` with ``a`` [M, K] and ``b`` [N, K]
in float8_e4m3fn / float8_e5m2 and f32 scales, per tensor, per row, or per DeepSeek-V3 block
(1 x 128 tiles of ``a``, 128 x 128 tiles of ``b``); ``quantize_fp8`` makes such operands. Both
are ``torch.library.custom_op``s with fake implementations (``torch.compile(fullgraph=True)``
traces them). ``quantize_fp8`` runs as torch ops (amax, divide, cast) on the tensor's device;
``matmul_fp8`` runs the family's dispatch on CUDA tensors and the fp64 reference on CPU tensors.
NumPy has no fp8 dtype: ``quantize_fp8`` on a NumPy array returns the fp8 values as float32,
and ``matmul_fp8`` takes torch tensors only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._core import torch
from ._op import kernel_op, new_like

if TYPE_CHECKING:
    from torch import Tensor

#: The largest finite value of each format: a group's amax is scaled onto it.
FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}
#: The K extent (and B's N extent) of one block-wise scaling tile.
BLOCK = 128
_SCALINGS = ("tensor", "row", "block")


def fp8_scale_shape(scaling: str, rows: int, cols: int, block_rows: int = 1) -> tuple:
    """The scales' shape for a [rows, cols] operand: ``(1,)``, ``(rows,)``, or
    ``(ceil(rows / block_rows), ceil(cols / 128))``, as hk::fp8_scale_shape."""
    if scaling == "tensor":
        return (1,)
    if scaling == "row":
        return (rows,)
    if scaling == "block":
        return (-(-rows // block_rows), -(-cols // BLOCK))
    raise ValueError(f'hk.quantize_fp8: scaling must be "tensor", "row" or "block", got {scaling!r}')


def _check_quantize_args(x: Any, scaling: str, dtype: str, block_rows: int) -> None:
    if scaling not in _SCALINGS:
        raise ValueError(f'hk.quantize_fp8: scaling must be "tensor", "row" or "block", got {scaling!r}')
    if dtype not in FP8_MAX:
        raise ValueError(f'hk.quantize_fp8: dtype must be "e4m3" or "e5m2", got {dtype!r}')
    if block_rows not in (1, BLOCK):
        raise ValueError(f"hk.quantize_fp8: block_rows must be 1 (1 x 128 tiles, for a) or 128 "
                         f"(128 x 128 tiles, for b), got {block_rows}")
    if len(x.shape) != 2:
        raise ValueError(f"hk.quantize_fp8: x must be [rows, cols], got shape {tuple(x.shape)}")


# ---- quantize_fp8 as torch ops ---------------------------------------------------------------

def _group_amax(ax: Any, scaling: str, block_rows: int) -> Any:
    """Per-group max of |x| (a float32 [rows, cols] tensor) in the scales' shape."""
    rows, cols = ax.shape
    if scaling == "tensor":
        return ax.amax().reshape(1) if ax.numel() else ax.new_zeros(1)
    if scaling == "row":
        return ax.amax(dim=1) if cols else ax.new_zeros(rows)
    gr, gc = fp8_scale_shape("block", rows, cols, block_rows)
    padded = ax.new_zeros(gr * block_rows, gc * BLOCK)  # |x| >= 0: zero padding leaves each max alone
    padded[:rows, :cols] = ax
    return padded.reshape(gr, block_rows, gc, BLOCK).amax(dim=(1, 3))


def _expand(scales: Any, scaling: str, rows: int, cols: int, block_rows: int) -> Any:
    """Each element's scale, [rows, cols]."""
    if scaling == "tensor":
        return scales.reshape(1, 1).expand(rows, cols)
    if scaling == "row":
        return scales.reshape(rows, 1).expand(rows, cols)
    return scales.repeat_interleave(block_rows, 0)[:rows].repeat_interleave(BLOCK, 1)[:, :cols]


def _quantize_torch(x: Any, scaling: str, dtype: str, block_rows: int) -> tuple:
    # f32 throughout, as the C++ quantiser: amax, scale = amax / max, x / scale, one
    # round-to-nearest cast after clamping to the finite range (torch's cast does not saturate).
    fmax = FP8_MAX[dtype]
    xf = x.float()
    amax = _group_amax(xf.abs(), scaling, block_rows)
    scales = torch.where(amax > 0, amax / fmax, torch.ones_like(amax))
    q = (xf / _expand(scales, scaling, *x.shape, block_rows)).clamp(-fmax, fmax)
    target = torch.float8_e4m3fn if dtype == "e4m3" else torch.float8_e5m2
    return q.to(target), scales


if torch is not None:

    # The schema is given, not inferred: the annotations name Tensor only for type checkers.
    @torch.library.custom_op("hopperkit::quantize_fp8", mutates_args=(),
                             schema="(Tensor x, str scaling, str dtype, int block_rows) -> (Tensor, Tensor)")
    def _quantize_op(x: Tensor, scaling: str, dtype: str, block_rows: int) -> tuple[Tensor, Tensor]:
        return _quantize_torch(x, scaling, dtype, block_rows)

    @_quantize_op.register_fake
    def _quantize_fake(x: Tensor, scaling: str, dtype: str, block_rows: int) -> tuple[Tensor, Tensor]:
        target = torch.float8_e4m3fn if dtype == "e4m3" else torch.float8_e5m2
        shape = fp8_scale_shape(scaling, x.shape[0], x.shape[1], block_rows)
        return (torch.empty(x.shape, dtype=target, device=x.device),
                torch.empty(shape, dtype=torch.float32, device=x.device))


# ---- quantize_fp8 in NumPy ------------------------------------------------------------------

def _round_fp8_np(v: np.ndarray, dtype: str) -> np.ndarray:
    """Round-to-nearest-even onto the format's grid (3 mantissa bits and normals from 2^-6 for
    e4m3, 2 bits and 2^-14 for e5m2), saturating at the largest finite value."""
    mant, emin = (3, -6) if dtype == "e4m3" else (2, -14)
    a = np.abs(v.astype(np.float64))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    step = np.exp2(np.maximum(e, emin) - mant)
    q = np.round(v / step) * step  # np.round: half to even
    return np.clip(q, -FP8_MAX[dtype], FP8_MAX[dtype]).astype(np.float32)


def _quantize_numpy(x: np.ndarray, scaling: str, dtype: str, block_rows: int) -> tuple:
    fmax = np.float32(FP8_MAX[dtype])
    xf = x.astype(np.float32)
    rows, cols = xf.shape
    ax = np.abs(xf)
    if scaling == "tensor":
        amax = np.array([ax.max() if ax.size else 0.0], dtype=np.float32)
        full = lambda s: np.broadcast_to(s.reshape(1, 1), (rows, cols))  # noqa: E731
    elif scaling == "row":
        amax = ax.max(axis=1) if cols else np.zeros(rows, np.float32)
        full = lambda s: np.broadcast_to(s.reshape(rows, 1), (rows, cols))  # noqa: E731
    else:
        gr, gc = fp8_scale_shape("block", rows, cols, block_rows)
        padded = np.zeros((gr * block_rows, gc * BLOCK), np.float32)
        padded[:rows, :cols] = ax
        amax = padded.reshape(gr, block_rows, gc, BLOCK).max(axis=(1, 3))
        full = lambda s: np.repeat(np.repeat(s, block_rows, 0)[:rows], BLOCK, 1)[:, :cols]  # noqa: E731
    scales = np.where(amax > 0, amax / fmax, np.float32(1.0)).astype(np.float32)
    q = np.clip(xf / full(scales), -fmax, fmax)
    return _round_fp8_np(q, dtype), scales


def quantize_fp8(x: Any, scaling: str = "tensor", dtype: str = "e4m3", block_rows: int = 1) -> tuple:
    """``(data, scales)`` with ``x ~= scales * data``, per tensor, per row or per block.

    ``x``: [rows, cols] f32, bf16 or f16 (torch) or a NumPy array. ``scaling``: ``"tensor"``
    (scales [1]), ``"row"`` (scales [rows]) or ``"block"`` (scales [ceil(rows / block_rows),
    ceil(cols / 128)]: ``block_rows=1`` gives the 1 x 128 tiles ``matmul_fp8`` takes for ``a``,
    ``block_rows=128`` the 128 x 128 tiles it takes for ``b``). ``dtype``: ``"e4m3"``
    (float8_e4m3fn, max 448) or ``"e5m2"`` (float8_e5m2, max 57344). Each group's scale is
    ``amax / max`` (1 for an all-zero group) and ``data = round(x / scale)`` saturated to the
    finite range, all in f32 — the values hk::quantize_fp8 (C++) computes. NumPy arrays give
    the fp8 values as float32.
    """
    _check_quantize_args(x, scaling, dtype, block_rows)
    if isinstance(x, np.ndarray):
        return _quantize_numpy(x, scaling, dtype, block_rows)
    if torch is None or not isinstance(x, torch.Tensor):
        raise TypeError(f"hk.quantize_fp8: takes a torch tensor or a NumPy array, got {type(x).__name__}")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise TypeError(f"hk.quantize_fp8: x is {x.dtype}, expected float32, bfloat16 or float16")
    return _quantize_op(x, scaling, dtype, block_rows)


# ---- matmul_fp8 ------------------------------------------------------------------------------

@kernel_op("gemm_fp8", name="matmul_fp8", layout="matrix")
def _matmul_fp8(a: Tensor, sa: Tensor, b: Tensor, sb: Tensor, bias: Tensor | None = None,
                out_dtype: str = "bf16", fast_accum: bool = False) -> Tensor:
    return new_like(a, shape=(a.shape[0], b.shape[0]), dtype=out_dtype)


_OUT_NAMES = {"bf16": "bf16", "f16": "f16", "f32": "f32"}


def _out_name(out_dtype: Any) -> str:
    if isinstance(out_dtype, str):
        if out_dtype in _OUT_NAMES:
            return out_dtype
    elif torch is not None:
        table = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}
        if out_dtype in table:
            return table[out_dtype]
    raise TypeError(f"hk.matmul_fp8: out_dtype must be torch.bfloat16, torch.float16 or torch.float32, "
                    f"got {out_dtype!r}")


def matmul_fp8(a: Any, sa: Any, b: Any, sb: Any, out_dtype: Any = None, bias: Any = None,
               use_fast_accum: bool = False) -> Any:
    """``D = sa sb (a @ b^T) [+ bias]``: the FP8 GEMM of x W^T, f32 accumulation, one rounding.

    ``a``: [M, K], ``b``: [N, K] (a Linear weight), each float8_e4m3fn or float8_e5m2 (they may
    differ). The fast kernels read both K-major (unit stride along K, rows a multiple of 16
    bytes); other layouts run through one K-major copy — a weight stored [K, N] is passed as
    ``w_kn.t()``. Scales (float32), by shape: per tensor ``sa`` [1] (or 0-d), ``sb`` [1]; row-wise
    ``sa`` [M], ``sb`` [N]; block-wise ``sa`` [M, ceil(K/128)], ``sb`` [ceil(N/128),
    ceil(K/128)] (DeepSeek-V3's 1 x 128 and 128 x 128 tiles; ``quantize_fp8`` with
    ``block_rows=1`` / ``128``). ``out_dtype``: torch.bfloat16 (default), torch.float16 or
    torch.float32; ``bias``: [N] in that dtype. Not differentiable (an inference op).
    ``use_fast_accum`` (as ``torch._scaled_mm``'s): let the tensor cores accumulate over all of K
    instead of promoting every 128-deep block into f32 — faster where cuBLASLt serves the call,
    with an error that grows with K (~1-2% at K = 4096); per-tensor and row-wise scales only.
    """
    name = "bf16" if out_dtype is None else _out_name(out_dtype)
    return _matmul_fp8(a, sa, b, sb, bias, name, bool(use_fast_accum))


__all__ = ["FP8_MAX", "fp8_scale_shape", "matmul_fp8", "quantize_fp8"]
