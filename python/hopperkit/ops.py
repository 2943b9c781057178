"""Public ops: PyTorch functions that also take NumPy arrays.

Each is a ``torch.library.custom_op`` (``torch.ops.hopperkit.<name>``) with a fake implementation
(``torch.compile(fullgraph=True)`` and ``torch.export`` trace it without graph breaks) and, where a
backward exists, registered autograd (through hopperkit's backward kernel where the family has
one, through torch ops where the gradient is a broadcast or a sum). CUDA tensors run the
family's default variant on the current stream of their device; CPU tensors and NumPy arrays
run the fp64 reference and return the input's dtype. Each op is declared once with
``kernel_op`` (see _op.py, docs/python.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._core import torch
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


# ---- shared helpers ---------------------------------------------------------------------------

def _as_rows(x: Any) -> Any:
    """``x [..., D]`` as ``[rows, D]`` for the families whose C++ ops take 2-D operands: a view
    when the leading dims collapse into one row stride, else a copy (torch's reshape rule).
    Ranks 0 and 2 pass unchanged (rank 0 reaches C++, which names the error)."""
    if x.ndim in (0, 2):
        return x
    if x.ndim == 1:
        return x[None]
    if isinstance(x, np.ndarray):
        return x.reshape(int(np.prod(x.shape[:-1])), x.shape[-1])
    return x.flatten(0, -2)


def _movedim(x: Any, source: int, destination: int) -> Any:
    if isinstance(x, np.ndarray):
        return np.moveaxis(x, source, destination)
    return x.movedim(source, destination)


# ---- softmax ---------------------------------------------------------------------------------

@kernel_op("softmax", layout="rows")
def _softmax(x: Tensor) -> Tensor:
    return new_like(x)


@kernel_op("softmax", name="softmax_backward", attrs={"backward": True}, layout="rows")
def _softmax_backward(y: Tensor, dy: Tensor) -> Tensor:
    return new_like(y)


def _softmax_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(output)


def _softmax_grad(ctx: Any, dy: Any) -> Any:
    (y,) = ctx.saved_tensors
    return _softmax_backward(y, dy)


_softmax.register_autograd(_softmax_grad, setup_context=_softmax_setup_context)


def softmax(x: Any, dim: int = -1) -> Any:
    """Softmax along ``dim``, as ``torch.softmax(x, dim)``.

    ``x``: f32, f16 or bf16, any shape of rank >= 1. The kernels reduce the last dim and take
    padded rows as they are (last dim contiguous, leading dims collapsing into one row stride);
    other layouts are copied to contiguous first. ``dim`` other than the last moves it there: a
    copy of ``x``, and the result is that dim moved back (a non-contiguous view). Math in f32,
    max-subtracted; a row holding NaN or +inf gives NaN. Differentiable: the backward runs
    hopperkit's softmax_backward kernel.
    """
    last = x.ndim - 1
    if dim < 0:
        dim += x.ndim
    if dim == last or x.ndim == 0:
        return _softmax(x)
    return _movedim(_softmax(_movedim(x, dim, -1)), -1, dim)


# ---- rms_norm --------------------------------------------------------------------------------

@kernel_op("rmsnorm", name="rms_norm", layout="rows")
def _rms_norm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> tuple[Tensor, Tensor]:
    # y, and the f32 reciprocal RMS per row that the backward reads.
    return new_like(x), new_like(x, shape=x.shape[:1], dtype="f32")


@kernel_op("rmsnorm", name="rms_norm_backward", attrs={"backward": True}, layout="rows")
def _rms_norm_backward(x: Tensor, weight: Tensor, rstd: Tensor, dy: Tensor) -> tuple[Tensor, Tensor]:
    return new_like(x), new_like(weight)


def _rms_norm_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    x, weight, _eps = inputs
    ctx.save_for_backward(x, weight, output[1])


def _rms_norm_grad(ctx: Any, dy: Any, _drstd: Any) -> tuple:
    # rstd is an internal output (the public rms_norm never returns it): no gradient flows in.
    x, weight, rstd = ctx.saved_tensors
    dx, dweight = _rms_norm_backward(x, weight, rstd, dy)
    return dx, dweight, None


_rms_norm.register_autograd(_rms_norm_grad, setup_context=_rms_norm_setup_context)


def rms_norm(x: Any, weight: Any, eps: float = 1e-6) -> Any:
    """RMSNorm over the last dim, as ``torch.nn.functional.rms_norm(x, (D,), weight, eps)``:
    ``x / sqrt(mean(x**2, -1) + eps) * weight``.

    ``x``: [..., D] in f32, f16 or bf16; ``weight``: [D] in ``x``'s dtype. Leading dims are
    flattened into rows (a view when they collapse into one row stride, else a copy); padded rows
    are taken as they are, other layouts (a non-contiguous last dim) are copied to contiguous
    first. Math and the row sum in f32. Differentiable in ``x`` and ``weight``: the backward runs
    hopperkit's rmsnorm backward kernel (dx and dweight, deterministic).
    """
    y, _rstd = _rms_norm(_as_rows(x), weight, eps)
    # A 2-D x already has y's shape: no reshape (a view op through the dispatcher, 1-2 us).
    return y if x.ndim == 2 else y.reshape(x.shape)


# ---- row_sum ---------------------------------------------------------------------------------

@kernel_op("row_sum", layout="rows")
def _row_sum(x: Tensor) -> Tensor:
    return new_like(x, shape=x.shape[:-1])


def _row_sum_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.x_shape = inputs[0].shape


def _row_sum_grad(ctx: Any, dy: Any) -> Any:
    # Every element of a row gets the row's gradient: a broadcast (a view, no kernel).
    return dy.unsqueeze(-1).expand(ctx.x_shape)


_row_sum.register_autograd(_row_sum_grad, setup_context=_row_sum_setup_context)


def row_sum(x: Any) -> Any:
    """Sum over the last dim, as ``x.sum(-1)``: ``x [..., T]`` gives ``[...]`` in ``x``'s dtype.

    f32, f16 or bf16; accumulation in f32; NaN and Inf propagate as IEEE sums do; an empty last
    dim sums to 0. Padded rows are taken as they are (last dim contiguous, leading dims
    collapsing into one row stride); other layouts are copied to contiguous first.
    Differentiable: the gradient is ``dy`` broadcast over the last dim (a torch view).
    """
    return _row_sum(x)


# ---- weighted_sum ----------------------------------------------------------------------------

@kernel_op("weighted_sum", layout="rows")
def _weighted_sum(x: Tensor, w: Tensor) -> Tensor:
    return new_like(x, shape=x.shape[:1])


@kernel_op("weighted_sum", name="weighted_sum_backward", attrs={"backward": True}, layout="rows")
def _weighted_sum_backward(x: Tensor, w: Tensor, dy: Tensor) -> tuple[Tensor, Tensor]:
    return new_like(x), new_like(w)


def _weighted_sum_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(*inputs)


def _weighted_sum_grad(ctx: Any, dy: Any) -> tuple:
    x, w = ctx.saved_tensors
    return _weighted_sum_backward(x, w, dy)


_weighted_sum.register_autograd(_weighted_sum_grad, setup_context=_weighted_sum_setup_context)


def weighted_sum(x: Any, w: Any) -> Any:
    """Weighted sum over the last dim, as ``x @ w``: ``x [..., D]`` and ``w [D]`` give ``[...]``.

    f32, f16 or bf16 (one dtype); math and accumulation in f32. Leading dims are flattened into
    rows (a view when they collapse into one row stride, else a copy); padded rows are taken as
    they are, a non-contiguous last dim or ``w`` is copied first. Differentiable in ``x`` and
    ``w``: the backward runs hopperkit's weighted_sum backward kernel (dx = dy w, dw = x^T dy,
    deterministic).
    """
    return _weighted_sum(_as_rows(x), w).reshape(x.shape[:-1])


# ---- the broadcast ops -----------------------------------------------------------------------

@kernel_op("add_scalar")
def _add_scalar(x: Tensor, c: float) -> Tensor:
    return new_like(x)


def _add_scalar_grad(ctx: Any, dz: Any) -> tuple:
    return dz, None


_add_scalar.register_autograd(_add_scalar_grad, setup_context=lambda ctx, inputs, output: None)


def add_scalar(x: Any, c: float) -> Any:
    """``x + c`` for a Python number ``c``, as ``torch.add(x, c)`` (``c`` is rounded to f32).

    ``x``: f32, f16 or bf16, any shape; a non-contiguous ``x`` is copied to contiguous first (the
    kernels stream one flat array). Differentiable: the gradient passes through unchanged.
    """
    return _add_scalar(x, float(c))


# The outer ops: the families take x [N0], y [N1] and write z [N1, N0] (z[j, i] = f(x[i], y[j]));
# the public functions follow torch.outer instead (out[i, j] = f(a[i], b[j])), so they pass the
# family (x=b, y=a). Shapes in the declarations take at most one dim of each operand: a wrong
# rank reaches C++, which names it.

@kernel_op("outer_add", layout="rows")
def _outer_add(x: Tensor, y: Tensor) -> Tensor:
    return new_like(x, shape=(*y.shape[:1], *x.shape[:1]))


def _outer_add_grad(ctx: Any, dz: Any) -> tuple:
    return dz.sum(0), dz.sum(1)


_outer_add.register_autograd(_outer_add_grad, setup_context=lambda ctx, inputs, output: None)


def outer_add(x: Any, y: Any) -> Any:
    """Outer sum ``out[i, j] = x[i] + y[j]``, as ``x[:, None] + y[None, :]`` (shape
    ``[len(x), len(y)]``, like ``torch.outer``).

    ``x``, ``y``: vectors of one dtype (f32, f16, bf16); non-contiguous vectors are copied first.
    Runs the outer_add family with its operands (x=y, y=x): the family writes rows of its y.
    Differentiable through torch ops (the gradients are row and column sums of ``dout``).
    """
    return _outer_add(y, x)


@kernel_op("outer_mul_relu", layout="rows")
def _outer_mul_relu(x: Tensor, y: Tensor) -> Tensor:
    return new_like(x, shape=(*y.shape[:1], *x.shape[:1]))


def _outer_mul_relu_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(inputs[0], inputs[1], output)


def _outer_mul_relu_grad(ctx: Any, dz: Any) -> tuple:
    x, y, z = ctx.saved_tensors
    g = torch.where(z > 0, dz, 0.0)  # relu passes the gradient where its output is > 0 (not NaN)
    return torch.mv(g.t(), y), torch.mv(g, x)


_outer_mul_relu.register_autograd(_outer_mul_relu_grad, setup_context=_outer_mul_relu_setup_context)


def outer_mul_relu(x: Any, y: Any) -> Any:
    """Fused outer product and ReLU, ``out[i, j] = relu(x[i] * y[j])``, as
    ``torch.relu(torch.outer(x, y))`` (relu keeps NaN, as torch's does).

    ``x``, ``y``: vectors of one dtype (f32, f16, bf16); non-contiguous vectors are copied first.
    Runs the outer_mul_relu family with its operands (x=y, y=x). Differentiable through torch
    ops (the gradient masked where the output is 0, then two matrix-vector products).
    """
    return _outer_mul_relu(y, x)


@kernel_op("row_scale_relu", layout="rows")
def _row_scale_relu(x: Tensor, y: Tensor) -> Tensor:
    return new_like(x)


@kernel_op("row_scale_relu", name="row_scale_relu_backward", attrs={"backward": True}, layout="rows")
def _row_scale_relu_backward(x: Tensor, y: Tensor, dz: Tensor) -> tuple[Tensor, Tensor]:
    return new_like(x), new_like(y)


def _row_scale_relu_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(*inputs)


def _row_scale_relu_grad(ctx: Any, dz: Any) -> tuple:
    x, y = ctx.saved_tensors
    return _row_scale_relu_backward(x, y, dz)


_row_scale_relu.register_autograd(_row_scale_relu_grad, setup_context=_row_scale_relu_setup_context)


def row_scale_relu(x: Any, y: Any) -> Any:
    """Row-scaled ReLU, ``out[j, i] = relu(x[j, i] * y[j])``, as ``torch.relu(x * y[:, None])``.

    ``x``: [N1, N0], ``y``: [N1], one dtype (f32, f16, bf16). Padded rows of ``x`` are taken as
    they are; other layouts (a non-contiguous last dim, a strided ``y``) are copied first.
    Differentiable in ``x`` and ``y``: the backward runs hopperkit's row_scale_relu backward
    kernel (dx = 1(x y > 0) y dout, dy = the masked row sums of x dout).
    """
    return _row_scale_relu(x, y)


# ---- matmul, linear --------------------------------------------------------------------------

@kernel_op("gemm", name="matmul", layout="matrix")
def _matmul(a: Tensor, b: Tensor, bias: Tensor | None = None, activation: str | None = None) -> Tensor:
    # Both operands have the same rank here (the public wrappers broadcast a batch first).
    return new_like(a, shape=(*a.shape[:-1], b.shape[-1]))


def _matmul_setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
    a, b, bias, activation = inputs
    ctx.activation = activation
    ctx.has_bias = bias is not None
    # ReLU's derivative reads the output (y > 0 exactly where the pre-activation is, as torch's
    # relu backward reads it); GeLU's needs the pre-activation, which the backward recomputes
    # (one more GEMM instead of keeping an [M, N] tensor alive).
    ctx.save_for_backward(a, b, bias, output if activation == "relu" else None)


def _grad_b(a: Any, dz: Any, b: Any) -> Any:
    """dB = A^T dZ laid out as B is. For a column-major B (a Linear weight W [N, K] passed as the
    view W^T) the GEMM writes (dZ^T A) = dB^T row-major and returns its transpose view, so W's
    gradient arrives contiguous; computed row-major, autograd's accumulation into W.grad copied
    it into W's layout with a strided copy (about 175 us for a [20480, 2560] bf16 weight, H200)."""
    if b.dim() >= 2 and b.stride(-2) == 1 and b.stride(-1) != 1:
        return _matmul(dz.transpose(-1, -2), a, None, None).transpose(-1, -2)
    return _matmul(a.transpose(-1, -2), dz, None, None)


def _matmul_grad(ctx: Any, dy: Any) -> tuple:
    a, b, bias, y = ctx.saved_tensors
    if ctx.activation == "relu":
        dz = torch.ops.aten.threshold_backward(dy, y, 0)
    elif ctx.activation == "gelu":
        dz = torch.ops.aten.gelu_backward(dy, _matmul(a, b, bias, None), approximate="tanh")
    else:
        dz = dy
    # dA = dZ B^T and dB = A^T dZ: the transposes are views whose layout the kernels take
    # whenever A's and B's did (a row-major operand's transpose is column-major and back).
    da = _matmul(dz, b.transpose(-1, -2), None, None) if ctx.needs_input_grad[0] else None
    db = _grad_b(a, dz, b) if ctx.needs_input_grad[1] else None
    dbias = None
    if ctx.has_bias and ctx.needs_input_grad[2]:
        dbias = dz.sum(tuple(range(dz.dim() - 1)))
    return da, db, dbias, None


_matmul.register_autograd(_matmul_grad, setup_context=_matmul_setup_context)


def _batch_broadcast(a: Any, b: Any) -> tuple:
    """``a`` and ``b`` as 3-D operands of one batch size: a 2-D operand or a batch of one repeats
    as a stride-0 batch (a view, no copy). Batch sizes that do not broadcast pass unchanged (C++
    names them)."""
    na = a.shape[0] if a.ndim == 3 else 1
    nb = b.shape[0] if b.ndim == 3 else 1
    if na != nb and na != 1 and nb != 1:
        return a, b
    n = nb if na == 1 else na

    def expand(x: Any) -> Any:
        if x.ndim == 3 and x.shape[0] == n:
            return x
        x3 = x if x.ndim == 3 else x[None]
        if isinstance(x3, np.ndarray):
            return np.broadcast_to(x3, (n, *x3.shape[1:]))
        return x3.expand(n, -1, -1)

    return expand(a), expand(b)


def matmul(a: Any, b: Any, bias: Any = None, activation: str | None = None) -> Any:
    """``act(a @ b + bias)`` in one kernel, as ``torch.matmul`` plus a fused epilogue.

    ``a``: [M, K] or [batch, M, K]; ``b``: [K, N] or [batch, K, N]; bf16 or f16, one dtype (f32
    inputs are a TypeError: the kernels feed tensor cores with 16-bit operands). f32
    accumulation, one rounding to the output, which has ``a``'s dtype. ``bias``: [N] in that
    dtype, broadcast over rows and batches. ``activation``: None, ``"relu"`` or ``"gelu"`` — the
    tanh form, ``F.gelu(x, approximate="tanh")``, as in cuBLASLt's GELU epilogue.

    Layouts: each operand may be row-major or column-major (a transposed view such as
    ``w.t()`` or ``x.transpose(-1, -2)``), with padded leading dims and any batch stride; these
    run as they are. Other layouts (no unit stride in the last two dims, overlapping rows, a
    strided bias) are copied to contiguous first. A 3-D ``a`` with a 2-D ``b`` folds the batch
    into M (a view when ``a``'s batch and row strides allow, else a copy of ``a``); a 2-D ``a``
    with a 3-D ``b``, or a batch of one against a batch of n, repeats as a stride-0 batch (no
    copy; the kernels read it through an aligned copy, since TMA cannot describe a stride-0 batch).

    Differentiable in ``a``, ``b`` and ``bias``: dA = dZ B^T and dB = A^T dZ run through this
    op, dZ = dY times the activation's derivative (torch's relu/gelu backward; GeLU recomputes
    the pre-activation with one more GEMM), dbias = dZ summed over rows.
    """
    if a.ndim == 3 and b.ndim == 2:
        batch, m, k = a.shape
        y = _matmul(a.reshape(batch * m, k), b, bias, activation)
        return y.reshape(batch, m, b.shape[-1])
    if a.ndim == 3 or b.ndim == 3:
        a, b = _batch_broadcast(a, b)
    return _matmul(a, b, bias, activation)


def linear(x: Any, weight: Any, bias: Any = None) -> Any:
    """``x @ weight^T + bias``, as ``torch.nn.functional.linear``, through ``matmul``.

    ``x``: [*, in_features]; ``weight``: [out_features, in_features]; ``bias``: [out_features]
    or None; bf16 or f16, one dtype. ``weight^T`` is a column-major view, which the kernels read
    as it is (no copy); ``x``'s leading dims flatten into rows (a view when they collapse, else
    a copy). Differentiable in all three.
    """
    rows = x.reshape(-1, x.shape[-1])
    y = _matmul(rows, weight.swapaxes(-1, -2), bias, None)
    return y.reshape(*x.shape[:-1], weight.shape[0])
