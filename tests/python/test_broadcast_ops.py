"""GPU: hk.add_scalar, hk.outer_add, hk.outer_mul_relu and hk.row_scale_relu against torch:
values on odd shapes, non-contiguous inputs, NaN through relu, autograd (row_scale_relu through
its backward kernel, the others through torch ops), gradcheck, opcheck,
torch.compile(fullgraph=True), bad input. Plus the CPU-tensor path (torch only, no GPU)."""

from __future__ import annotations

import pytest

import hopperkit as hk

torch = pytest.importorskip("torch", reason="the torch ops need torch: torch is not installed")

# One f32 op on dtype-exact inputs in both libraries, then one rounding (an ulp apart at most).
TOL = {torch.float32: dict(atol=1e-6, rtol=2e-6), torch.float16: dict(atol=1e-6, rtol=2e-3),
       torch.bfloat16: dict(atol=1e-6, rtol=1.6e-2)}
DTYPES = list(TOL)
PAIRS = [(1, 1), (3, 5), (1, 4097), (203, 113), (96, 1000), (40000, 5)]


def randn(shape, dtype, device, scale=1.0):
    return (scale * torch.randn(shape, device=device, dtype=torch.float32)).to(dtype)


def away_from_zero(shape, dtype, device):
    """Values in ±[0.5, 1.5): finite differences of relu(products) never cross its kink."""
    sign = torch.randint(0, 2, shape, device=device, dtype=torch.float64) * 2 - 1
    return (sign * (0.5 + torch.rand(shape, device=device, dtype=torch.float64))).to(dtype)


# ---- add_scalar ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1,), (4097,), (113, 203), (64, 64, 65)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_add_scalar(cuda, dtype, shape):
    x = randn(shape, dtype, cuda, 2.0)
    for c in (0.75, 1 / 3, -2):
        z = hk.add_scalar(x, c)
        assert z.dtype == dtype and z.shape == x.shape
        # c rounds to f32 in the kernel: |c| 2^-24 absolute on top of the output rounding.
        torch.testing.assert_close(z, (x.double() + c).to(dtype), atol=1e-7 + abs(c) * 2**-23,
                                   rtol=TOL[dtype]["rtol"])


def test_add_scalar_non_contiguous_autograd_compile(cuda):
    base = randn((64, 130), torch.float32, cuda)
    for x in (base[:, ::2], base.t()):
        torch.testing.assert_close(hk.add_scalar(x, 0.5), x + 0.5, **TOL[torch.float32])
    x = randn((7, 11), torch.float64, cuda).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: hk.add_scalar(t.float(), 2.5).double(), (x,), eps=1e-3, atol=1e-3)
    torch.library.opcheck(hk.ops._add_scalar.op, (randn((13, 33), torch.float32, cuda).requires_grad_(), 0.25))
    torch._dynamo.reset()
    cf = torch.compile(lambda t: hk.add_scalar(t * 2, 3.0).relu(), fullgraph=True)
    x = randn((37, 129), torch.bfloat16, cuda)
    torch.testing.assert_close(cf(x), (x * 2 + 3.0).relu(), **TOL[torch.bfloat16])


# ---- outer_add and outer_mul_relu ----------------------------------------------------------

