"""CPU: the NumPy path (the fp64 reference, rounded once to the input dtype) of hk.softmax,
hk.rms_norm, hk.row_sum, hk.weighted_sum, hk.add_scalar, hk.outer_add, hk.outer_mul_relu and
hk.row_scale_relu, and of their backward ops, against independent NumPy formulas; N-D and
strided inputs, empty inputs; the make_problem errors (typed, naming the values) of every
family these ops reach."""

from __future__ import annotations

import numpy as np
import pytest

import hopperkit as hk

DTYPES = [np.float32, np.float16]
SHAPES = [(1, 1), (3, 5), (7, 203), (2, 3, 33)]


def ids(shape):
    return "x".join(map(str, shape))


def close(got, expect, dtype, atol=0.0):
    """One rounding of the fp64 value to `dtype`: half an ulp relative (an ulp to be safe), and
    near zero the subnormal spacing (f16); `atol` adds the fp64 summation-order differences of
    the formulas."""
    assert got.dtype == dtype
    rtol = float(np.finfo(dtype).eps)
    floor = 6e-8 if dtype == np.float16 else 1e-38
    np.testing.assert_allclose(got.astype(np.float64), expect, rtol=rtol, atol=floor + atol)


def normal(rng, shape, dtype, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(dtype)


def away_from_zero(rng, shape, dtype):
    """Values in ±[0.5, 1.5): products never round across relu's kink."""
    return (rng.choice([-1.0, 1.0], shape) * (0.5 + rng.random(shape))).astype(dtype)


def softmax_np(x, axis=-1):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def rms_norm_np(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w.astype(np.float64)


# ---- softmax -------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES, ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax(rng, dtype, shape):
    x = normal(rng, shape, dtype, 3.0)
    y = hk.softmax(x)
    assert y.shape == x.shape
    close(y, softmax_np(x), dtype)


@pytest.mark.parametrize("dim", [0, 1, -2])
def test_softmax_other_dims(rng, dim):
    x = normal(rng, (4, 6, 9), np.float32, 3.0)
    y = hk.softmax(x, dim)
    assert y.shape == x.shape
    close(y, softmax_np(x, dim), np.float32)


def test_softmax_specials():
    inf = np.inf
    x = np.array([[0.0, 1.0, np.nan], [1.0, inf, 0.0], [-inf, -inf, -inf], [1e4, 9990.0, -1e4],
                  [-inf, 0.0, 1.0]], np.float32)
    y = hk.softmax(x)
    assert np.isnan(y[:3]).all()  # NaN row, +inf row, all -inf row
    close(y[3:], softmax_np(np.nan_to_num(x[3:], neginf=-1e30)), np.float32)


def test_softmax_backward_formula(rng):
    y = hk.softmax(normal(rng, (5, 37), np.float32, 2.0))
    dy = normal(rng, (5, 37), np.float32)
    dx = hk.ops._softmax_backward(y, dy)
    y64, dy64 = y.astype(np.float64), dy.astype(np.float64)
    close(dx, y64 * (dy64 - (dy64 * y64).sum(-1, keepdims=True)), np.float32, atol=1e-15)


# ---- rms_norm ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES + [(4097,)], ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_norm(rng, dtype, shape):
    x = normal(rng, shape, dtype)
    w = normal(rng, shape[-1:], dtype)
    y = hk.rms_norm(x, w)
    assert y.shape == x.shape
    close(y, rms_norm_np(x, w, 1e-6), dtype)


def test_rms_norm_eps_matters(rng):
    x = normal(rng, (9, 77), np.float32, 0.05)
    w = normal(rng, (77,), np.float32)
    close(hk.rms_norm(x, w, 1e-2), rms_norm_np(x, w, 1e-2), np.float32)
    assert not np.allclose(hk.rms_norm(x, w, 1e-2), hk.rms_norm(x, w))


def test_rms_norm_backward_formula(rng):
    R, D = 6, 29
    x, w, dy = normal(rng, (R, D), np.float32), normal(rng, (D,), np.float32), normal(rng, (R, D), np.float32)
    y, rstd = hk.ops._rms_norm(x, w, 1e-6)
    x64, w64, dy64 = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
    r = 1 / np.sqrt((x64 * x64).mean(-1) + 1e-6)
    close(rstd, r, np.float32)
    dx, dw = hk.ops._rms_norm_backward(x, w, rstd, dy)
    r = rstd.astype(np.float64)[:, None]  # the backward reads the f32 rstd the forward wrote
    s = (w64 * dy64 * x64).sum(-1, keepdims=True)
    close(dx, r * w64 * dy64 - x64 * r**3 * s / D, np.float32, atol=1e-12)
    close(dw, (dy64 * x64 * r).sum(0), np.float32, atol=1e-12)


# ---- row_sum and weighted_sum --------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES + [(4097,)], ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_row_sum(rng, dtype, shape):
    x = normal(rng, shape, dtype)
    y = hk.row_sum(x)
    assert y.shape == shape[:-1]
    close(y, x.astype(np.float64).sum(-1), dtype, atol=1e-12)


def test_row_sum_padded_and_strided_inputs(rng):
    base = normal(rng, (6, 40), np.float32)
    padded = base[:, :33]  # rows 40 apart: the reference reads the view as it is
    np.testing.assert_array_equal(hk.row_sum(padded), hk.row_sum(np.ascontiguousarray(padded)))
    close(hk.row_sum(base.T), base.astype(np.float64).sum(0), np.float32, atol=1e-12)


@pytest.mark.parametrize("shape", SHAPES + [(4097,)], ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_weighted_sum(rng, dtype, shape):
    x = normal(rng, shape, dtype)
    w = normal(rng, shape[-1:], dtype)
    y = hk.weighted_sum(x, w)
    assert y.shape == shape[:-1]
    close(y, x.astype(np.float64) @ w.astype(np.float64), dtype, atol=1e-12)


def test_weighted_sum_backward_formula(rng):
    x, w, dy = normal(rng, (7, 13), np.float32), normal(rng, (13,), np.float32), normal(rng, (7,), np.float32)
    dx, dw = hk.ops._weighted_sum_backward(x, w, dy)
    x64, w64, dy64 = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
    close(dx, np.outer(dy64, w64), np.float32)
    close(dw, x64.T @ dy64, np.float32, atol=1e-12)


def test_empty_sums_are_zero():
    np.testing.assert_array_equal(hk.row_sum(np.zeros((3, 0), np.float32)), np.zeros(3, np.float32))
    np.testing.assert_array_equal(hk.weighted_sum(np.zeros((2, 0), np.float16), np.zeros(0, np.float16)),
                                  np.zeros(2, np.float16))
    assert hk.row_sum(np.zeros((0, 5), np.float32)).shape == (0,)
    assert hk.softmax(np.zeros((0, 5), np.float32)).shape == (0, 5)
    assert hk.rms_norm(np.zeros((0, 4), np.float32), np.ones(4, np.float32)).shape == (0, 4)
    # dw of zero rows is 0 (an empty sum), not uninitialized.
    dx, dw = hk.ops._weighted_sum_backward(np.zeros((0, 3), np.float32), np.ones(3, np.float32),
                                           np.zeros(0, np.float32))
    assert dx.shape == (0, 3)
    np.testing.assert_array_equal(dw, np.zeros(3, np.float32))


# ---- the broadcast ops ---------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1,), (4097,), (113, 203), (3, 4, 5)], ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_add_scalar(rng, dtype, shape):
    x = normal(rng, shape, dtype, 2.0)
    for c in (0.75, 1 / 3, -2):
        z = hk.add_scalar(x, c)
        close(z, x.astype(np.float64) + c, dtype)  # the fp64 sum, rounded once


@pytest.mark.parametrize("n,m", [(1, 1), (3, 5), (203, 113)])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_outer_ops_follow_torch_outer(rng, dtype, n, m):
    x, y = normal(rng, (n,), dtype), normal(rng, (m,), dtype)
    z = hk.outer_add(x, y)
    assert z.shape == (n, m)
    close(z, x.astype(np.float64)[:, None] + y.astype(np.float64)[None, :], dtype)
    z = hk.outer_mul_relu(x, y)
    assert z.shape == (n, m)
    close(z, np.maximum(np.outer(x.astype(np.float64), y.astype(np.float64)), 0), dtype)


def test_relu_keeps_nan():
    x = np.array([np.nan, 1.0, -1.0], np.float32)
    z = hk.outer_mul_relu(x, np.array([2.0, -3.0], np.float32))
    assert np.isnan(z[0]).all()
    np.testing.assert_array_equal(z[1:], np.array([[2.0, 0.0], [0.0, 3.0]], np.float32))
    z = hk.row_scale_relu(np.array([[np.nan, 1.0]], np.float32), np.array([2.0], np.float32))
    assert np.isnan(z[0, 0]) and z[0, 1] == 2.0


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (113, 203)], ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_row_scale_relu(rng, dtype, shape):
    x, y = normal(rng, shape, dtype), normal(rng, shape[:1], dtype)
    z = hk.row_scale_relu(x, y)
    close(z, np.maximum(x.astype(np.float64) * y.astype(np.float64)[:, None], 0), dtype)


def test_row_scale_relu_backward_formula(rng):
    x, y, dz = away_from_zero(rng, (9, 31), np.float32), away_from_zero(rng, (9,), np.float32), \
        normal(rng, (9, 31), np.float32)
    dx, dy = hk.ops._row_scale_relu_backward(x, y, dz)
    x64, y64, dz64 = x.astype(np.float64), y.astype(np.float64)[:, None], dz.astype(np.float64)
    on = x64 * y64 > 0
    close(dx, np.where(on, y64 * dz64, 0), np.float32)
    close(dy, np.where(on, x64 * dz64, 0).sum(1), np.float32, atol=1e-12)


# ---- problems built from arrays and their errors -------------------------------------------

def test_problems_keep_leading_dims():
    x = np.zeros((2, 3, 7), np.float32)
    q = hk.problem("softmax", x)
    assert q["key"] == "6x7_f32_fwd" and q["outputs"][0]["shape"] == (2, 3, 7)
    q = hk.problem("row_sum", x)
    assert q["key"] == "6x7_f32" and q["outputs"][0]["shape"] == (2, 3)
    padded = np.zeros((2, 3, 9), np.float32)[:, :, :7]
    assert hk.problem("row_sum", padded)["key"] == "6x7_f32_ld9"
    assert hk.problem("row_sum", np.zeros(5, np.float32))["outputs"][0]["shape"] == ()


def test_out_row_stride_attribute():
    x = np.zeros((4, 7), np.float32)
    q = hk.problem("softmax", x, out_row_stride=9)
    assert q["outputs"][0]["strides"] == (9, 1) and q["attrs"] == {"backward": False, "out_row_stride": 9}
    assert hk.problem("softmax", x)["attrs"] == {"backward": False}
    with pytest.raises(ValueError, match="softmax: out_row_stride must be at least the row length 7, got 5"):
        hk.problem("softmax", x, out_row_stride=5)
    with pytest.raises(TypeError, match="attribute out_row_stride must be an int"):
        hk.problem("outer_add", np.zeros(7, np.float32), np.zeros(4, np.float32), out_row_stride=8.0)
    with pytest.raises(ValueError, match="out_row_stride is dx's row stride"):
        hk.problem("weighted_sum", x, np.zeros(7, np.float32), out_row_stride=9)


def test_bad_input_raises_typed_errors():
    f32, f16 = np.float32, np.float16
    x = np.ones((4, 8), f32)
    with pytest.raises(TypeError, match="softmax: x is i32, expected f32, f16 or bf16"):
        hk.softmax(np.ones((4, 8), np.int32))
    with pytest.raises(TypeError, match="input 0 is float64"):
        hk.row_sum(np.ones((4, 8)))
    with pytest.raises(ValueError, match="softmax: x must have at least one dimension"):
        hk.softmax(np.ones((), f32))
    with pytest.raises(ValueError, match=r"rmsnorm: g has shape \[7\], expected \[8\]"):
        hk.rms_norm(x, np.ones(7, f32))
    with pytest.raises(TypeError, match="rmsnorm: g is f16, expected f32"):
        hk.rms_norm(x, np.ones(8, f16))
    with pytest.raises(ValueError, match="rmsnorm: eps must be finite and >= 0, got -1"):
        hk.rms_norm(x, np.ones(8, f32), -1.0)
    with pytest.raises(ValueError, match=r"weighted_sum: w has shape \[9\], expected \[8\]"):
        hk.weighted_sum(x, np.ones(9, f32))
    with pytest.raises(ValueError, match=r"outer_add: x and y must be vectors, got \[4x8\] and \[3\]"):
        hk.outer_add(np.ones(3, f32), x)
    with pytest.raises(TypeError, match="outer_mul_relu: y is f16, expected f32"):
        hk.outer_mul_relu(np.ones(3, f16), np.ones(3, f32))
    with pytest.raises(ValueError, match=r"row_scale_relu: y has shape \[8\], expected \[4\]"):
        hk.row_scale_relu(x, np.ones(8, f32))
    with pytest.raises(ValueError, match=r"row_scale_relu: x must be \[N1, N0\], got \[2x2x2\]"):
        hk.row_scale_relu(np.ones((2, 2, 2), f32), np.ones(2, f32))
    with pytest.raises(ValueError, match=r"softmax_backward: dy has shape \[4x9\] but y has \[4x8\]"):
        hk.ops._softmax_backward(x, np.ones((4, 9), f32))
    with pytest.raises(ValueError, match=r"rmsnorm_backward: rstd has shape \[5\], expected \[4\]"):
        hk.ops._rms_norm_backward(x, np.ones(8, f32), np.ones(5, f32), x)


def test_attribute_and_input_count_errors():
    x = np.ones((4, 8), np.float32)
    with pytest.raises(ValueError, match="unknown attribute.*epsilon; rmsnorm takes eps, backward, out_row_stride"):
        hk.reference("rmsnorm", x, np.ones(8, np.float32), epsilon=1e-5)
    with pytest.raises(ValueError, match="add_scalar: needs the attribute c"):
        hk.reference("add_scalar", x)
    with pytest.raises(ValueError, match=r"row_sum: takes 1 input \(x\), got 2"):
        hk.reference("row_sum", x, x)
    with pytest.raises(ValueError, match=r"rmsnorm_backward: takes 4 inputs \(x, g, rstd, dy\), got 2"):
        hk.reference("rmsnorm", x, np.ones(8, np.float32), backward=True)
    with pytest.raises(ValueError, match=r"row_scale_relu_backward: takes 3 inputs \(x, y, dz\), got 2"):
        hk.reference("row_scale_relu", x, np.ones(4, np.float32), backward=True)
    with pytest.raises(NotImplementedError, match="add_scalar: x must be contiguous"):
        hk.reference("add_scalar", x[:, ::2], c=1.0)
    with pytest.raises(NotImplementedError, match="row_sum: x needs a contiguous last dimension"):
        hk.reference("row_sum", x[:, ::2])
