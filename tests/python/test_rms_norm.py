"""GPU: hk.rms_norm and hk.nn.RMSNorm against torch (F.rms_norm, torch.nn.RMSNorm): values on odd
shapes, padded and non-contiguous inputs, autograd through the rmsnorm backward kernel (dx and
dweight), gradcheck, opcheck, torch.compile(fullgraph=True), bad input. Plus the CPU-tensor path
(torch only, no GPU)."""

from __future__ import annotations

import pytest

import hopperkit as hk

torch = pytest.importorskip("torch", reason="the torch ops need torch: torch is not installed")

# One rounding to the dtype plus the f32 row sum of squares (a few f32 ulps relative to y).
TOL = {torch.float32: dict(atol=1e-5, rtol=2e-5), torch.float16: dict(atol=1e-5, rtol=2e-3),
       torch.bfloat16: dict(atol=1e-5, rtol=1.6e-2)}
DTYPES = list(TOL)
SHAPES = [(1, 1), (3, 3), (1, 4097), (7, 1023), (113, 203), (2, 5, 96), (5, 40000), (4097,)]


def randn(shape, dtype, device, scale=1.0):
    return (scale * torch.randn(shape, device=device, dtype=torch.float32)).to(dtype)


def ids(shape):
    return "x".join(map(str, shape))


def rms_norm64(x, w, eps=1e-6):
    """The f64 formula on the same (rounded) inputs."""
    xd = x.double()
    return xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + eps) * w.double()


@pytest.mark.parametrize("shape", SHAPES, ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_torch(cuda, dtype, shape):
    x = randn(shape, dtype, cuda)
    w = randn(shape[-1:], dtype, cuda)
    y = hk.rms_norm(x, w)
    assert y.dtype == dtype and y.shape == x.shape and y.device == x.device
    torch.testing.assert_close(y, rms_norm64(x, w).to(dtype), **TOL[dtype])
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x, shape[-1:], w, 1e-6), **TOL[dtype])


def test_eps(cuda):
    x = randn((9, 77), torch.float32, cuda, 0.05)
    w = randn((77,), torch.float32, cuda)
    torch.testing.assert_close(hk.rms_norm(x, w, 1e-2), rms_norm64(x, w, 1e-2).float(), **TOL[torch.float32])


def test_padded_rows_run_in_place_and_other_layouts_are_copied(cuda):
    base = randn((64, 1040), torch.bfloat16, cuda)
    w = randn((1000,), torch.bfloat16, cuda)
    padded = base[:, :1000]
    batched = base.view(8, 8, 1040)[:, :, 3:1003]
    for x in (padded, batched, base[::2, :1000], base[1:, 5:1005]):
        y = hk.rms_norm(x, w)
        assert y.shape == x.shape
        torch.testing.assert_close(y, rms_norm64(x, w).to(torch.bfloat16), **TOL[torch.bfloat16])
    wide = randn((2000,), torch.bfloat16, cuda)[::2]  # a strided weight is copied
    torch.testing.assert_close(hk.rms_norm(padded, wide), rms_norm64(padded, wide).to(torch.bfloat16),
                               **TOL[torch.bfloat16])
    xt = randn((1000, 64), torch.float32, cuda).t()  # a non-contiguous last dim: copied
    wf = randn((1000,), torch.float32, cuda)
    torch.testing.assert_close(hk.rms_norm(xt, wf), rms_norm64(xt, wf).float(), **TOL[torch.float32])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_autograd_matches_torch(cuda, dtype):
    x = randn((2, 37, 515), dtype, cuda).requires_grad_()
    w = randn((515,), dtype, cuda).requires_grad_()
    dy = randn((2, 37, 515), dtype, cuda)
    hk.rms_norm(x, w).backward(dy)
    xr = x.detach().double().requires_grad_()
    wr = w.detach().double().requires_grad_()
    rms_norm64(xr, wr).backward(dy.double())
    # dx: the row sum of g dy x in f32 (length 515) and one rounding; dw sums 74 rows.
    rtol = TOL[dtype]["rtol"]
    torch.testing.assert_close(x.grad, xr.grad.to(dtype), atol=1e-4, rtol=rtol)
    torch.testing.assert_close(w.grad, wr.grad.to(dtype), atol=1e-3, rtol=rtol)


def test_gradcheck_f64_promoted(cuda):
    x = torch.randn(7, 11, dtype=torch.float64, device=cuda, requires_grad=True)
    w = torch.randn(11, dtype=torch.float64, device=cuda, requires_grad=True)
    fn = lambda a, b: hk.rms_norm(a.float(), b.float(), 1e-5).double()  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, w), eps=1e-3, atol=1e-3, rtol=1e-2)


def test_opcheck(cuda):
    x = randn((13, 33), torch.float32, cuda).requires_grad_()
    w = randn((33,), torch.float32, cuda).requires_grad_()
    torch.library.opcheck(hk.ops._rms_norm.op, (x, w, 1e-6))
    _, rstd = hk.ops._rms_norm(x.detach(), w.detach(), 1e-6)
    dy = randn((13, 33), torch.float32, cuda)
    torch.library.opcheck(hk.ops._rms_norm_backward.op, (x.detach(), w.detach(), rstd, dy))


