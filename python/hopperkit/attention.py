"""``hk.attention``: scaled dot-product attention (FlashAttention forward and backward) as a torch
custom op with autograd through hopperkit's backward kernels; NumPy arrays run the fp64 reference.

Layouts: "bshd" (FlashAttention's ``[B, S, H, D]``) or "bhsd" (PyTorch SDPA's ``[B, H, S, D]``).
Either is taken through its strides, without a copy, as long as the last dim is contiguous (a
``q.transpose(1, 2)`` view of the other layout included); other tensors are copied first.

``hk.attention_varlen``: FlashAttention's variable-length API (sequences packed along the rows of
``[total, H, D]`` tensors, ``cu_seqlens`` prefix sums), the same kernels' thd layout.
``hk.scaled_dot_product_attention``: ``torch.nn.functional.scaled_dot_product_attention``'s
signature and semantics (top-left causal) on hopperkit's kernels.
"""

from __future__ import annotations

from typing import Any

from . import _op
from ._op import kernel_op, new_like


def heads_layout_ok(t: Any) -> bool:
    """Whether the attention kernels take torch tensor ``t`` as it is: q/k/v/o/dout/dq/dk/dv of
    rank 4 with any strides but a unit stride along D (src/ops/attention/attention.cpp's
    dims_of); lse (rank 3) must be contiguous. Other ranks pass to C++, which names the error."""
    if t.numel() == 0:
        return True
    if t.dim() == 4:
        return t.shape[-1] == 1 or t.stride(-1) == 1
    if t.dim() == 3:
        return t.is_contiguous()
    return True


# kernel_op picks what to copy by a named layout rule; attention's is registered here, beside the
# op that uses it.
_op._LAYOUTS.setdefault("heads", heads_layout_ok)


@kernel_op("attention", layout="heads")
def _attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, scale: float = 0.0,
               window_left: int = -1, window_right: int = -1, softcap: float = 0.0,
               layout: str = "bshd", deterministic: bool = False) -> tuple[Tensor, Tensor]:
    # deterministic only travels to the backward (autograd reads it from the saved inputs).
    # o like q; lse f32 [B, Hq, Sq] (natural log; -inf for rows with every key masked).
    b = q.shape[0]
    h, s = (q.shape[2], q.shape[1]) if layout == "bshd" else (q.shape[1], q.shape[2])
    return new_like(q), new_like(q, shape=(b, h, s), dtype="f32")


