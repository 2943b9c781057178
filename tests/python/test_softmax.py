"""GPU: hk.softmax against torch.softmax: values on odd shapes and dims, padded and
non-contiguous inputs, autograd through the softmax_backward kernel, gradcheck, opcheck,
torch.compile(fullgraph=True), bad input. Plus the CPU-tensor path (torch only, no GPU)."""

from __future__ import annotations

import pytest

import hopperkit as hk

torch = pytest.importorskip("torch", reason="the torch ops need torch: torch is not installed")

# Math in f32 in both libraries (exp implementations differ in the last bits), then one rounding
# each: a few f32 ulps, or two output ulps; the absolute floor covers f16 subnormal outputs.
TOL = {torch.float32: dict(atol=1e-7, rtol=4e-5), torch.float16: dict(atol=1e-7, rtol=2e-3),
       torch.bfloat16: dict(atol=1e-7, rtol=1.6e-2)}
DTYPES = list(TOL)
SHAPES = [(1,), (3,), (4097,), (113, 203), (7, 3, 1023), (6, 8193), (2, 100003)]


def randn(shape, dtype, device, scale=3.0):
    return (scale * torch.randn(shape, device=device, dtype=torch.float32)).to(dtype)


def ids(shape):
    return "x".join(map(str, shape))


@pytest.mark.parametrize("shape", SHAPES, ids=ids)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_torch(cuda, dtype, shape):
    x = randn(shape, dtype, cuda)
    y = hk.softmax(x)
    assert y.dtype == dtype and y.shape == x.shape and y.device == x.device
    torch.testing.assert_close(y, torch.softmax(x, -1), **TOL[dtype])


@pytest.mark.parametrize("dim", [0, 1, -2])
def test_other_dims(cuda, dim):
    x = randn((5, 37, 129), torch.float32, cuda)
    torch.testing.assert_close(hk.softmax(x, dim), torch.softmax(x, dim), **TOL[torch.float32])


def test_padded_rows_run_in_place_and_other_layouts_are_copied(cuda):
    base = randn((64, 1040), torch.bfloat16, cuda)
    padded = base[:, :1000]  # rows 1040 apart: the kernels take the view as it is
    batched = base.view(8, 8, 1040)[:, :, 3:1003]  # leading dims collapse into one row stride
    for x in (padded, batched, base.t(), base[::2, ::2]):
        y = hk.softmax(x)
        assert y.shape == x.shape and y.is_contiguous()
        torch.testing.assert_close(y, torch.softmax(x, -1), **TOL[torch.bfloat16])


def softmax_grad64(y, dy):
    """dx = y (dy - <dy, y>) in f64 from the rounded forward output, as both libraries'
    backward kernels take it."""
    yd, dyd = y.detach().double(), dy.double()
    return yd * (dyd - (dyd * yd).sum(-1, keepdim=True))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_autograd_matches_torch(cuda, dtype):
    x = randn((37, 1029), dtype, cuda).requires_grad_()
    dy = randn((37, 1029), dtype, cuda, 1.0)
    y = hk.softmax(x)
    y.backward(dy)
    # The row dot's f32 error, scaled by y <= 1, on top of one rounding to the dtype.
    torch.testing.assert_close(x.grad, softmax_grad64(y, dy).to(dtype), atol=1e-6, rtol=TOL[dtype]["rtol"])
    xr = x.detach().clone().requires_grad_()
    torch.softmax(xr, -1).backward(dy)
    torch.testing.assert_close(x.grad, xr.grad, atol=1e-5 if dtype == torch.float32 else 2e-3,
                               rtol=TOL[dtype]["rtol"])


def test_gradient_of_a_non_contiguous_upstream(cuda):
    x = randn((65, 64), torch.float32, cuda).requires_grad_()
    g = randn((64, 65), torch.float32, cuda, 1.0).t()  # a transposed incoming gradient
    hk.softmax(x).backward(g)
    xr = x.detach().clone().requires_grad_()
    torch.softmax(xr, -1).backward(g)
    torch.testing.assert_close(x.grad, xr.grad, atol=1e-6, rtol=1e-4)
    x.grad = None
    hk.softmax(x).sum().backward()  # an expanded (stride 0) gradient
    torch.testing.assert_close(x.grad, torch.zeros_like(x), atol=1e-6, rtol=0)


