"""CPU: the NumPy path (the fp64 reference) against an independent NumPy formula, and the
make_problem / Problem::attrs round trip for every registered family's test problems."""

from __future__ import annotations

import math

import numpy as np
import pytest

import hopperkit as hk

_erf = np.vectorize(math.erf)


def gelu_np(x: np.ndarray, approximate: str) -> np.ndarray:
    x = x.astype(np.float64)
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def gelu_grad_np(x: np.ndarray, approximate: str) -> np.ndarray:
    x = x.astype(np.float64)
    if approximate == "tanh":
        u = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
        t = np.tanh(u)
        du = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x**2)
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du
    return 0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(1,), (3,), (113, 203), (7, 3, 5)])
def test_reference_matches_numpy_formula(rng, approximate, shape):
    x = (3 * rng.standard_normal(shape)).astype(np.float32)
    got = hk.reference("gelu", x, approximate=approximate)
    assert got.dtype == np.float64 and got.shape == shape
    # libm and NumPy order the tanh/erf tails differently: 1e-12 relative, 1e-12 absolute near 0.
    np.testing.assert_allclose(got, gelu_np(x, approximate), rtol=1e-12, atol=1e-12)
    dy = rng.standard_normal(shape).astype(np.float32)
    dx = hk.reference("gelu", x, dy, approximate=approximate, backward=True)
    np.testing.assert_allclose(dx, dy * gelu_grad_np(x, approximate), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_public_op_on_numpy_rounds_to_input_dtype(rng, dtype, approximate):
    x = (3 * rng.standard_normal((37, 41))).astype(dtype)
    # One rounding of the fp64 value to the input dtype: an ulp relative, and near zero the
    # subnormal spacing (f16) or the fp64 formulas' own tail cancellation (f32).
    rtol = float(np.finfo(dtype).eps)
    atol = 6e-8 if dtype == np.float16 else 1e-12
    y = hk.gelu(x, approximate)
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y, gelu_np(x, approximate), rtol=rtol, atol=atol)
    dy = rng.standard_normal(x.shape).astype(dtype)
    dx = hk.gelu_backward(x, dy, approximate)
    assert dx.dtype == dtype
    np.testing.assert_allclose(dx, dy.astype(np.float64) * gelu_grad_np(x, approximate), rtol=rtol, atol=atol)


def test_default_is_erf_like_torch(rng):
    x = rng.standard_normal(64).astype(np.float32)
    np.testing.assert_array_equal(hk.gelu(x), hk.gelu(x, "none"))


def test_specials_and_empty():
    x = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 30.0, -30.0], np.float32)
    y = hk.gelu(x)
    # -inf * (1 + erf(-inf)) is -inf * 0: NaN, as in torch.nn.functional.gelu.
    np.testing.assert_array_equal(y, np.array([0.0, -0.0, np.nan, np.inf, np.nan, 30.0, -0.0], np.float32))
    e = hk.gelu(np.zeros((0, 5), np.float32))
    assert e.shape == (0, 5) and e.dtype == np.float32


def test_strided_and_readonly_numpy_inputs(rng):
    base = rng.standard_normal((16, 20)).astype(np.float32)
    view = base[:, ::2]  # the op copies non-contiguous NumPy inputs
    np.testing.assert_array_equal(hk.gelu(view), hk.gelu(np.ascontiguousarray(view)))
    flipped = base[::-1]
    np.testing.assert_array_equal(hk.gelu(flipped), hk.gelu(np.ascontiguousarray(flipped)))
    ro = base.copy()
    ro.setflags(write=False)
    np.testing.assert_array_equal(hk.gelu(ro), hk.gelu(base))


def test_mixed_or_foreign_inputs_are_type_errors():
    with pytest.raises(TypeError, match="hk.gelu: takes"):
        hk.gelu([1.0, 2.0])


def _host_array(spec: dict, rng: np.random.Generator):
    """A host array laid out as the spec says, or None when NumPy has no such dtype."""
    dtype = hk._core.NUMPY_DTYPES.get(spec["dtype"])
    if dtype is None:
        try:
            import torch
        except ImportError:
            return None
        shape, strides = spec["shape"], spec["strides"]
        span = 1 + sum((d - 1) * s for d, s in zip(shape, strides)) if all(shape) else 0
        base = torch.zeros(span, dtype=hk._core.torch_dtype(spec["dtype"]))
        return base.as_strided(shape, strides)
    shape, strides = spec["shape"], spec["strides"]
    itemsize = np.dtype(dtype).itemsize
    span = 1 + sum((d - 1) * s for d, s in zip(shape, strides)) if all(shape) else 0
    base = rng.standard_normal(max(span, 1)).astype(dtype)
    return np.lib.stride_tricks.as_strided(base, shape, [s * itemsize for s in strides])


@pytest.mark.parametrize("family", list(hk.families()))
def test_make_problem_round_trip(family, rng):
    """For every test problem: make_problem(tensors laid out as inputs(), attrs()) gives the same
    key, input and output specs — what hk.run and the torch ops rely on."""
    checked = unrepresentable = 0
    for p in hk._C.test_problems(family):
        arrays = [_host_array(s, rng) for s in p["inputs"]]
        if any(a is None for a in arrays):
            unrepresentable += 1  # bf16 / fp8 operands: NumPy has no array type for them
            continue
        try:
            q = hk.problem(family, *arrays, **p["attrs"])
        except NotImplementedError as e:
            if "make_problem" in str(e):
                pytest.skip(f"{family} has no Family::make_problem yet (docs/python.md): {e}")
            raise
        assert q["key"] == p["key"]
        assert q["attrs"] == p["attrs"]
        assert [(s["dtype"], s["shape"]) for s in q["inputs"]] == [(s["dtype"], s["shape"]) for s in p["inputs"]]
        assert q["outputs"] == p["outputs"]
        assert q["tolerances"] == p["tolerances"]
        checked += 1
    if checked == 0 and unrepresentable > 0:
        pytest.skip(f"{family}: all {unrepresentable} test problems have operands NumPy cannot hold (fp8, bf16)")
    assert checked > 0, f"{family}: no test problems"
