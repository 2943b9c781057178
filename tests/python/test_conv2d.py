"""hk.conv2d and hk.conv2d_single_channel: the fp64 reference path against independent NumPy
implementations (CPU, no torch needed): every padding kind ('same' with an even kernel
included), stride and dilation 1-3, groups 1 / 2 / C, bias; the GPU path against
torch.nn.functional.conv2d in NCHW and channels_last, autograd through the backward ops, opcheck,
torch.compile and bad input."""

from __future__ import annotations

import numpy as np
import pytest

import hopperkit as hk
from hopperkit import conv


# ---- independent NumPy oracles (float64) -----------------------------------------------------

def np_conv2d(x, w, b=None, stride=(1, 1), pad=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    """F.conv2d on float64 NCHW arrays; pad = (top, bottom, left, right)."""
    x = np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), (pad[0], pad[1]), (pad[2], pad[3])))
    w = np.asarray(w, np.float64)
    n, c, h, wd = x.shape
    co, cg, kh, kw = w.shape
    sh, sw = stride
    dh, dw = dilation
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (wd - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, co, oh, ow))
    kg = co // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        for ky in range(kh):
            for kx in range(kw):
                patch = xs[:, :, ky * dh: ky * dh + sh * (oh - 1) + 1: sh, kx * dw: kx * dw + sw * (ow - 1) + 1: sw]
                y[:, g * kg:(g + 1) * kg] += np.einsum("ncij,oc->noij", patch, w[g * kg:(g + 1) * kg, :, ky, kx])
    if b is not None:
        y += np.asarray(b, np.float64)[None, :, None, None]
    return y


def np_single(x, k):
    x = np.asarray(x, np.float64)
    k = np.asarray(k, np.float64)
    n, h, w = x.shape
    kh, kw = k.shape
    xp = np.pad(x, ((0, 0), (0, kh - 1), (0, kw - 1)))
    z = np.zeros_like(x)
    for a in range(kh):
        for b in range(kw):
            z += k[a, b] * xp[:, a:a + h, b:b + w]
    return z


CASES = [
    # (N, C, H, W, Cout, kH, kW, stride, padding, dilation, groups, bias)
    (2, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, True),
    (1, 4, 33, 33, 6, 3, 3, 2, 1, 1, 2, False),
    (1, 4, 7, 33, 4, 4, 4, 1, "same", 1, 1, True),
    (1, 4, 7, 7, 4, 2, 3, 1, "same", 2, 4, False),
    (2, 6, 7, 7, 6, 7, 7, 1, 3, 1, 6, True),
    (1, 3, 65, 7, 2, 3, 3, 3, "valid", 3, 1, False),
    (1, 2, 1, 1, 3, 1, 1, 1, 0, 1, 1, True),
    (1, 2, 7, 1, 2, 3, 1, (2, 1), (1, 0), (1, 2), 2, False),
]