@pytest.mark.parametrize("n,m", PAIRS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_outer_ops_match_torch(cuda, dtype, n, m):
    x, y = randn((n,), dtype, cuda), randn((m,), dtype, cuda)
    z = hk.outer_add(x, y)
    assert z.shape == (n, m) and z.dtype == dtype
    torch.testing.assert_close(z, x[:, None] + y[None, :], **TOL[dtype])
    z = hk.outer_mul_relu(x, y)
    assert z.shape == (n, m)
    torch.testing.assert_close(z, torch.relu(torch.outer(x, y)), **TOL[dtype])


def test_outer_ops_strided_vectors_and_nan(cuda):
    a = randn((200,), torch.float32, cuda)[::2]  # a strided vector is copied
    b = randn((33,), torch.float32, cuda)
    torch.testing.assert_close(hk.outer_add(a, b), a[:, None] + b, **TOL[torch.float32])
    torch.testing.assert_close(hk.outer_mul_relu(b, a), torch.relu(torch.outer(b, a)), **TOL[torch.float32])
    x = torch.tensor([float("nan"), 1.0, -1.0], device=cuda)
    y = torch.tensor([2.0, -3.0], device=cuda)
    torch.testing.assert_close(hk.outer_mul_relu(x, y), torch.relu(torch.outer(x, y)), equal_nan=True)


def test_outer_ops_autograd(cuda):
    x = away_from_zero((9,), torch.float64, cuda).requires_grad_()
    y = away_from_zero((13,), torch.float64, cuda).requires_grad_()
    for op in (hk.outer_add, hk.outer_mul_relu):
        fn = lambda a, b: op(a.float(), b.float()).double()  # noqa: E731
        assert torch.autograd.gradcheck(fn, (x, y), eps=1e-3, atol=1e-3, rtol=1e-2)
    xf, yf = x.detach().float().requires_grad_(), y.detach().float().requires_grad_()
    dz = randn((9, 13), torch.float32, cuda)
    hk.outer_mul_relu(xf, yf).backward(dz)
    xr, yr = x.detach().float().requires_grad_(), y.detach().float().requires_grad_()
    torch.relu(torch.outer(xr, yr)).backward(dz)
    torch.testing.assert_close(xf.grad, xr.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(yf.grad, yr.grad, atol=1e-5, rtol=1e-5)


def test_outer_ops_opcheck_and_compile(cuda):
    x = randn((17,), torch.float32, cuda).requires_grad_()
    y = randn((5,), torch.float32, cuda).requires_grad_()
    torch.library.opcheck(hk.ops._outer_add.op, (x, y))
    torch.library.opcheck(hk.ops._outer_mul_relu.op, (x, y))
    torch._dynamo.reset()

    def f(a, b):
        return hk.outer_add(a, b).sum(0) + hk.outer_mul_relu(a, b).sum(0)

    cf = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(cf(x, y), f(x, y), atol=1e-5, rtol=1e-5)
    cf(x, y).sum().backward()
    gx, gy = x.grad.clone(), y.grad.clone()
    x.grad = y.grad = None
    f(x, y).sum().backward()
    torch.testing.assert_close(gx, x.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gy, y.grad, atol=1e-5, rtol=1e-5)


# ---- row_scale_relu ------------------------------------------------------------------------

@pytest.mark.parametrize("n1,n0", PAIRS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_row_scale_relu_matches_torch(cuda, dtype, n1, n0):
    x, y = randn((n1, n0), dtype, cuda), randn((n1,), dtype, cuda)
    z = hk.row_scale_relu(x, y)
    assert z.shape == x.shape and z.dtype == dtype
    torch.testing.assert_close(z, torch.relu(x * y[:, None]), **TOL[dtype])


def test_row_scale_relu_layouts(cuda):
    base = randn((64, 1040), torch.bfloat16, cuda)
    y = randn((64,), torch.bfloat16, cuda)
    for x in (base[:, :1000], base.t()[:1000].t(), base[:, ::2]):
        torch.testing.assert_close(hk.row_scale_relu(x, y), torch.relu(x * y[:, None]), **TOL[torch.bfloat16])
    ys = randn((128,), torch.bfloat16, cuda)[::2]
    torch.testing.assert_close(hk.row_scale_relu(base, ys), torch.relu(base * ys[:, None]), **TOL[torch.bfloat16])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_row_scale_relu_autograd(cuda, dtype):
    x = randn((37, 515), dtype, cuda).requires_grad_()
    y = randn((37,), dtype, cuda).requires_grad_()
    dz = randn((37, 515), dtype, cuda)
    hk.row_scale_relu(x, y).backward(dz)
    xr, yr = x.detach().double().requires_grad_(), y.detach().double().requires_grad_()
    torch.relu(xr * yr[:, None]).backward(dz.double())
    torch.testing.assert_close(x.grad, xr.grad.to(dtype), **TOL[dtype])
    # dy sums 515 masked products in f32.
    torch.testing.assert_close(y.grad, yr.grad.to(dtype), atol=8 * 515 * 2.0**-24, rtol=TOL[dtype]["rtol"])


def test_row_scale_relu_gradcheck_opcheck_compile(cuda):
    x = away_from_zero((7, 11), torch.float64, cuda).requires_grad_()
    y = away_from_zero((7,), torch.float64, cuda).requires_grad_()
    fn = lambda a, b: hk.row_scale_relu(a.float(), b.float()).double()  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, y), eps=1e-3, atol=1e-3, rtol=1e-2)
    xf, yf = x.detach().float().requires_grad_(), y.detach().float().requires_grad_()
    torch.library.opcheck(hk.ops._row_scale_relu.op, (xf, yf))
    torch.library.opcheck(hk.ops._row_scale_relu_backward.op,
                          (xf.detach(), yf.detach(), randn((7, 11), torch.float32, cuda)))
    torch._dynamo.reset()

    def f(a, b):
        return hk.row_scale_relu(a * 2, b).square()

    cf = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(cf(xf, yf), f(xf, yf), atol=1e-6, rtol=1e-6)
    cf(xf, yf).sum().backward()
    gx, gy = xf.grad.clone(), yf.grad.clone()
    xf.grad = yf.grad = None
    f(xf, yf).sum().backward()
    torch.testing.assert_close(gx, xf.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gy, yf.grad, atol=1e-5, rtol=1e-5)


def test_empty_inputs(cuda):
    assert hk.add_scalar(torch.empty(0, 3, device=cuda), 1.0).shape == (0, 3)
    assert hk.outer_add(torch.empty(0, device=cuda), torch.ones(4, device=cuda)).shape == (0, 4)
    x = torch.empty(3, 0, device=cuda, requires_grad=True)
    y = torch.ones(3, device=cuda, requires_grad=True)
    hk.row_scale_relu(x, y).sum().backward()
    torch.testing.assert_close(y.grad, torch.zeros(3, device=cuda))  # a sum over no columns


def test_bad_input(cuda):
    v = torch.ones(4, device=cuda)
    with pytest.raises(TypeError, match="add_scalar: x is i32, expected f32, f16 or bf16"):
        hk.add_scalar(v.int(), 1.0)
    with pytest.raises(ValueError, match=r"outer_add: x and y must be vectors, got \[4\] and \[2x2\]"):
        hk.outer_add(torch.ones(2, 2, device=cuda), v)
    with pytest.raises(TypeError, match="outer_mul_relu: y is f16, expected f32"):
        hk.outer_mul_relu(v.half(), v)
    with pytest.raises(ValueError, match=r"row_scale_relu: y has shape \[3\], expected \[4\]"):
        hk.row_scale_relu(torch.ones(4, 5, device=cuda), torch.ones(3, device=cuda))
    with pytest.raises(ValueError, match=r"row_scale_relu: x must be \[N1, N0\], got \[2x2x5\]"):
        hk.row_scale_relu(torch.ones(2, 2, 5, device=cuda), torch.ones(2, device=cuda))
    # outer_add runs its family with (y, x): the family's input 0 is the user's y.
    with pytest.raises(ValueError, match=r"hk.outer_add: operands on different devices: input 1 is on cuda:0 "
                                         r"but input 0 is on cpu"):
        hk.outer_add(v, torch.ones(3))
    with pytest.raises(ValueError, match=r"hk.row_scale_relu: operands on different devices: input 1 is on cpu"):
        hk.row_scale_relu(torch.ones(4, 5, device=cuda), torch.ones(4))
    torch.testing.assert_close(hk.outer_add(v, v), torch.full((4, 4), 2.0, device=cuda))


def test_cpu_tensors_run_the_reference(torch_mod):
    x = randn((33,), torch.bfloat16, "cpu")
    y = randn((65,), torch.bfloat16, "cpu")
    torch.testing.assert_close(hk.outer_add(x, y), (x.double()[:, None] + y.double()).to(torch.bfloat16))
    torch.testing.assert_close(hk.outer_mul_relu(x, y), torch.relu(torch.outer(x.double(), y.double())).bfloat16())
    m = randn((33, 65), torch.bfloat16, "cpu").requires_grad_()
    s = x.detach().clone().requires_grad_()
    hk.row_scale_relu(m, s).backward(torch.ones(33, 65, dtype=torch.bfloat16))
    mr, sr = m.detach().double().requires_grad_(), s.detach().double().requires_grad_()
    torch.relu(mr * sr[:, None]).sum().backward()
    torch.testing.assert_close(m.grad, mr.grad.bfloat16())
    torch.testing.assert_close(s.grad, sr.grad.bfloat16())
    torch.testing.assert_close(hk.add_scalar(m, 1.5), (m.double() + 1.5).bfloat16())
