"""CPU, no torch needed: hk.matmul and hk.linear on NumPy arrays (the gemm family's fp64
reference, rounded once to f16) against a NumPy formula, in every layout, with the epilogues
and batches; the gemm problem that make_problem builds (layout from strides, attributes); and
its typed errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import hopperkit as hk

f16 = np.float16
LAYOUTS = ["nn", "nt", "tn", "tt"]


def gemm_np(a, b, bias=None, activation=None, alpha=1.0, beta=0.0, c_in=None):
    z = alpha * np.matmul(a.astype(np.float64), b.astype(np.float64))
    if c_in is not None:
        z = z + beta * c_in.astype(np.float64)
    if bias is not None:
        z = z + bias.astype(np.float64)
    if activation == "relu":
        z = np.maximum(z, 0.0)
    elif activation == "gelu":  # the tanh form
        z = 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))
    return z


def close(got, expect, dtype=f16):
    """One rounding of the fp64 value: half an ulp relative, the subnormal spacing near zero."""
    assert got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float64), expect, rtol=float(np.finfo(dtype).eps), atol=6e-8)


def operand(rng, rows, cols, col_major):
    if col_major:
        return rng.standard_normal((cols, rows)).astype(f16).T
    return rng.standard_normal((rows, cols)).astype(f16)


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_matmul(rng, layout, activation):
    a = operand(rng, 13, 37, layout[0] == "t")
    b = operand(rng, 37, 21, layout[1] == "t")
    bias = rng.standard_normal(21).astype(f16)
    close(hk.matmul(a, b), gemm_np(a, b))
    close(hk.matmul(a, b, bias, activation), gemm_np(a, b, bias, activation))


def test_matmul_batches(rng):
    a3 = rng.standard_normal((3, 9, 16)).astype(f16)
    b3 = rng.standard_normal((3, 16, 5)).astype(f16)
    a2, b2 = a3[0], b3[0]
    b3_cols = b3.transpose(0, 2, 1).copy().transpose(0, 2, 1)  # a batch of column-major B
    for a, b in [(a3, b3), (a3, b2), (a2, b3), (a3[:1], b3), (a3, b3[:1]), (a3, b3_cols)]:
        got = hk.matmul(a, b)
        expect = gemm_np(a, b)
        assert got.shape == expect.shape, (a.shape, b.shape)
        close(got, expect)


def test_linear(rng):
    x = rng.standard_normal((2, 4, 24)).astype(f16)
    w = rng.standard_normal((10, 24)).astype(f16)
    bias = rng.standard_normal(10).astype(f16)
    close(hk.linear(x, w, bias), gemm_np(x, w.T, bias))
    close(hk.linear(x[0, 0], w), gemm_np(x[0, 0][None], w.T)[0])


def test_empty_and_k_zero(rng):
    b = rng.standard_normal((8, 5)).astype(f16)
    assert hk.matmul(np.zeros((0, 8), f16), b).shape == (0, 5)
    bias = rng.standard_normal(5).astype(f16)
    got = hk.matmul(np.zeros((3, 0), f16), np.zeros((0, 5), f16), bias, "relu")
    close(got, np.broadcast_to(np.maximum(bias.astype(np.float64), 0), (3, 5)))


def test_reference_attributes(rng):
    a = rng.standard_normal((7, 11)).astype(f16)
    b = rng.standard_normal((11, 6)).astype(f16)
    c_in = rng.standard_normal((7, 6)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    got = hk.reference("gemm", a, b, c_in, bias, alpha=2.0, beta=-1.5, activation="gelu", out_dtype="f32")
    expect = gemm_np(a, b, bias, "gelu", alpha=2.0, beta=-1.5, c_in=c_in)
    np.testing.assert_allclose(got, expect, rtol=2.0**-23, atol=1e-12)  # rounded once to f32


def test_problem_reads_layouts_and_attributes():
    a = np.zeros((8, 24), f16)
    wt = np.zeros((40, 24), f16).T  # [24, 40] column-major: the Linear layout, "nt"
    p = hk.problem("gemm", a, wt)
    assert p["key"] == "m8_n40_k24_nt_f16_f16" and p["attrs"] == {}
    assert p["outputs"][0]["shape"] == (8, 40) and p["outputs"][0]["strides"] == (40, 1)
    padded = np.zeros((24, 64), f16).T[:8]  # [8, 24] column-major, leading dim 64
    q = hk.problem("gemm", padded, wt, np.zeros(40, np.float32), out_dtype="f32", activation="relu",
                   out_row_stride=48)
    assert q["key"] == "m8_n40_k24_tt_f16_f32_bias_relu_strided"
    assert q["attrs"] == {"activation": "relu", "out_dtype": "f32", "out_row_stride": 48}
    assert q["outputs"][0]["strides"] == (48, 1)
    r = hk.problem("gemm", np.zeros((1, 8, 24), f16), np.zeros((1, 24, 40), f16))
    assert r["key"] == "m8_n40_k24_b1_nn_f16_f16" and r["outputs"][0]["shape"] == (1, 8, 40)


def test_errors_are_typed_and_name_the_values():
    a, b = np.zeros((8, 16), f16), np.zeros((16, 8), f16)
    with pytest.raises(TypeError, match="gemm: a is f32, expected bf16 or f16"):
        hk.matmul(a.astype(np.float32), b.astype(np.float32))
    with pytest.raises(ValueError, match="K must match, got 16 and 15"):
        hk.matmul(a, np.zeros((15, 8), f16))
    with pytest.raises(ValueError, match=r"gemm: bias must be \[8\], got \[9\]"):
        hk.matmul(a, b, np.zeros(9, f16))
    with pytest.raises(ValueError, match='activation must be "none", "relu" or "gelu"'):
        hk.matmul(a, b, None, "tanh")
    with pytest.raises(ValueError, match="unknown attribute.*act;"):
        hk.problem("gemm", a, b, act="relu")
    with pytest.raises(ValueError, match=r"gemm: takes inputs \(a, b\[, bias\]\), got 1"):
        hk.problem("gemm", a)
    with pytest.raises(ValueError, match=r"gemm: takes inputs \(a, b, c_in\[, bias\]\), got 2"):
        hk.problem("gemm", a, b, beta=1.0)
    with pytest.raises(TypeError, match="gemm: out_dtype is i32, expected bf16, f16 or f32"):
        hk.problem("gemm", a, b, out_dtype="i32")
    with pytest.raises(ValueError, match="unknown dtype 'half-ish'"):
        hk.problem("gemm", a, b, out_dtype="half-ish")
    with pytest.raises(ValueError, match="gemm: out_row_stride must be at least .*8, got 7"):
        hk.problem("gemm", a, b, out_row_stride=7)
    with pytest.raises(ValueError, match="gemm: a is rank 3 and b is rank 2; give both a batch dim"):
        hk.problem("gemm", np.zeros((2, 8, 16), f16), b)
    with pytest.raises(NotImplementedError, match="gemm: a needs a unit stride along one of its last two dims"):
        hk.problem("gemm", np.zeros((8, 32), f16)[:, ::2], b)
    with pytest.raises(TypeError, match="gemm: c_in is f16 but c is f32"):
        hk.problem("gemm", a, b, np.zeros((8, 8), f16), beta=1.0, out_dtype="f32")
    with pytest.raises(ValueError, match=r"gemm: c_in has shape \[8x9\] but c has \[8x8\]"):
        hk.problem("gemm", a, b, np.zeros((8, 9), f16), beta=1.0)