def _resolve(padding, kh, kw, dilation):
    d = dilation if isinstance(dilation, tuple) else (dilation, dilation)
    if padding == "valid":
        return (0, 0, 0, 0)
    if padding == "same":
        th, tw = d[0] * (kh - 1), d[1] * (kw - 1)
        return (th // 2, th - th // 2, tw // 2, tw - tw // 2)
    p = padding if isinstance(padding, tuple) else (padding, padding)
    return (p[0], p[0], p[1], p[1])


def _pair(v):
    return v if isinstance(v, tuple) else (v, v)


@pytest.mark.parametrize("case", CASES)
def test_numpy_reference_matches_numpy_oracle(rng, case):
    n, c, h, w, co, kh, kw, stride, padding, dilation, groups, bias = case
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.uniform(-1, 1, (co, c // groups, kh, kw)).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32) if bias else None
    got = hk.conv2d(x, wt, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    want = np_conv2d(x, wt, b, _pair(stride), _resolve(padding, kh, kw, dilation), _pair(dilation), groups)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_numpy_backward_ops_match_finite_differences(rng):
    x = rng.standard_normal((1, 4, 7, 9)).astype(np.float32)
    wt = rng.uniform(-1, 1, (4, 2, 3, 2)).astype(np.float32)
    attrs = (2, 1, 1, 0, 2, 1, 2, 1, 2, "nchw")  # stride, pad t/b/l/r, dilation, groups, layout
    y = conv._conv2d(x, wt, None, *attrs)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx = conv._conv2d_backward_data(dy, wt, 7, 9, *attrs)
    dw = conv._conv2d_backward_weight(x, dy, 3, 2, *attrs)
    # conv is linear in each operand: sum(y * dy) = sum(x * dx) = sum(w * dw) (f32 outputs).
    dot = lambda a, b: float((a.astype(np.float64) * b.astype(np.float64)).sum())  # noqa: E731
    assert np.isclose(dot(y, dy), dot(x, dx), rtol=1e-5, atol=1e-4)
    assert np.isclose(dot(y, dy), dot(wt, dw), rtol=1e-5, atol=1e-4)
    assert dx.shape == x.shape and dw.shape == wt.shape


def test_numpy_single_channel_matches_puzzle_definition(rng):
    for shape, k in [((2, 7, 33), (3, 3)), ((1, 1, 1), (4, 4)), ((3, 65, 7), (2, 5))]:
        x = rng.standard_normal(shape).astype(np.float32)
        kk = rng.uniform(-1, 1, k).astype(np.float32)
        np.testing.assert_allclose(hk.conv2d_single_channel(x, kk), np_single(x, kk), rtol=1e-5, atol=1e-5)


def test_numpy_bad_input(rng):
    x = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    with pytest.raises(ValueError, match="channel mismatch"):
        hk.conv2d(x, rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    with pytest.raises(ValueError, match="kernel larger than the padded input"):
        hk.conv2d(x, rng.standard_normal((4, 4, 9, 9)).astype(np.float32))
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        hk.conv2d(x, rng.standard_normal((4, 4, 3, 3)).astype(np.float32), stride=2, padding="same")
    with pytest.raises(ValueError, match="x must have rank 3"):
        hk.conv2d_single_channel(x, np.ones((3, 3), np.float32))
    with pytest.raises(TypeError, match="k is f16 but x is f32"):
        hk.conv2d_single_channel(x[0], np.ones((3, 3), np.float16))


def test_variants_listed():
    assert {"v01_direct", "baseline_cudnn", "v02_depthwise_nhwc"} <= {v.name for v in hk.variants("conv2d")}
    assert {"v01_naive", "v02_tiled_smem"} <= {v.name for v in hk.variants("conv2d_single")}


# ---- GPU: against torch -------------------------------------------------------------------

TOL = {"float32": (1e-4, 1e-4), "bfloat16": (2e-2, 2e-2), "float16": (2e-3, 2e-3)}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_matches_torch(cuda, dtype, channels_last, case):
    import torch
    import torch.nn.functional as F
    n, c, h, w, co, kh, kw, stride, padding, dilation, groups, bias = case
    dt = getattr(torch, dtype)
    torch.manual_seed(0)
    x = torch.randn(n, c, h, w, device=cuda, dtype=dt)
    wt = torch.empty(co, c // groups, kh, kw, device=cuda, dtype=dt).uniform_(-1, 1)
    b = torch.randn(co, device=cuda, dtype=dt) if bias else None
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
        wt = wt.to(memory_format=torch.channels_last)
    got = hk.conv2d(x, wt, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    want = F.conv2d(x.double(), wt.double(), None if b is None else b.double(), stride, padding, dilation, groups)
    assert got.shape == want.shape and got.dtype == dt
    if channels_last and got.numel() > 0:
        assert got.is_contiguous(memory_format=torch.channels_last)
    rtol, atol = TOL[dtype]
    scale = max(1.0, float(np.sqrt(c // groups * kh * kw)))
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol * scale)


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_autograd_matches_torch(cuda, channels_last, case):
    import torch
    import torch.nn.functional as F
    n, c, h, w, co, kh, kw, stride, padding, dilation, groups, bias = case
    torch.manual_seed(1)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = torch.randn(n, c, h, w, device=cuda, dtype=torch.float64).float().to(memory_format=fmt).requires_grad_()
    wt = torch.randn(co, c // groups, kh, kw, device=cuda).to(memory_format=fmt).requires_grad_()
    b = torch.randn(co, device=cuda, requires_grad=True) if bias else None
    y = hk.conv2d(x, wt, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    dy = torch.randn_like(y)
    grads = torch.autograd.grad(y, [x, wt] + ([b] if bias else []), dy)
    ref = [t.detach().double().requires_grad_() for t in [x, wt] + ([b] if bias else [])]
    yr = F.conv2d(ref[0], ref[1], ref[2] if bias else None, stride, padding, dilation, groups)
    want = torch.autograd.grad(yr, ref, dy.double())
    for g, r in zip(grads, want):
        torch.testing.assert_close(g.double(), r, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("k", [3, 4, 7, 33])
def test_single_channel_matches_reference(cuda, dtype, k):
    import torch
    dt = getattr(torch, dtype)
    x = torch.randn(3, 65, 136, device=cuda, dtype=dt)
    kk = torch.empty(k, k, device=cuda, dtype=dt).uniform_(-1, 1)
    got = hk.conv2d_single_channel(x, kk)
    want = torch.from_numpy(np_single(x.float().cpu().numpy(), kk.float().cpu().numpy())).to(cuda)
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol * k)
    # The same via F.conv2d: pad bottom/right by k - 1, cross-correlate.
    import torch.nn.functional as F
    ref = F.conv2d(F.pad(x.double()[:, None], (0, k - 1, 0, k - 1)), kk.double()[None, None])[:, 0]
    torch.testing.assert_close(got.double(), ref, rtol=rtol, atol=atol * k)


def test_opcheck(cuda):
    import torch
    x = torch.randn(2, 4, 9, 9, device=cuda, requires_grad=True)
    wt = torch.randn(6, 2, 3, 3, device=cuda, requires_grad=True)
    b = torch.randn(6, device=cuda, requires_grad=True)
    torch.library.opcheck(conv._conv2d.op, (x, wt, b, 2, 1, 1, 1, 0, 2, 1, 1, 2, "nchw"))
    torch.library.opcheck(conv._conv2d_single_channel.op, (x[:, 0].detach(), wt[0, 0].detach()))


def test_compile_fullgraph(cuda):
    import torch
    import torch.nn.functional as F
    x = torch.randn(2, 8, 16, 16, device=cuda).to(memory_format=torch.channels_last)
    wt = torch.randn(8, 1, 3, 3, device=cuda)

    def f(a, b):
        return hk.conv2d(a, b, padding="same", groups=8).relu()

    got = torch.compile(f, fullgraph=True)(x, wt)
    torch.testing.assert_close(got, F.conv2d(x, wt, padding="same", groups=8).relu(), rtol=1e-4, atol=1e-4)


def test_bad_input_on_gpu(cuda):
    import torch
    x = torch.randn(1, 4, 8, 8, device=cuda)
    with pytest.raises(ValueError, match="channel mismatch"):
        hk.conv2d(x, torch.randn(4, 3, 3, 3, device=cuda))
    with pytest.raises(TypeError):
        hk.conv2d(x, torch.randn(4, 4, 3, 3, device=cuda, dtype=torch.bfloat16))
