"""CPU: the kernel_op declaration mechanism (schema from annotations, fixed and None attributes,
output dtypes on the NumPy path)."""

from __future__ import annotations

import numpy as np
import pytest

import hopperkit as hk
from hopperkit._op import kernel_op, new_like, schema_of


def test_schemas_of_the_public_ops():
    assert hk.ops._gelu.schema == "(Tensor x, str approximate='none') -> Tensor"
    assert hk.ops._gelu_backward.schema == "(Tensor x, Tensor dy, str approximate='none') -> Tensor"


def test_schema_types_and_defaults():
    def f(a: Tensor, b: Tensor | None = None, act: str | None = None, eps: float = 1e-6,  # noqa: F821
          k: int = 3, flag: bool = False) -> tuple[Tensor, Tensor]:  # noqa: F821
        return a, a

    assert schema_of(f) == ("(Tensor a, Tensor? b=None, str? act=None, float eps=1e-06, SymInt k=3, "
                            "bool flag=False) -> (Tensor, Tensor)")


def test_schema_rejects_what_torch_cannot_express():
    def bad_type(a: Tensor, n: list) -> Tensor:  # noqa: F821
        return a

    def bad_return(a: Tensor) -> dict:  # noqa: F821
        return {}

    with pytest.raises(TypeError, match="parameter n is annotated 'list'"):
        schema_of(bad_type)
    with pytest.raises(TypeError, match="return annotation 'dict'"):
        schema_of(bad_return)


@kernel_op("gelu", name="test_gelu_tanh_fixed", attrs={"approximate": "tanh"})
def _gelu_tanh(x: Tensor, backward: bool | None = None) -> Tensor:  # noqa: F821
    return new_like(x, dtype="f32")


def test_fixed_attributes_none_attributes_and_output_dtype(rng):
    x = rng.standard_normal(50).astype(np.float16)
    y = _gelu_tanh(x)  # backward=None is left out: the family's default (forward)
    assert y.dtype == np.float32  # the declaration's output dtype, not the input's
    np.testing.assert_array_equal(y, hk.reference("gelu", x, approximate="tanh").astype(np.float32))
    with pytest.raises(ValueError, match=r"takes 2 inputs \(x, dy\), got 1"):
        _gelu_tanh(x, True)


def test_schemas_of_the_row_and_broadcast_ops():
    ops = hk.ops
    assert ops._softmax.schema == "(Tensor x) -> Tensor"
    assert ops._softmax_backward.schema == "(Tensor y, Tensor dy) -> Tensor"
    assert ops._rms_norm.schema == "(Tensor x, Tensor weight, float eps=1e-06) -> (Tensor, Tensor)"
    assert ops._rms_norm_backward.schema == "(Tensor x, Tensor weight, Tensor rstd, Tensor dy) -> (Tensor, Tensor)"
    assert ops._row_sum.schema == "(Tensor x) -> Tensor"
    assert ops._weighted_sum_backward.schema == "(Tensor x, Tensor w, Tensor dy) -> (Tensor, Tensor)"
    assert ops._add_scalar.schema == "(Tensor x, float c) -> Tensor"
    assert ops._outer_mul_relu.schema == "(Tensor x, Tensor y) -> Tensor"
    assert ops._row_scale_relu_backward.schema == "(Tensor x, Tensor y, Tensor dz) -> (Tensor, Tensor)"
    assert ops._matmul.schema == "(Tensor a, Tensor b, Tensor? bias=None, str? activation=None) -> Tensor"


def test_unknown_layout_is_a_value_error():
    with pytest.raises(ValueError, match="layout 'strided'; use one of contiguous, rows"):
        kernel_op("gelu", name="test_bad_layout", layout="strided")


def test_rows_layout_matches_what_make_problem_takes(torch_mod):
    """rows_layout_ok passes a tensor as it is exactly when the row families' make_problem takes
    it (otherwise the op copies it first)."""
    from hopperkit._op import rows_layout_ok

    t = torch_mod
    base = t.zeros(6, 4, 40)
    cases = [base, base[:, :, :33], base.view(24, 40)[:, 1:34], base[:, 1:3, :7], base[:1, :1], base[::2],
             base.transpose(1, 2), base[:, :, ::2], base[:, ::2, :], t.zeros(1, 5).expand(4, 5), t.zeros(40)[::2],
             t.zeros(3, 1).t(), t.zeros(0, 5).t()]
    for x in cases:
        try:
            hk.problem("row_sum", x)
            taken = True
        except NotImplementedError:
            taken = False
        ok = rows_layout_ok(x)
        assert taken or not ok, (tuple(x.shape), x.stride())  # never passes what C++ rejects
        # ...and copies only what C++ rejects, but for a last dim of length 1 with a stride (the
        # [rows, D] families' check_matrix wants stride 1 there whatever D).
        assert ok or not taken or x.stride(-1) != 1, (tuple(x.shape), x.stride())
        if x.dim() == 2 and x.numel():
            w = t.zeros(x.shape[-1])
            try:
                hk.problem("weighted_sum", x, w)
                assert rows_layout_ok(x), (tuple(x.shape), x.stride())
            except NotImplementedError:
                assert not rows_layout_ok(x), (tuple(x.shape), x.stride())
