"""Weight-only 4-bit GEMM: ``hk.matmul_w4a16`` and its weight-format helpers.

``y = x @ dequant(W).T`` with ``dequant(W)[n, k] = (q[n, k] - z[n, k // g]) * s[n, k // g]``:
activations ``x [..., K]`` bf16 or f16, ``W`` N x K unsigned 4-bit values in groups of ``g``
along K (``g`` a multiple of 32 dividing K, or K), one scale (x's dtype) and one 4-bit zero point
per group, or the fixed zero 8 (symmetric: ``zeros=None``).

The interchange format (docs/gemm_w4a16.md):

* ``qweight`` int32 ``[N, K // 8]``: value ``q[n, 8 w + j]`` in bits ``4 j .. 4 j + 3`` of word
  ``(n, w)`` (value 0 in the low nibble);
* ``scales`` ``[N, K // g]`` in x's dtype;
* ``zeros`` int32 ``[N, ceil(G / 8)]``, packed along the groups the same way (unused nibbles of a
  last partial word ignored).

``w4a16_repack`` turns ``qweight`` into the fragment-ordered ("tiled") layout the tensor-core
kernel reads with one 16-byte load per lane; ``matmul_w4a16(..., layout="tiled")`` takes it. Every
helper works on NumPy arrays and on torch tensors (any device) and round-trips bit-exactly.
GPTQ and AutoAWQ checkpoints convert with ``w4a16_from_gptq`` / ``w4a16_from_awq``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._core import torch
from ._op import kernel_op, new_like

if TYPE_CHECKING:
    from torch import Tensor

# ---- the op -------------------------------------------------------------------------------------


@kernel_op("gemm_w4a16")
def _matmul_w4a16(x: Tensor, qweight: Tensor, scales: Tensor, zeros: Tensor | None = None, group_size: int = 128,
                  layout: str = "rows") -> Tensor:
    return new_like(x, shape=(x.shape[0], scales.shape[0]))


def matmul_w4a16(x: Any, qweight: Any, scales: Any, zeros: Any = None, group_size: int = 128,
                 layout: str = "rows") -> Any:
    """``x @ dequant(W).T`` for ``x [..., K]`` (bf16 or f16); returns ``[..., N]`` in x's dtype.

    ``qweight``: int32 ``[N, K // 8]`` (``layout="rows"``, the interchange format) or the output
    of ``w4a16_repack`` (``layout="tiled"``). ``scales``: ``[N, K // group_size]`` in x's dtype.
    ``zeros``: int32 ``[N, ceil(G / 8)]`` packed zero points, or None for symmetric weights (zero
    point 8). Math in f32, one rounding of y; the kernels round each dequantised weight to x's
    dtype first, as a dequantise-then-GEMM would, except the split-K decode kernel (2-32 rows of
    x) with groups of 128 or more, which applies the scale in f32. CUDA tensors run the dispatch's
    kernel on the current stream; NumPy arrays (f16) and CPU tensors run the fp64 reference.
    """
    lead = tuple(x.shape[:-1])
    x2 = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])
    y = _matmul_w4a16(x2, qweight, scales, zeros, int(group_size), str(layout))
    return y if x.ndim == 2 else y.reshape(*lead, y.shape[-1])


def quantize_int4(w: Any, group_size: int = 128, symmetric: bool = False) -> tuple:
    """``(qweight, scales, zeros)`` of a weight ``w [N, K]`` (the ``[out, in]`` weight of a linear
    layer) for ``int4_matmul``: ``w4a16_quantize`` with the scales in ``w``'s dtype (quantise the
    bf16 or f16 weight the activations will meet). ``group_size`` a multiple of 32 dividing K, or
    K; ``zeros`` None when ``symmetric``."""
    return w4a16_quantize(w, group_size, symmetric)


def int4_matmul(x: Any, qweight: Any, scales: Any, zeros: Any = None) -> Any:
    """``x @ dequant(W).T`` for the interchange format that ``quantize_int4`` returns: the group size
    is read from the shapes (``K = 8 * qweight.shape[1]``, ``g = K // scales.shape[1]``).
    ``matmul_w4a16`` names it (and takes the tiled layout)."""
    k = 8 * int(qweight.shape[-1])
    groups = int(scales.shape[-1])
    if groups <= 0 or k % groups:
        raise ValueError(f"int4_matmul: scales has {groups} groups per row, which does not divide K = {k}")
    return matmul_w4a16(x, qweight, scales, zeros, group_size=k // groups)


# ---- array helpers: NumPy and torch alike --------------------------------------------------------


def _is_torch(a: Any) -> bool:
    return torch is not None and isinstance(a, torch.Tensor)


def _i64(a: Any) -> Any:
    """``a`` as int64; an int32 word becomes its unsigned 32-bit value."""
    if _is_torch(a):
        out = a.to(torch.int64)
        return out & 0xFFFFFFFF if a.dtype == torch.int32 else out
    a = np.asarray(a)
    if a.dtype == np.int32:
        return a.view(np.uint32).astype(np.int64)
    return a.astype(np.int64)


def _to_i32(a: Any) -> Any:
    """int64 values in [0, 2^32) as int32 words (the same 32 bits)."""
    if _is_torch(a):
        return torch.where(a >= 2**31, a - 2**32, a).to(torch.int32)
    return a.astype(np.uint32).view(np.int32)


def _arange(n: int, like: Any) -> Any:
    if _is_torch(like):
        return torch.arange(n, device=like.device, dtype=torch.int64)
    return np.arange(n, dtype=np.int64)


def _zeros_i64(n: int, like: Any) -> Any:
    if _is_torch(like):
        return torch.zeros(n, device=like.device, dtype=torch.int64)
    return np.zeros(n, dtype=np.int64)


def _check_2d(name: str, a: Any) -> None:
    if a.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(a.shape)}")


def _check_int32(name: str, a: Any) -> None:
    ok = a.dtype == torch.int32 if _is_torch(a) else np.asarray(a).dtype == np.int32
    if not ok:
        raise TypeError(f"{name} must be int32 (eight 4-bit values per word), got {a.dtype}")


def _pack_last(q: Any) -> Any:
    """``[R, C]`` values 0..15 -> int32 ``[R, ceil(C / 8)]``, value j of a word in bits 4j.. (the
    last word's unused nibbles zero)."""
    rows, cols = q.shape
    words = (cols + 7) // 8
    q = _i64(q)
    if _is_torch(q):
        padded = torch.zeros((rows, words * 8), dtype=torch.int64, device=q.device)
    else:
        padded = np.zeros((rows, words * 8), dtype=np.int64)
    padded[:, :cols] = q
    shifts = _arange(8, q) * 4
    packed = (padded.reshape(rows, words, 8) << shifts).sum(-1)
    return _to_i32(packed)


def _unpack_last(words: Any, cols: int) -> Any:
    """int32 ``[R, W]`` -> values ``[R, cols]`` (uint8), cols <= 8 W."""
    rows = words.shape[0]
    w = _i64(words)
    shifts = _arange(8, w) * 4
    vals = ((w[..., None] >> shifts) & 0xF).reshape(rows, -1)[:, :cols]
    return vals.to(torch.uint8) if _is_torch(vals) else vals.astype(np.uint8)


def _check_group(k: int, group_size: int) -> None:
    if k <= 0 or k % 8:
        raise ValueError(f"K must be a positive multiple of 8 (eight values per word), got K={k}")
    g = int(group_size)
    if g <= 0 or (g != k and (g % 32 or k % g)):
        raise ValueError(f"group_size must be a multiple of 32 that divides K, or K itself, got group_size={g} "
                         f"with K={k}")


# ---- pack / unpack / repack ----------------------------------------------------------------------


def w4a16_pack(w_int: Any, group_size: int | None = None) -> Any:
    """Packs ``w_int [N, K]`` (integers in [0, 15]) into the interchange ``qweight`` int32
    ``[N, K // 8]``. ``group_size``, when given, is checked against K (the layout itself does
    not depend on it)."""
    _check_2d("w_int", w_int)
    k = int(w_int.shape[1])
    if k % 8:
        raise ValueError(f"K must be a multiple of 8 (eight values per word), got K={k}")
    if group_size is not None:
        _check_group(k, group_size)
    lo, hi = (int(w_int.min()), int(w_int.max())) if w_int.shape[0] * k else (0, 0)
    if lo < 0 or hi > 15:
        raise ValueError(f"4-bit values must be in [0, 15], got the range [{lo}, {hi}]")
    return _pack_last(w_int)


def w4a16_unpack(qweight: Any) -> Any:
    """The inverse of ``w4a16_pack``: ``qweight`` int32 ``[N, K // 8]`` -> uint8 ``[N, K]``."""
    _check_2d("qweight", qweight)
    _check_int32("qweight", qweight)
    return _unpack_last(qweight, 8 * int(qweight.shape[1]))


def w4a16_pack_zeros(z: Any) -> Any:
    """Zero points ``z [N, G]`` (integers in [0, 15]) -> int32 ``[N, ceil(G / 8)]``."""
    _check_2d("z", z)
    if z.shape[0] * z.shape[1] and (int(z.min()) < 0 or int(z.max()) > 15):
        raise ValueError(f"zero points must be in [0, 15], got the range [{int(z.min())}, {int(z.max())}]")
    return _pack_last(z)


def w4a16_unpack_zeros(zeros: Any, groups: int) -> Any:
    """Packed zeros int32 ``[N, ceil(G / 8)]`` -> uint8 ``[N, G]``."""
    _check_2d("zeros", zeros)
    _check_int32("zeros", zeros)
    if (groups + 7) // 8 != zeros.shape[1]:
        raise ValueError(f"zeros has {zeros.shape[1]} words per row; {groups} groups need {(groups + 7) // 8}")
    return _unpack_last(zeros, int(groups))


def _tiled_index(n: int, k: int, like: Any) -> Any:
    """Index in the tiled tensor (flattened) of every interchange word, ``[N, K // 8]`` order."""
    kp = (k + 127) // 128 * 128
    r = _arange(n, like)[:, None]
    w = _arange(k // 8, like)[None, :]
    lane = (r % 8) * 4 + (w % 4)
    return (r // 8) * kp + (w // 16) * 128 + lane * 4 + (w % 16) // 4


def w4a16_repack(qweight: Any) -> Any:
    """The interchange ``qweight`` int32 ``[N, K // 8]`` in fragment order ("tiled"): int32
    ``[ceil(N / 8), Kp]`` with Kp = K rounded up to 128. Row i holds rows 8i..8i+7 of W as Kp / 128
    tiles of 128 words; in tile b, word ``4 l + c`` (lane ``l = 4 r + t``, chunk ``c``) is
    interchange word ``(8 i + r, 16 b + 4 c + t)``; padding is zero. Pass the result with
    ``layout="tiled"``."""
    _check_2d("qweight", qweight)
    _check_int32("qweight", qweight)
    n, k = int(qweight.shape[0]), 8 * int(qweight.shape[1])
    kp = (k + 127) // 128 * 128
    out = _zeros_i64(((n + 7) // 8) * kp, qweight)
    out[_tiled_index(n, k, qweight).reshape(-1)] = _i64(qweight).reshape(-1)
    return _to_i32(out).reshape((n + 7) // 8, kp)


def w4a16_unrepack(tiled: Any, n: int, k: int) -> Any:
    """The inverse of ``w4a16_repack``: the interchange ``qweight [N, K // 8]`` (padding dropped)."""
    _check_2d("tiled", tiled)
    _check_int32("tiled", tiled)
    kp = (k + 127) // 128 * 128
    if tuple(tiled.shape) != ((n + 7) // 8, kp):
        raise ValueError(f"tiled has shape {tuple(tiled.shape)}, expected {((n + 7) // 8, kp)} for N={n}, K={k}")
    return tiled.reshape(-1)[_tiled_index(n, k, tiled)]


# ---- quantisation ------------------------------------------------------------------------------


def w4a16_quantize(w_float: Any, group_size: int, symmetric: bool = False) -> tuple:
    """Round-to-nearest group quantisation of ``w_float [N, K]`` (GPTQ's grid without its error
    feedback). Returns ``(qweight, scales, zeros)``: ``qweight`` int32 ``[N, K // 8]``, ``scales``
    ``[N, G]`` in ``w_float``'s dtype (cast to the activations' dtype before use), ``zeros`` int32
    ``[N, ceil(G / 8)]`` or None when ``symmetric``.

    Each group's range includes 0 (as GPTQ's): asymmetric ``s = (max - min) / 15``,
    ``z = round(-min / s)``; symmetric ``s = max|w| / 7.5``, ``z = 8``; ``q = clamp(round(w / s) +
    z, 0, 15)``. An all-zero group gets ``s = 1``."""
    _check_2d("w_float", w_float)
    n, k = int(w_float.shape[0]), int(w_float.shape[1])
    _check_group(k, group_size)
    g = int(group_size)
    groups = k // g
    is_t = _is_torch(w_float)
    w = w_float.to(torch.float32) if is_t else np.asarray(w_float, dtype=np.float32)
    finite = bool(torch.isfinite(w).all()) if is_t else bool(np.isfinite(w).all())
    if not finite:
        raise ValueError("w_float has a non-finite value")
    wg = w.reshape(n, groups, g)
    if is_t:
        lo = torch.clamp(wg.amin(-1), max=0.0)
        hi = torch.clamp(wg.amax(-1), min=0.0)
    else:
        lo = np.minimum(wg.min(-1), 0.0)
        hi = np.maximum(wg.max(-1), 0.0)
    if symmetric:
        s = (torch.maximum(-lo, hi) if is_t else np.maximum(-lo, hi)) / 7.5
    else:
        s = (hi - lo) / 15.0
    s = torch.where(s > 0, s, torch.ones_like(s)) if is_t else np.where(s > 0, s, 1.0).astype(np.float32)
    if symmetric:
        z = torch.full_like(s, 8.0) if is_t else np.full_like(s, 8.0)
    else:
        z = torch.round(-lo / s).clamp(0, 15) if is_t else np.clip(np.round(-lo / s), 0, 15)
    q = (torch.round(wg / s[..., None]) + z[..., None]) if is_t else (np.round(wg / s[..., None]) + z[..., None])
    q = (q.clamp(0, 15).to(torch.int64) if is_t else np.clip(q, 0, 15).astype(np.int64)).reshape(n, k)
    qweight = _pack_last(q)
    scales = s.to(w_float.dtype) if is_t else s.astype(np.asarray(w_float).dtype)
    zeros = None if symmetric else _pack_last(z.to(torch.int64) if is_t else z.astype(np.int64))
    return qweight, scales, zeros


# ---- checkpoint loaders --------------------------------------------------------------------------


def w4a16_from_gptq(qweight: Any, qzeros: Any, scales: Any, g_idx: Any = None, zero_offset: int = 1) -> tuple:
    """GPTQ (AutoGPTQ / exllama "v1" 4-bit) tensors -> the interchange ``(qweight, scales, zeros)``.

    GPTQ packs along K too, with the same nibble order, but stores W transposed: ``qweight`` int32
    ``[K // 8, N]``, so the interchange ``qweight`` is its transpose — a permutation of whole words.
    ``qzeros`` int32 ``[G, N // 8]`` packs along N and stores ``z - 1`` (``zero_offset=1``; pass 0
    for checkpoints saved without the offset, GPTQ "v2"); ``scales [G, N]`` is transposed.
    ``g_idx`` (act-order) must map k to ``k // g``: a checkpoint quantised in a permuted K order
    needs that permutation applied to x, which this op does not do (ValueError)."""
    _check_int32("qweight", qweight)
    _check_int32("qzeros", qzeros)
    k8, n = int(qweight.shape[0]), int(qweight.shape[1])
    k = 8 * k8
    groups = int(scales.shape[0])
    if groups == 0 or k % groups:
        raise ValueError(f"scales has {groups} groups, which do not divide K={k}")
    g = k // groups
    if g_idx is not None:
        expect = _arange(k, g_idx) // g
        same = bool((g_idx.to(torch.int64) == expect).all()) if _is_torch(g_idx) else \
            bool((np.asarray(g_idx) == expect).all())
        if not same:
            raise ValueError("g_idx is not k // group_size (an act-order checkpoint): its K permutation must be "
                             "applied to x, which matmul_w4a16 does not do")
    ours = qweight.t().contiguous() if _is_torch(qweight) else np.ascontiguousarray(qweight.T)
    z = _unpack_last(qzeros, n)  # [G, N] stored values
    z = ((_i64(z) + int(zero_offset)) & 0xF)
    z = z.t() if _is_torch(z) else z.T
    s = scales.t().contiguous() if _is_torch(scales) else np.ascontiguousarray(scales.T)
    return ours, s, _pack_last(z)


# AutoAWQ's GEMM packing: nibble i of a word holds column 8 w + _AWQ_ORDER[i].
_AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def _awq_unpack(words: Any) -> Any:
    """AWQ int32 ``[R, C // 8]`` packed along C in AWQ's order -> values ``[R, C]`` (int64)."""
    vals = _i64(_unpack_last(words, 8 * int(words.shape[1])))  # nibble order
    rows, cols = vals.shape
    inv = [0] * 8
    for i, col in enumerate(_AWQ_ORDER):
        inv[col] = i  # column j of a word sits in nibble inv[j]
    idx = _arange(cols, vals)
    src = (idx // 8) * 8 + (torch.tensor(inv, device=vals.device)[idx % 8] if _is_torch(vals) else np.array(inv)[idx % 8])
    return vals[:, src]


def w4a16_from_awq(qweight: Any, qzeros: Any, scales: Any) -> tuple:
    """AutoAWQ ("GEMM" version) tensors -> the interchange ``(qweight, scales, zeros)``.

    AWQ packs along N (``qweight`` int32 ``[K, N // 8]``, ``qzeros`` int32 ``[G, N // 8]``) with
    nibble i of a word holding column ``8 w + (0, 2, 4, 6, 1, 3, 5, 7)[i]``, zero points stored as
    is, ``scales [G, N]``. The values are unpacked, transposed to ``[N, K]`` and packed along K:
    a permutation of nibbles, not of words."""
    _check_int32("qweight", qweight)
    _check_int32("qzeros", qzeros)
    q = _awq_unpack(qweight)  # [K, N]
    z = _awq_unpack(qzeros)   # [G, N]
    q = q.t() if _is_torch(q) else q.T
    z = z.t() if _is_torch(z) else z.T
    s = scales.t().contiguous() if _is_torch(scales) else np.ascontiguousarray(scales.T)
    return _pack_last(q), s, _pack_last(z)
