"""CPU: what the torch ops hand the bindings, checked without a GPU.

A CPU tensor subclass that reports itself as CUDA (``is_cuda``, ``get_device``) takes the launch
path of a CUDA tensor up to ``_C.launch``, which is replaced by a recorder: the one-pass common
case must launch on the current stream of the inputs' device with detached inputs and the
attributes the declaration gives (defaults torch's dispatcher drops filled back in), and must
leave what it does not handle (copies, mixed devices, empty inputs) to the general path. Also
the layout rules' shortcut for contiguous tensors and ``new_like``'s outputs.
"""

from __future__ import annotations

import numpy as np
import pytest

import hopperkit as hk
from hopperkit import _C, _core
from hopperkit._op import matrix_layout_ok, matrix_strides_ok, new_like, rows_layout_ok, rows_strides_ok

torch = pytest.importorskip("torch")


class _ReportsCuda(torch.Tensor):
    """A CPU tensor that says it is on CUDA device ``index`` (only what the launch path reads)."""

    index = 0

    @property
    def is_cuda(self):
        return True

    def get_device(self):
        return self.index


# One class per device, each deriving from the one before, so that torch's __torch_function__
# takes a call that mixes them.
_ON_DEVICE = {}
for _i in range(3):
    _ON_DEVICE[_i] = type(f"_ReportsCuda{_i}", (_ON_DEVICE.get(_i - 1, _ReportsCuda),), {"index": _i})


def _cuda(t, index=0):
    # The index is the class's, so that views and detach() (which keep the class) keep it too.
    return torch.Tensor._make_subclass(_ON_DEVICE[index], t, t.requires_grad)


@pytest.fixture
def launches(monkeypatch):
    """The _C.launch calls, as (family, variant, inputs, outputs, attrs, stream); the current
    stream of device i reads as 1000 + i."""
    calls = []
    monkeypatch.setattr(_C, "launch", lambda *args: calls.append(args) or "recorded")
    monkeypatch.setattr(_core, "_raw_stream", lambda index: 1000 + index)
    return calls


@pytest.fixture
def references(monkeypatch):
    calls = []
    real = _C.reference
    monkeypatch.setattr(_C, "reference", lambda *args: calls.append(args) or real(*args))
    return calls


def test_one_input_op_launches_on_the_current_stream(launches):
    x = _cuda(torch.randn(4, 8), index=1)
    y = hk.gelu(x)
    assert len(launches) == 1
    family, variant, inputs, outputs, attrs, stream = launches[0]
    assert (family, variant, attrs, stream) == ("gelu", "", {"approximate": "none"}, 1001)
    assert len(inputs) == 1 and inputs[0] is x
    assert len(outputs) == 1 and outputs[0].shape == x.shape and outputs[0].is_contiguous()
    assert y.shape == x.shape


def test_inputs_that_require_grad_are_detached(launches):
    x = _cuda(torch.randn(6, 8, requires_grad=True))
    w = _cuda(torch.randn(8, requires_grad=True))
    hk.rms_norm(x, w)
    (_, _, inputs, outputs, attrs, stream), = launches
    assert [t.requires_grad for t in inputs] == [False, False]  # DLPack refuses the others
    assert [t.data_ptr() for t in inputs] == [x.data_ptr(), w.data_ptr()]
    assert attrs == {"eps": 1e-6} and stream == 1000
    assert [tuple(o.shape) for o in outputs] == [(6, 8), (6,)] and outputs[1].dtype == torch.float32


def test_core_launch_detaches_and_finds_the_stream(launches):
    x = _cuda(torch.randn(5, requires_grad=True), index=2)
    out = _cuda(torch.empty(5), index=2)
    assert _core.launch("gelu", "v02_fused", [x], [out], {}) == "recorded"
    (_, variant, inputs, outputs, _, stream), = launches
    assert variant == "v02_fused" and stream == 1002
    assert not inputs[0].requires_grad and outputs[0] is out
    _core.launch("gelu", "", [torch.ones(5)], [torch.ones(5)], {})  # host tensors: stream 0, C++ names the error
    assert launches[-1][-1] == 0


