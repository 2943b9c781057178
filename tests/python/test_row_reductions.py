"""GPU: hk.row_sum (x.sum(-1)) and hk.weighted_sum (x @ w) against torch: values on odd shapes,
padded and non-contiguous inputs, empty rows, autograd (row_sum's broadcast in torch ops,
weighted_sum's backward kernel), gradcheck, opcheck, torch.compile(fullgraph=True), bad input.
Plus the CPU-tensor path (torch only, no GPU)."""

from __future__ import annotations

import math

import pytest

import hopperkit as hk

torch = pytest.importorskip("torch", reason="the torch ops need torch: torch is not installed")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
OUT_RTOL = {torch.float32: 2e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
SHAPES = [(1, 1), (3, 1), (1, 3), (7, 4097), (113, 203), (2, 3, 1023), (4096, 31), (2, 100003), (4097,)]


def randn(shape, dtype, device, scale=1.0):
    return (scale * torch.randn(shape, device=device, dtype=torch.float32)).to(dtype)


def ids(shape):
    return "x".join(map(str, shape))


def sum_tol(dtype, n):
    """A sum of n random-sign terms of size ~1 in f32 (error ~ sqrt(n) ulps of its sqrt(n)
    scale, with room for the order), then one rounding to the dtype."""
    return dict(atol=8 * n * 2.0**-24 + 1e-6, rtol=OUT_RTOL[dtype])


# ---- row_sum -------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES, ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_row_sum_matches_torch(cuda, dtype, shape):
    x = randn(shape, dtype, cuda)
    y = hk.row_sum(x)
    assert y.dtype == dtype and y.shape == x.shape[:-1] and y.device == x.device
    torch.testing.assert_close(y, x.double().sum(-1).to(dtype), **sum_tol(dtype, shape[-1]))


def test_row_sum_layouts(cuda):
    base = randn((64, 1040), torch.bfloat16, cuda)
    for x in (base[:, :1000], base.view(8, 8, 1040)[:, :, 3:1003], base.t(), base[:, ::2], base[:1, :7]):
        y = hk.row_sum(x)
        assert y.shape == x.shape[:-1]
        torch.testing.assert_close(y, x.double().sum(-1).to(torch.bfloat16), **sum_tol(torch.bfloat16, x.shape[-1]))


def test_row_sum_specials_and_empty_rows(cuda):
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[1.0, nan, 2.0], [1.0, 2.0, inf], [-inf, 1.0, 2.0], [inf, 0.0, -inf]], device=cuda)
    torch.testing.assert_close(hk.row_sum(x), torch.tensor([nan, inf, -inf, nan], device=cuda), equal_nan=True)
    e = torch.empty(5, 0, device=cuda, dtype=torch.float16)
    torch.testing.assert_close(hk.row_sum(e), torch.zeros(5, device=cuda, dtype=torch.float16))
    assert hk.row_sum(torch.empty(0, 4, device=cuda)).shape == (0,)


def test_row_sum_autograd(cuda):
    x = randn((2, 37, 129), torch.float32, cuda).requires_grad_()
    dy = randn((2, 37), torch.float32, cuda)
    hk.row_sum(x).backward(dy)
    torch.testing.assert_close(x.grad, dy.unsqueeze(-1).expand_as(x), rtol=0, atol=0)
    x64 = torch.randn(7, 11, dtype=torch.float64, device=cuda, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: hk.row_sum(t.float()).double(), (x64,), eps=1e-3, atol=1e-3,
                                    rtol=1e-2)


def test_row_sum_opcheck_and_compile(cuda):
    x = randn((13, 33), torch.float32, cuda).requires_grad_()
    torch.library.opcheck(hk.ops._row_sum.op, (x,))
    torch._dynamo.reset()

    def f(t):
        return hk.row_sum(t * 2).exp()

    cf = torch.compile(f, fullgraph=True, dynamic=True)
    for n in (33, 4097):
        xn = randn((5, n), torch.float32, cuda).requires_grad_()
        torch.testing.assert_close(cf(xn), f(xn), rtol=1e-5, atol=1e-6)
        cf(xn).sum().backward()
        g = xn.grad.clone()
        xn.grad = None
        f(xn).sum().backward()
        torch.testing.assert_close(g, xn.grad, rtol=1e-5, atol=1e-6)


def test_row_sum_bad_input(cuda):
    with pytest.raises(TypeError, match="row_sum: x is i32, expected f32, f16 or bf16"):
        hk.row_sum(torch.ones(4, 8, dtype=torch.int32, device=cuda))
    with pytest.raises(ValueError, match="row_sum: x must have at least one dimension"):
        hk.row_sum(torch.ones((), device=cuda))
    with pytest.raises(TypeError, match="row_sum: input 0 is float64"):
        hk.row_sum(torch.ones(4, 8, dtype=torch.float64, device=cuda))


# ---- weighted_sum --------------------------------------------------------------------------

