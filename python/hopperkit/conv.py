"""``hk.conv2d`` (``torch.nn.functional.conv2d`` with autograd through hopperkit's backward-data and
backward-weight ops) and ``hk.conv2d_single_channel`` (the single-channel stencil of the Triton
puzzles). Torch custom ops with fake implementations; NumPy arrays run the fp64 reference.

Layout: a ``channels_last`` input (``x.is_contiguous(memory_format=torch.channels_last)``) runs the
NHWC kernels on its ``[N, H, W, C]`` view without a copy and returns a ``channels_last`` output, as
``F.conv2d`` does; any other input runs NCHW (copied to contiguous first when it is not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._core import torch
from ._op import kernel_op, new_like

if TYPE_CHECKING:
    from torch import Tensor


def _out_size(size: Any, k: Any, s: int, p0: int, p1: int, d: int) -> Any:
    return (size + p0 + p1 - d * (k - 1) - 1) // s + 1


# ---- the single-channel stencil -------------------------------------------------------------

@kernel_op("conv2d_single")
def _conv2d_single_channel(x: Tensor, k: Tensor) -> Tensor:
    return new_like(x)


def conv2d_single_channel(x: Any, k: Any) -> Any:
    """``z[i, j, l] = sum_{a, b} k[a, b] * x[i, j + a, l + b]`` with ``x`` zero beyond the bottom and
    right edges: the batched single-channel 2-D convolution of the Triton puzzles (puzzle 10). The
    kernel is anchored at its top-left tap (not flipped, not centred); the output has ``x``'s
    shape.

    ``x``: [N, H, W]; ``k``: [kH, kW]; one dtype, f32, f16 or bf16; math in f32. Not
    differentiable.
    """
    return _conv2d_single_channel(x, k)


# ---- conv2d ---------------------------------------------------------------------------------

@kernel_op("conv2d")
def _conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride_h: int = 1, stride_w: int = 1,
            pad_top: int = 0, pad_bottom: int = 0, pad_left: int = 0, pad_right: int = 0, dilation_h: int = 1,
            dilation_w: int = 1, groups: int = 1, layout: str = "nchw") -> Tensor:
    nhwc = layout == "nhwc"
    xs, ws = x.shape, weight.shape  # each .shape read builds a torch.Size
    n = xs[0]
    h, w = (xs[1], xs[2]) if nhwc else (xs[2], xs[3])
    cout = ws[0]
    kh, kw = (ws[1], ws[2]) if nhwc else (ws[2], ws[3])
    oh = _out_size(h, kh, stride_h, pad_top, pad_bottom, dilation_h)
    ow = _out_size(w, kw, stride_w, pad_left, pad_right, dilation_w)
    return new_like(x, shape=(n, oh, ow, cout) if nhwc else (n, cout, oh, ow))


@kernel_op("conv2d", name="conv2d_backward_data", attrs={"direction": "backward_data"})
def _conv2d_backward_data(dy: Tensor, weight: Tensor, input_h: int, input_w: int, stride_h: int = 1,
                          stride_w: int = 1, pad_top: int = 0, pad_bottom: int = 0, pad_left: int = 0,
                          pad_right: int = 0, dilation_h: int = 1, dilation_w: int = 1, groups: int = 1,
                          layout: str = "nchw") -> Tensor:
    c = weight.shape[3 if layout == "nhwc" else 1] * groups
    n = dy.shape[0]
    return new_like(dy, shape=(n, input_h, input_w, c) if layout == "nhwc" else (n, c, input_h, input_w))


@kernel_op("conv2d", name="conv2d_backward_weight", attrs={"direction": "backward_weight"})
def _conv2d_backward_weight(x: Tensor, dy: Tensor, kernel_h: int, kernel_w: int, stride_h: int = 1,
                            stride_w: int = 1, pad_top: int = 0, pad_bottom: int = 0, pad_left: int = 0,
                            pad_right: int = 0, dilation_h: int = 1, dilation_w: int = 1, groups: int = 1,
                            layout: str = "nchw") -> Tensor:
    nhwc = layout == "nhwc"
    cg = x.shape[3 if nhwc else 1] // groups
    cout = dy.shape[3 if nhwc else 1]
    return new_like(x, shape=(cout, kernel_h, kernel_w, cg) if nhwc else (cout, cg, kernel_h, kernel_w))


def _conv2d_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    x, weight, bias = inputs[:3]
    ctx.save_for_backward(x, weight)
    ctx.attrs = tuple(inputs[3:])  # stride_h ... layout
    ctx.has_bias = bias is not None


def _conv2d_grad(ctx: Any, dy: Any) -> tuple:
    x, weight = ctx.saved_tensors
    layout = ctx.attrs[-1]
    nhwc = layout == "nhwc"
    dx = dw = db = None
    if ctx.needs_input_grad[0]:
        h, w = (x.shape[1], x.shape[2]) if nhwc else (x.shape[2], x.shape[3])
        dx = _conv2d_backward_data(dy, weight, h, w, *ctx.attrs)
    if ctx.needs_input_grad[1]:
        kh, kw = (weight.shape[1], weight.shape[2]) if nhwc else (weight.shape[2], weight.shape[3])
        dw = _conv2d_backward_weight(x, dy, kh, kw, *ctx.attrs)
    if ctx.has_bias and ctx.needs_input_grad[2]:
        db = dy.sum(dim=(0, 1, 2) if nhwc else (0, 2, 3))
    return (dx, dw, db) + (None,) * len(ctx.attrs)


_conv2d.register_autograd(_conv2d_grad, setup_context=_conv2d_setup_context)


def _pair(v: Any, name: str) -> tuple[int, int]:
    if type(v) is int:  # the common argument, decided without the isinstance and int() calls
        return v, v
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"hk.conv2d: {name} must be an int or a pair, got {v!r}")
        return int(v[0]), int(v[1])
    return int(v), int(v)


def _padding(padding: Any, weight: Any, stride: tuple[int, int],
             dilation: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) as F.conv2d pads: 'same' puts the odd pixel on the bottom/right."""
    if type(padding) is int:
        return padding, padding, padding, padding
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0, 0, 0
        if padding != "same":
            raise ValueError(f"hk.conv2d: padding must be an int, a pair, 'same' or 'valid', got {padding!r}")
        if stride != (1, 1):
            raise ValueError(f"hk.conv2d: padding='same' is not supported for strided convolutions (stride {stride})")
        out = []
        for k, d in zip((int(weight.shape[2]), int(weight.shape[3])), dilation):
            total = d * (k - 1)
            out += [total // 2, total - total // 2]
        return out[0], out[1], out[2], out[3]
    ph, pw = _pair(padding, "padding")
    return ph, ph, pw, pw


def _channels_last(x: Any) -> bool:
    return (torch is not None and isinstance(x, torch.Tensor) and x.dim() == 4 and not x.is_contiguous()
            and x.is_contiguous(memory_format=torch.channels_last))


def conv2d(x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1) -> Any:
    """2-D cross-correlation, as ``torch.nn.functional.conv2d``.

    ``x``: [N, C, H, W]; ``weight``: [Cout, C / groups, kH, kW]; ``bias``: [Cout] or None; one
    dtype, f32, f16 or bf16; math in f32. ``stride``, ``dilation``: int or pair; ``padding``: int,
    pair, ``'valid'`` or ``'same'`` (stride 1; an even kernel pads the extra pixel on the bottom and
    right, as torch). ``groups`` divides C and Cout (``groups == C``: depthwise). A
    ``channels_last`` ``x`` runs the NHWC kernels and returns a ``channels_last`` output.
    Differentiable in x, weight and bias through hopperkit's backward-data and backward-weight
    ops (the bias gradient is a torch sum). NumPy arrays (NCHW) run the fp64 reference.
    """
    if getattr(x, "ndim", None) != 4 or getattr(weight, "ndim", None) != 4:
        raise ValueError(f"hk.conv2d: x and weight must be 4-d ([N, C, H, W], [Cout, C/groups, kH, kW]), got "
                         f"{tuple(getattr(x, 'shape', ()))} and {tuple(getattr(weight, 'shape', ()))}")
    sh, sw = _pair(stride, "stride")
    dh, dw = _pair(dilation, "dilation")
    pt, pb, pl, pr = _padding(padding, weight, (sh, sw), (dh, dw))
    groups = int(groups)
    if _channels_last(x):
        y = _conv2d(x.permute(0, 2, 3, 1), weight.permute(0, 2, 3, 1), bias, sh, sw, pt, pb, pl, pr, dh, dw,
                    groups, "nhwc")
        return y.permute(0, 3, 1, 2)
    return _conv2d(x, weight, bias, sh, sw, pt, pb, pl, pr, dh, dw, groups, "nchw")