@kernel_op("attention", name="attention_backward", attrs={"backward": True}, layout="heads")
def _attention_backward(q: Tensor, k: Tensor, v: Tensor, o: Tensor, dout: Tensor, lse: Tensor,
                        causal: bool = False, scale: float = 0.0, window_left: int = -1,
                        window_right: int = -1, softcap: float = 0.0, layout: str = "bshd",
                        deterministic: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    return new_like(q), new_like(k), new_like(v)


def _attention_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    q, k, v, causal, scale, window_left, window_right, softcap, layout, deterministic = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.attrs = (causal, scale, window_left, window_right, softcap, layout, deterministic)
    ctx.mark_non_differentiable(lse)


def _attention_grad(ctx: Any, dout: Any, _dlse: Any) -> tuple:
    # lse is an auxiliary output (non-differentiable): no gradient flows in through it.
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = _attention_backward(q, k, v, o, dout, lse, *ctx.attrs)
    return dq, dk, dv, None, None, None, None, None, None, None

_attention.register_autograd(_attention_grad, setup_context=_attention_setup_context)


def attention(q: Any, k: Any, v: Any, *, causal: bool = False, scale: float | None = None,
              window: tuple[int, int] | None = None, softcap: float | None = None, layout: str = "bshd",
              return_lse: bool = False, deterministic: bool = False) -> Any:
    """``softmax(scale * q k^T + mask) v`` per batch and query head, as
    ``torch.nn.functional.scaled_dot_product_attention`` (layout "bhsd") or FlashAttention's
    ``flash_attn_func`` (layout "bshd").

    ``q``: [B, Sq, Hq, D] (bshd) or [B, Hq, Sq, D] (bhsd); ``k``, ``v``: [B, Sk, Hkv, D] or
    [B, Hkv, Sk, D] with Hq a multiple of Hkv (GQA / MQA, never expanded). f16 or bf16, one dtype;
    math in f32. ``causal``: query i sees key j iff j <= i + Sk - Sq (bottom-right aligned, as
    FlashAttention >= 2.1). ``window=(left, right)``: j in [i + Sk - Sq - left, i + Sk - Sq + right],
    -1 unbounded (None: no window). ``softcap`` > 0: scores become softcap * tanh(scores /
    softcap) before the mask (None or 0: off).
    ``scale``: default 1 / sqrt(D). A row with every key masked gives zeros (and lse = -inf).
    Returns the output (``q``'s shape, contiguous), and with ``return_lse`` also the f32
    log-sum-exp [B, Hq, Sq] (not differentiable). Differentiable in q, k, v through hopperkit's
    backward kernels; ``deterministic=True`` makes the backward bitwise repeatable (no atomics).
    NumPy arrays (f16) run the fp64 reference.
    """
    if layout not in ("bshd", "bhsd"):
        raise ValueError(f"hk.attention: layout must be 'bshd' or 'bhsd', got {layout!r}")
    left, right = (-1, -1) if window is None else window
    o, lse = _attention(q, k, v, bool(causal), float(scale or 0.0), int(left), int(right), float(softcap or 0.0),
                        layout, bool(deterministic))
    return (o, lse) if return_lse else o


def attention_backward(q: Any, k: Any, v: Any, o: Any, dout: Any, lse: Any, *, causal: bool = False,
                       scale: float | None = None, window: tuple[int, int] | None = None,
                       softcap: float | None = None, layout: str = "bshd", deterministic: bool = False) -> tuple:
    """dq, dk, dv of ``attention`` from its inputs, output, upstream gradient and lse (P is
    recomputed from lse). Same conventions as ``attention``."""
    left, right = (-1, -1) if window is None else window
    return _attention_backward(q, k, v, o, dout, lse, bool(causal), float(scale or 0.0), int(left),
                               int(right), float(softcap or 0.0), layout, bool(deterministic))


# ---- FP8 (e4m3) forward -------------------------------------------------------------------------

@kernel_op("attention", name="attention_fp8", attrs={"fp8": True}, layout="heads")
def _attention_fp8(q: Tensor, k: Tensor, v: Tensor, q_descale: Tensor, k_descale: Tensor, v_descale: Tensor,
                   causal: bool = False, scale: float = 0.0, window_left: int = -1, window_right: int = -1,
                   softcap: float = 0.0, layout: str = "bshd") -> tuple[Tensor, Tensor]:
    # o bf16 of q's shape; lse f32 [B, Hq, Sq] of the descaled scores.
    b = q.shape[0]
    h, s = (q.shape[2], q.shape[1]) if layout == "bshd" else (q.shape[1], q.shape[2])
    return new_like(q, dtype="bf16"), new_like(q, shape=(b, h, s), dtype="f32")


def attention_fp8(q: Any, k: Any, v: Any, q_descale: Any = None, k_descale: Any = None, v_descale: Any = None, *,
                  causal: bool = False, scale: float | None = None, window: tuple[int, int] | None = None,
                  softcap: float | None = None, layout: str = "bshd", return_lse: bool = False) -> Any:
    """FlashAttention-3's FP8 forward: ``softmax(scale * dq * dk * q k^T + mask) (dv * v)`` with
    ``q``, ``k``, ``v`` in ``torch.float8_e4m3fn`` and the output in bf16.

    Shapes, layouts, GQA, masks and ``scale`` as ``attention``. ``q_descale``, ``k_descale``,
    ``v_descale``: float32 [B, Hkv], one per (batch, kv head) — query head h uses its kv head's
    (FlashAttention-3's ``flash_attn_func(..., q_descale=, k_descale=, v_descale=)``); None means
    1. The tensor-core path rounds P to e4m3 (relative error up to 2^-4 per probability, as
    FlashAttention-3 does); what it declines (head dims that are not multiples of 16 up to 128,
    ``softcap``, strides TMA cannot read) runs the general kernel with P in f32. Returns o
    (bf16) and, with ``return_lse``, lse f32 [B, Hq, Sq]. Inference only: no gradient.
    """
    if layout not in ("bshd", "bhsd"):
        raise ValueError(f"hk.attention_fp8: layout must be 'bshd' or 'bhsd', got {layout!r}")
    import torch

    b = k.shape[0]
    hkv = k.shape[2] if layout == "bshd" else k.shape[1]

    def descale(x: Any) -> Any:
        if x is None:
            return torch.ones((b, hkv), dtype=torch.float32, device=q.device)
        return x.contiguous()

    left, right = (-1, -1) if window is None else window
    o, lse = _attention_fp8(q, k, v, descale(q_descale), descale(k_descale), descale(v_descale), bool(causal),
                            float(scale or 0.0), int(left), int(right), float(softcap or 0.0), layout)
    return (o, lse) if return_lse else o


# ---- variable length (thd) ----------------------------------------------------------------------

def varlen_layout_ok(t: Any) -> bool:
    """Whether the attention kernels take torch tensor ``t`` of a varlen call as it is: the packed
    q/k/v/o/dout (rank 3) with any row and head strides but a unit stride along D; lse (rank 2)
    and cu_seqlens (rank 1) contiguous."""
    if t.numel() == 0:
        return True
    if t.dim() == 3:
        return t.shape[-1] == 1 or t.stride(-1) == 1
    return t.is_contiguous()


_op._LAYOUTS.setdefault("varlen", varlen_layout_ok)


@kernel_op("attention", name="attention_varlen", attrs={"layout": "thd"}, layout="varlen")
def _attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                      max_seqlen_q: int, max_seqlen_k: int, causal: bool = False, scale: float = 0.0,
                      window_left: int = -1, window_right: int = -1, softcap: float = 0.0,
                      deterministic: bool = False) -> tuple[Tensor, Tensor]:
    # o like q [total_q, Hq, D]; lse f32 [Hq, total_q] (FlashAttention's varlen lse layout).
    return new_like(q), new_like(q, shape=(q.shape[1], q.shape[0]), dtype="f32")