@pytest.mark.parametrize("shape", SHAPES, ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_weighted_sum_matches_torch(cuda, dtype, shape):
    x = randn(shape, dtype, cuda)
    w = randn(shape[-1:], dtype, cuda)
    y = hk.weighted_sum(x, w)
    assert y.dtype == dtype and y.shape == x.shape[:-1]
    torch.testing.assert_close(y, (x.double() @ w.double()).to(dtype), **sum_tol(dtype, shape[-1]))


def test_weighted_sum_layouts(cuda):
    base = randn((64, 1040), torch.float16, cuda)
    w = randn((1000,), torch.float16, cuda)
    for x in (base[:, :1000], base.view(8, 8, 1040)[:, :, 3:1003], base[1:, 5:1005], base[::3, 7:1007]):
        torch.testing.assert_close(hk.weighted_sum(x, w), (x.double() @ w.double()).half(),
                                   **sum_tol(torch.float16, 1000))
    w2 = randn((2000,), torch.float16, cuda)[::2]  # a strided w is copied
    torch.testing.assert_close(hk.weighted_sum(base[:, :1000], w2), (base[:, :1000].double() @ w2.double()).half(),
                               **sum_tol(torch.float16, 1000))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_weighted_sum_autograd(cuda, dtype):
    x = randn((3, 41, 517), dtype, cuda).requires_grad_()
    w = randn((517,), dtype, cuda).requires_grad_()
    dy = randn((3, 41), dtype, cuda)
    hk.weighted_sum(x, w).backward(dy)
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    (xr @ wr).backward(dy.double())
    torch.testing.assert_close(x.grad, xr.grad.to(dtype), atol=1e-6, rtol=OUT_RTOL[dtype])
    torch.testing.assert_close(w.grad, wr.grad.to(dtype), **sum_tol(dtype, 123))


def test_weighted_sum_gradcheck(cuda):
    x = torch.randn(7, 11, dtype=torch.float64, device=cuda, requires_grad=True)
    w = torch.randn(11, dtype=torch.float64, device=cuda, requires_grad=True)
    fn = lambda a, b: hk.weighted_sum(a.float(), b.float()).double()  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, w), eps=1e-3, atol=1e-3, rtol=1e-2)


def test_weighted_sum_opcheck_and_compile(cuda):
    x = randn((13, 33), torch.float32, cuda).requires_grad_()
    w = randn((33,), torch.float32, cuda).requires_grad_()
    torch.library.opcheck(hk.ops._weighted_sum.op, (x, w))
    torch.library.opcheck(hk.ops._weighted_sum_backward.op, (x.detach(), w.detach(), randn((13,), torch.float32, cuda)))
    torch._dynamo.reset()

    def f(a, b):
        return torch.tanh(hk.weighted_sum(a, b)) * 3

    cf = torch.compile(f, fullgraph=True)
    xb = randn((4, 9, 33), torch.float32, cuda).requires_grad_()
    torch.testing.assert_close(cf(xb, w), f(xb, w), rtol=1e-5, atol=1e-6)
    cf(xb, w).sum().backward()
    gx, gw = xb.grad.clone(), w.grad.clone()
    xb.grad = w.grad = None
    f(xb, w).sum().backward()
    torch.testing.assert_close(gx, xb.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(gw, w.grad, rtol=1e-5, atol=1e-5)


def test_weighted_sum_empty(cuda):
    torch.testing.assert_close(hk.weighted_sum(torch.empty(3, 0, device=cuda), torch.empty(0, device=cuda)),
                               torch.zeros(3, device=cuda))
    x = torch.empty(0, 5, device=cuda, requires_grad=True)
    w = torch.ones(5, device=cuda, requires_grad=True)
    hk.weighted_sum(x, w).sum().backward()
    torch.testing.assert_close(w.grad, torch.zeros(5, device=cuda))


def test_weighted_sum_bad_input(cuda):
    x = torch.ones(4, 8, device=cuda)
    with pytest.raises(ValueError, match=r"weighted_sum: w has shape \[7\], expected \[8\]"):
        hk.weighted_sum(x, torch.ones(7, device=cuda))
    with pytest.raises(TypeError, match="weighted_sum: w is f16, expected f32"):
        hk.weighted_sum(x, torch.ones(8, device=cuda, dtype=torch.float16))
    with pytest.raises(ValueError, match="input 1 is on cpu"):
        hk.weighted_sum(x, torch.ones(8))
    torch.testing.assert_close(hk.weighted_sum(x, torch.ones(8, device=cuda)), torch.full((4,), 8.0, device=cuda))


def test_cpu_tensors_run_the_reference(torch_mod):
    x = randn((33, 65), torch.bfloat16, "cpu").requires_grad_()
    w = randn((65,), torch.bfloat16, "cpu").requires_grad_()
    y = hk.weighted_sum(x, w)
    torch.testing.assert_close(y, (x.double() @ w.double()).to(torch.bfloat16), rtol=OUT_RTOL[torch.bfloat16],
                               atol=0)
    y.sum().backward()
    torch.testing.assert_close(w.grad, x.detach().double().sum(0).to(torch.bfloat16), rtol=OUT_RTOL[torch.bfloat16],
                               atol=0)
    s = hk.row_sum(x)
    torch.testing.assert_close(s, x.double().sum(-1).to(torch.bfloat16), rtol=OUT_RTOL[torch.bfloat16], atol=0)
    assert math.prod(hk.row_sum(x.view(3, 11, 65)).shape) == 33
