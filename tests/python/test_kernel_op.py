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