@kernel_op("attention", name="attention_varlen_backward", attrs={"backward": True, "layout": "thd"},
           layout="varlen")
def _attention_varlen_backward(q: Tensor, k: Tensor, v: Tensor, o: Tensor, dout: Tensor, lse: Tensor,
                               cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, max_seqlen_q: int, max_seqlen_k: int,
                               causal: bool = False, scale: float = 0.0, window_left: int = -1,
                               window_right: int = -1, softcap: float = 0.0,
                               deterministic: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    return new_like(q), new_like(k), new_like(v)


def _attention_varlen_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    q, k, v, cu_q, cu_k = inputs[:5]
    o, lse = output
    ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k)
    ctx.attrs = tuple(inputs[5:])  # max_seqlen_q, max_seqlen_k, causal, scale, window, softcap, deterministic
    ctx.mark_non_differentiable(lse)


def _attention_varlen_grad(ctx: Any, dout: Any, _dlse: Any) -> tuple:
    q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
    dq, dk, dv = _attention_varlen_backward(q, k, v, o, dout, lse, cu_q, cu_k, *ctx.attrs)
    return (dq, dk, dv) + (None,) * 10

_attention_varlen.register_autograd(_attention_varlen_grad, setup_context=_attention_varlen_setup_context)


def attention_varlen(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, max_seqlen_q: int,
                     max_seqlen_k: int, *, causal: bool = False, scale: float | None = None,
                     window: tuple[int, int] | None = None, softcap: float | None = None,
                     deterministic: bool = False, return_lse: bool = False) -> Any:
    """Attention over a batch of sequences of different lengths packed along the rows, as
    FlashAttention's ``flash_attn_varlen_func``.

    ``q``: [total_q, Hq, D]; ``k``, ``v``: [total_k, Hkv, D] (Hq a multiple of Hkv), any row and
    head strides with D contiguous. ``cu_seqlens_q`` / ``cu_seqlens_k``: int32 [B + 1] prefix sums
    on q's device (sequence b owns rows ``cu[b]`` to ``cu[b+1] - 1``); ``max_seqlen_q`` /
    ``max_seqlen_k``: at least every sequence's length (they size the grid). Each sequence is
    its own problem: ``causal`` is bottom-right aligned per sequence (query i of a sequence with
    Sq queries and Sk keys sees key j iff j <= i + Sk - Sq), ``window=(left, right)`` likewise;
    sequences of length 0 are valid. Returns o [total_q, Hq, D] and, with ``return_lse``, lse
    f32 [Hq, total_q]. The prefix sums are not read on the host (no synchronization): on the GPU
    wrong ones give unspecified rows, never an out-of-bounds access; CPU tensors and NumPy
    arrays run the fp64 reference, which checks them (ValueError). Differentiable in q, k, v.
    """
    left, right = (-1, -1) if window is None else window
    o, lse = _attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, bool(causal),
                               float(scale or 0.0), int(left), int(right), float(softcap or 0.0),
                               bool(deterministic))
    return (o, lse) if return_lse else o


