"""``hk.attention``: scaled dot-product attention (FlashAttention forward and backward) as a torch
custom op with autograd through hopperkit's backward kernels; NumPy arrays run the fp64 reference.

Layouts: "bshd" (FlashAttention's ``[B, S, H, D]``) or "bhsd" (PyTorch SDPA's ``[B, H, S, D]``).
Either is taken through its strides, without a copy, as long as the last dim is contiguous (a
``q.transpose(1, 2)`` view of the other layout included); other tensors are copied first.
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
              window: tuple[int, int] = (-1, -1), softcap: float = 0.0, layout: str = "bshd",
              return_lse: bool = False, deterministic: bool = False) -> Any:
    """``softmax(scale * q k^T + mask) v`` per batch and query head, as
    ``torch.nn.functional.scaled_dot_product_attention`` (layout "bhsd") or FlashAttention's
    ``flash_attn_func`` (layout "bshd").

    ``q``: [B, Sq, Hq, D] (bshd) or [B, Hq, Sq, D] (bhsd); ``k``, ``v``: [B, Sk, Hkv, D] or
    [B, Hkv, Sk, D] with Hq a multiple of Hkv (GQA / MQA, never expanded). f16 or bf16, one dtype;
    math in f32. ``causal``: query i sees key j iff j <= i + Sk - Sq (bottom-right aligned, as
    FlashAttention >= 2.1). ``window=(left, right)``: j in [i + Sk - Sq - left, i + Sk - Sq + right],
    -1 unbounded. ``softcap`` > 0: scores become softcap * tanh(scores / softcap) before the mask.
    ``scale``: default 1 / sqrt(D). A row with every key masked gives zeros (and lse = -inf).
    Returns the output (``q``'s shape, contiguous), and with ``return_lse`` also the f32
    log-sum-exp [B, Hq, Sq] (not differentiable). Differentiable in q, k, v through hopperkit's
    backward kernels; ``deterministic=True`` makes the backward bitwise repeatable (no atomics).
    NumPy arrays (f16) run the fp64 reference.
    """
    if layout not in ("bshd", "bhsd"):
        raise ValueError(f"hk.attention: layout must be 'bshd' or 'bhsd', got {layout!r}")
    left, right = window
    o, lse = _attention(q, k, v, bool(causal), float(scale or 0.0), int(left), int(right), float(softcap),
                        layout, bool(deterministic))
    return (o, lse) if return_lse else o


def attention_backward(q: Any, k: Any, v: Any, o: Any, dout: Any, lse: Any, *, causal: bool = False,
                       scale: float | None = None, window: tuple[int, int] = (-1, -1), softcap: float = 0.0,
                       layout: str = "bshd", deterministic: bool = False) -> tuple:
    """dq, dk, dv of ``attention`` from its inputs, output, upstream gradient and lse (P is
    recomputed from lse). Same conventions as ``attention``."""
    left, right = window
    return _attention_backward(q, k, v, o, dout, lse, bool(causal), float(scale or 0.0), int(left),
                               int(right), float(softcap), layout, bool(deterministic))