def test_compile_fullgraph(cuda):
    torch._dynamo.reset()
    m = hk.nn.RMSNorm(129, eps=1e-5).to(cuda)

    def f(x):
        return m(x * 2) + hk.rms_norm(x, m.weight, 1e-6)

    cf = torch.compile(f, fullgraph=True)
    x = randn((3, 37, 129), torch.float32, cuda)
    torch.testing.assert_close(cf(x), f(x), **TOL[torch.float32])
    xg = x.clone().requires_grad_()
    cf(xg).pow(2).sum().backward()
    gw = m.weight.grad.clone()
    m.weight.grad = None
    xr = x.clone().requires_grad_()
    f(xr).pow(2).sum().backward()
    torch.testing.assert_close(xg.grad, xr.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(gw, m.weight.grad, atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nn_rmsnorm_is_a_drop_in(cuda, dtype):
    ours = hk.nn.RMSNorm(96, eps=1e-5, device=cuda, dtype=dtype)
    theirs = torch.nn.RMSNorm(96, eps=1e-5, device=cuda, dtype=dtype)
    assert repr(ours) == repr(theirs)
    with torch.no_grad():
        ours.weight.copy_(randn((96,), dtype, cuda))
    theirs.load_state_dict(ours.state_dict())
    x = randn((4, 9, 96), dtype, cuda)
    torch.testing.assert_close(ours(x), theirs(x), **TOL[dtype])
    # eps=None is finfo(dtype).eps; several trailing dims normalize together.
    ours2 = hk.nn.RMSNorm([4, 24], device=cuda, dtype=dtype)
    theirs2 = torch.nn.RMSNorm([4, 24], device=cuda, dtype=dtype)
    x2 = x.view(4, 9, 4, 24)
    torch.testing.assert_close(ours2(x2), theirs2(x2), **TOL[dtype])
    plain = hk.nn.RMSNorm(96, elementwise_affine=False)
    assert plain.weight is None and list(plain.state_dict()) == []
    torch.testing.assert_close(plain(x), torch.nn.RMSNorm(96, elementwise_affine=False)(x), **TOL[dtype])


def test_nn_rmsnorm_casts_an_f32_weight(cuda):
    m = hk.nn.RMSNorm(64, device=cuda)  # f32 weight, bf16 activations (autocast-style models)
    x = randn((8, 64), torch.bfloat16, cuda).requires_grad_()
    y = m(x)
    assert y.dtype == torch.bfloat16
    y.float().sum().backward()
    assert m.weight.grad.dtype == torch.float32 and x.grad.dtype == torch.bfloat16
    with pytest.raises(ValueError, match=r"normalized_shape=\[64\] needs an input of shape \[\*, 64\]"):
        m(randn((8, 63), torch.bfloat16, cuda))


def test_export_keeps_the_custom_op(cuda):
    m = hk.nn.RMSNorm(64, eps=1e-5, device=cuda)
    x = randn((8, 64), torch.float32, cuda)
    ep = torch.export.export(m, (x,))
    assert "torch.ops.hopperkit.rms_norm.default" in str(ep.graph_module.code)
    torch.testing.assert_close(ep.module()(x), m(x))


def test_empty_batch(cuda):
    x = torch.empty(0, 7, device=cuda, requires_grad=True)
    w = torch.ones(7, device=cuda, requires_grad=True)
    y = hk.rms_norm(x, w)
    assert y.shape == (0, 7)
    y.sum().backward()
    assert x.grad.shape == (0, 7)
    torch.testing.assert_close(w.grad, torch.zeros(7, device=cuda))  # a sum over no rows


def test_bad_input(cuda):
    x = torch.ones(4, 8, device=cuda)
    with pytest.raises(TypeError, match="rmsnorm: x is i32, expected f32, f16 or bf16"):
        hk.rms_norm(x.int(), torch.ones(8, device=cuda, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"rmsnorm: g has shape \[7\], expected \[8\]"):
        hk.rms_norm(x, torch.ones(7, device=cuda))
    with pytest.raises(TypeError, match="rmsnorm: g is bf16, expected f32"):
        hk.rms_norm(x, torch.ones(8, device=cuda, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="rmsnorm: eps must be finite and >= 0"):
        hk.rms_norm(x, torch.ones(8, device=cuda), float("nan"))
    with pytest.raises(ValueError, match="input 1 is on cpu"):
        hk.rms_norm(x, torch.ones(8))
    w = torch.ones(8, device=cuda)  # the context still works
    torch.testing.assert_close(hk.rms_norm(x, w), rms_norm64(x, w).float(), **TOL[torch.float32])


def test_cpu_tensors_run_the_reference(torch_mod):
    x = randn((33, 65), torch.bfloat16, "cpu").requires_grad_()
    w = randn((65,), torch.bfloat16, "cpu").requires_grad_()
    y = hk.rms_norm(x, w)
    assert y.dtype == torch.bfloat16 and y.device.type == "cpu"
    torch.testing.assert_close(y, rms_norm64(x, w).to(torch.bfloat16), **TOL[torch.bfloat16])
    y.backward(torch.ones_like(y))
    assert x.grad.shape == x.shape and w.grad.shape == w.shape
    torch.library.opcheck(hk.ops._rms_norm.op, (x, w, 1e-6))