def attention_varlen_backward(q: Any, k: Any, v: Any, o: Any, dout: Any, lse: Any, cu_seqlens_q: Any,
                              cu_seqlens_k: Any, max_seqlen_q: int, max_seqlen_k: int, *, causal: bool = False,
                              scale: float | None = None, window: tuple[int, int] | None = None,
                              softcap: float | None = None, deterministic: bool = False) -> tuple:
    """dq, dk, dv of ``attention_varlen`` (P recomputed from lse [Hq, total_q])."""
    left, right = (-1, -1) if window is None else window
    return _attention_varlen_backward(q, k, v, o, dout, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                      max_seqlen_k, bool(causal), float(scale or 0.0), int(left), int(right),
                                      float(softcap or 0.0), bool(deterministic))


# ---- torch.nn.functional.scaled_dot_product_attention's signature -------------------------------

def scaled_dot_product_attention(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Any:
    """``torch.nn.functional.scaled_dot_product_attention`` on hopperkit's kernels: [B, H, S, D]
    tensors (f16 or bf16; NumPy arrays run the fp64 reference), the same arguments and results.

    ``is_causal`` is SDPA's mask: top-left aligned, query i sees keys j <= i whatever Sq and Sk
    (hopperkit's own ``causal`` is bottom-right aligned; both agree when Sq == Sk). With
    Sq <= Sk no query sees a key past Sq - 1, so the call runs hopperkit's causal attention on the
    first Sq keys (a view; their gradients are zero); with Sq > Sk it runs the window
    ``(-1, Sq - Sk)``, which is j <= i. Grouped-query attention needs ``enable_gqa=True`` (as in
    torch): query head h reads key/value head h // (Hq / Hkv), never an expanded copy.
    Not supported (the error says so): ``attn_mask`` (pass None; causal masks through
    ``is_causal``, windows and softcap through ``hk.attention``), ``dropout_p`` != 0, a value head
    dim different from the query's, ``scale`` <= 0, tensors of other than 4 dims. Differentiable
    in q, k, v.
    """
    op = "hk.scaled_dot_product_attention"
    if attn_mask is not None:
        raise NotImplementedError(f"{op}: attn_mask is not supported; pass attn_mask=None (causal masks: "
                                  "is_causal=True; sliding windows and softcap: hk.attention)")
    if dropout_p != 0.0:
        raise NotImplementedError(f"{op}: dropout_p={dropout_p} is not supported; only dropout_p=0.0 (no dropout)")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.ndim != 4:
            raise ValueError(f"{op}: {name} must have 4 dimensions [B, H, S, D], got shape {tuple(t.shape)}")
    if value.shape[-1] != query.shape[-1]:
        raise NotImplementedError(f"{op}: value's head dim {value.shape[-1]} differs from query's "
                                  f"{query.shape[-1]}; only equal head dims are supported")
    if scale is not None and not scale > 0:
        raise NotImplementedError(f"{op}: scale={scale} is not supported; only scales > 0 (or None: 1/sqrt(D))")
    hq, hkv = query.shape[1], key.shape[1]
    if hq != hkv and not enable_gqa:
        raise ValueError(f"{op}: query has {hq} heads but key and value have {hkv}; pass enable_gqa=True for "
                         "grouped-query attention (as torch does)")
    sq, sk = query.shape[2], key.shape[2]
    if not is_causal:
        return attention(query, key, value, scale=scale, layout="bhsd")
    if sq <= sk:
        # top-left: no query sees a key past Sq - 1; on the first Sq keys top-left is bottom-right
        return attention(query, key[:, :, :sq], value[:, :, :sq], causal=True, scale=scale, layout="bhsd")
    return attention(query, key, value, scale=scale, window=(-1, sq - sk), layout="bhsd")