def test_defaults_the_dispatcher_drops_are_filled_in(launches):
    # torch's dispatcher passes the kernel only the arguments up to the last non-default one.
    a, b = _cuda(torch.randn(4, 8).bfloat16()), _cuda(torch.randn(8, 3).bfloat16())
    bias = _cuda(torch.randn(3).bfloat16())
    hk.matmul(a, b)
    hk.matmul(a, b, bias, "relu")
    hk.matmul(a, _cuda(torch.randn(3, 8).bfloat16()).t())  # column-major B: taken as it is
    hk.gelu_backward(_cuda(torch.randn(3)), _cuda(torch.randn(3)), "tanh")
    hk.conv2d(_cuda(torch.randn(2, 4, 9, 9)), _cuda(torch.randn(4, 1, 3, 3)), padding=1, groups=4)
    got = [(call[0], len(call[2]), call[4]) for call in launches]
    assert got == [
        ("gemm", 2, {}),
        ("gemm", 3, {"activation": "relu"}),
        ("gemm", 2, {}),
        ("gelu", 2, {"approximate": "tanh", "backward": True}),
        ("conv2d", 2, {"stride_h": 1, "stride_w": 1, "pad_top": 1, "pad_bottom": 1, "pad_left": 1,
                       "pad_right": 1, "dilation_h": 1, "dilation_w": 1, "groups": 4, "layout": "nchw"}),
    ]
    assert launches[2][2][1].stride() == (1, 8)  # no copy


def test_what_the_common_case_leaves_to_the_general_path(launches, references):
    # Mixed devices, a layout to copy, an empty input with a non-empty output: none launches
    # from the common case. (The general path's copies and its device check read t.device,
    # which is the host here: it answers with the reference.)
    x0 = _cuda(torch.randn(4, 8))
    hk.gelu_backward(x0, _cuda(torch.randn(4, 8), index=1))
    hk.gelu(_cuda(torch.randn(8, 4)).t())
    hk.row_sum(_cuda(torch.randn(3, 0)))
    assert launches == [] and len(references) == 3
    assert hk.row_sum(_cuda(torch.randn(3, 0))).tolist() == [0.0, 0.0, 0.0]


def test_layout_rules_shortcut_agrees_with_the_full_rules():
    rng = np.random.default_rng(7)
    base = torch.zeros(4096)
    cases = [torch.zeros(3, 1, 5), torch.zeros(1, 7), torch.zeros(7, 1), torch.zeros(1), torch.zeros(()),
             torch.zeros(2, 0, 3), base.as_strided((4, 1), (1, 9)), base.as_strided((1, 4), (3, 1)),
             base.as_strided((3, 1, 4), (4, 100, 1)), base.as_strided((1,), (5,))]
    for _ in range(400):  # random shapes (size-1 dims included) and strides, some contiguous
        dim = int(rng.integers(1, 5))
        shape = tuple(int(s) for s in rng.integers(1, 4, dim))
        if rng.random() < 0.5:
            t = torch.zeros(shape)
        else:
            strides = tuple(int(s) for s in rng.integers(0, 13, dim))
            t = base.as_strided(shape, strides)
        cases.append(t)
    for t in cases:
        where = (tuple(t.shape), t.stride(), t.is_contiguous())
        assert rows_layout_ok(t) == rows_strides_ok(t), where
        assert matrix_layout_ok(t) == matrix_strides_ok(t), where


def test_new_like_outputs_are_contiguous():
    x = torch.randn(6, 4, dtype=torch.bfloat16).t()
    for out, shape, dtype in ((new_like(x), (4, 6), torch.bfloat16),
                              (new_like(x, dtype="f32"), (4, 6), torch.float32),
                              (new_like(x, shape=x.shape[:1], dtype="f32"), (4,), torch.float32),
                              (new_like(x, shape=[2, 3]), (2, 3), torch.bfloat16)):
        assert tuple(out.shape) == shape and out.dtype == dtype and out.is_contiguous()
        assert out.device == x.device and not out.requires_grad
    assert not new_like(torch.ones(3, requires_grad=True)).requires_grad
    a = np.ones((3, 5), np.float16)[:, ::2]
    assert new_like(a).shape == (3, 3) and new_like(a, dtype="f32").dtype == np.float32
    assert new_like(a, shape=(2,)).shape == (2,)
    with pytest.raises(NotImplementedError, match="hopperkit dtype f64 has no torch dtype"):
        new_like(x, dtype="f64")