def test_gradcheck_f64_promoted(cuda):
    # The kernels take f32/f16/bf16: the f32 op inside an f64 function, with tolerances for f32
    # rounding over a 1e-3 finite-difference step.
    x = torch.randn(7, 11, dtype=torch.float64, device=cuda, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: hk.softmax(t.float()).double(), (x,), eps=1e-3, atol=1e-3, rtol=1e-2)
    assert torch.autograd.gradcheck(lambda t: hk.softmax(t.float(), 0).double(), (x,), eps=1e-3, atol=1e-3,
                                    rtol=1e-2)


def test_opcheck(cuda):
    x = randn((13, 33), torch.float32, cuda).requires_grad_()
    torch.library.opcheck(hk.ops._softmax.op, (x,))
    y = torch.softmax(x.detach(), -1)
    torch.library.opcheck(hk.ops._softmax_backward.op, (y, randn((13, 33), torch.float32, cuda, 1.0)))


def test_compile_fullgraph(cuda):
    torch._dynamo.reset()

    def f(x):
        return hk.softmax(x * 2, -1) + hk.softmax(x, 0)

    cf = torch.compile(f, fullgraph=True)
    x = randn((37, 129), torch.float32, cuda)
    torch.testing.assert_close(cf(x), torch.softmax(x * 2, -1) + torch.softmax(x, 0), **TOL[torch.float32])
    xg = x.clone().requires_grad_()
    cf(xg).pow(2).sum().backward()
    xr = x.clone().requires_grad_()
    f(xr).pow(2).sum().backward()
    torch.testing.assert_close(xg.grad, xr.grad, atol=1e-6, rtol=1e-4)


def test_empty_tensor(cuda):
    x = torch.empty(0, 7, device=cuda, requires_grad=True)
    y = hk.softmax(x)
    assert y.shape == (0, 7)
    y.sum().backward()
    assert x.grad.shape == (0, 7)


def test_bad_input(cuda):
    with pytest.raises(TypeError, match="softmax: x is i32, expected f32, f16 or bf16"):
        hk.softmax(torch.ones(4, 8, dtype=torch.int32, device=cuda))
    with pytest.raises(ValueError, match="softmax: x must have at least one dimension"):
        hk.softmax(torch.ones((), device=cuda))
    with pytest.raises(IndexError):
        hk.softmax(torch.ones(4, 8, device=cuda), 2)
    y = torch.ones(4, 8, device=cuda)
    with pytest.raises(TypeError, match="softmax_backward: dy is f16 but y is f32"):
        hk.ops._softmax_backward(y, torch.ones(4, 8, device=cuda, dtype=torch.float16))
    with pytest.raises(ValueError, match="input 1 is on cpu"):
        hk.ops._softmax_backward(y, torch.ones(4, 8))
    x = randn((4, 8), torch.float32, cuda)  # the context still works
    torch.testing.assert_close(hk.softmax(x), torch.softmax(x, -1), **TOL[torch.float32])


def test_cpu_tensors_run_the_reference(torch_mod):
    x = randn((33, 65), torch.bfloat16, "cpu").requires_grad_()
    y = hk.softmax(x)
    assert y.dtype == torch.bfloat16 and y.device.type == "cpu"
    torch.testing.assert_close(y, torch.softmax(x.float(), -1).to(torch.bfloat16), **TOL[torch.bfloat16])
    dy = randn((33, 65), torch.bfloat16, "cpu", 1.0)
    y.backward(dy)
    torch.testing.assert_close(x.grad, softmax_grad64(y, dy).to(torch.bfloat16), **TOL[torch.bfloat16])
    torch.library.opcheck(hk.ops._softmax.op, (x,))
