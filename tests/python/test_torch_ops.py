"""GPU: the public torch ops (hk.gelu, hk.gelu_backward, hk.nn.GELU) against PyTorch: values,
autograd, gradcheck, opcheck, torch.compile(fullgraph=True), torch.export, the current-stream
contract, rung selection through hk.run, bad input, hk.bench. Plus the CPU-tensor path (torch
only, no GPU)."""

from __future__ import annotations

import pytest

import hopperkit as hk

torch = pytest.importorskip("torch", reason="the torch ops need torch: torch is not installed")
F = torch.nn.functional

# Math in f32 in both libraries, then one rounding: two output ulps, plus an absolute floor for
# results near zero (erf/tanh implementations differ in the last f32 bits).
TOL = {torch.float32: dict(atol=1e-5, rtol=2e-6), torch.float16: dict(atol=1e-5, rtol=2e-3),
       torch.bfloat16: dict(atol=1e-5, rtol=1.6e-2)}
DTYPES = list(TOL)
FORMS = ["none", "tanh"]
SHAPES = [(1,), (3,), (4097,), (113, 203), (7, 3, 1023)]


def randn(shape, dtype, device, scale=3.0):
    return (scale * torch.randn(shape, device=device, dtype=torch.float32)).to(dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("approximate", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gelu_matches_torch(cuda, dtype, approximate, shape):
    x = randn(shape, dtype, cuda)
    y = hk.gelu(x, approximate)
    assert y.dtype == dtype and y.shape == x.shape and y.device == x.device
    torch.testing.assert_close(y, F.gelu(x, approximate=approximate), **TOL[dtype])
    dy = randn(shape, dtype, cuda, 1.0)
    dx = hk.gelu_backward(x, dy, approximate)
    expect = torch.ops.aten.gelu_backward(dy, x, approximate=approximate)
    torch.testing.assert_close(dx, expect, **TOL[dtype])


def test_default_form_is_erf_as_in_torch(cuda):
    x = randn((257,), torch.float32, cuda)
    torch.testing.assert_close(hk.gelu(x), F.gelu(x), **TOL[torch.float32])


@pytest.mark.parametrize("approximate", FORMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_autograd_matches_torch(cuda, dtype, approximate):
    x = randn((37, 129), dtype, cuda).requires_grad_()
    dy = randn((37, 129), dtype, cuda, 1.0)
    hk.gelu(x, approximate).backward(dy)
    x_ref = x.detach().clone().requires_grad_()
    F.gelu(x_ref, approximate=approximate).backward(dy)
    torch.testing.assert_close(x.grad, x_ref.grad, **TOL[dtype])


@pytest.mark.parametrize("approximate", FORMS)
def test_gradcheck_f64_promoted(cuda, approximate):
    # The kernels take f32/f16/bf16: check the f32 op inside an f64 function, with tolerances
    # for f32 rounding over a 1e-3 finite-difference step.
    x = torch.randn(7, 11, dtype=torch.float64, device=cuda, requires_grad=True)
    fn = lambda t: hk.gelu(t.float(), approximate).double()  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,), eps=1e-3, atol=1e-3, rtol=1e-2)


def test_non_contiguous_inputs_are_copied(cuda):
    base = randn((64, 130), torch.bfloat16, cuda)
    for x in (base[:, ::2], base.t(), base[1:, 3:]):
        y = hk.gelu(x, "tanh")
        assert y.shape == x.shape and y.is_contiguous()
        torch.testing.assert_close(y, F.gelu(x, approximate="tanh"), **TOL[torch.bfloat16])
    g = randn((65, 64), torch.bfloat16, cuda).t()  # a non-contiguous incoming gradient
    xg = base[:, :65].detach().clone().requires_grad_()
    hk.gelu(xg).backward(g)
    xr = xg.detach().clone().requires_grad_()
    F.gelu(xr).backward(g)
    torch.testing.assert_close(xg.grad, xr.grad, **TOL[torch.bfloat16])


def test_empty_tensor(cuda):
    x = torch.empty(0, 7, device=cuda, requires_grad=True)
    y = hk.gelu(x)
    assert y.shape == (0, 7)
    y.sum().backward()
    assert x.grad.shape == (0, 7)


@pytest.mark.parametrize("approximate", FORMS)
def test_opcheck(cuda, approximate):
    x = randn((13, 33), torch.float32, cuda).requires_grad_()
    torch.library.opcheck(hk.ops._gelu.op, (x, approximate))
    dy = randn((13, 33), torch.float32, cuda, 1.0)
    torch.library.opcheck(hk.ops._gelu_backward.op, (x.detach(), dy, approximate))


def test_compile_fullgraph(cuda):
    torch._dynamo.reset()

    def f(x):
        return hk.gelu(x * 2, approximate="tanh") + 1

    cf = torch.compile(f, fullgraph=True)
    x = randn((37, 129), torch.bfloat16, cuda)
    torch.testing.assert_close(cf(x), F.gelu(x * 2, approximate="tanh") + 1, **TOL[torch.bfloat16])
    xg = randn((37, 129), torch.float32, cuda).requires_grad_()
    cf(xg).sum().backward()
    xr = xg.detach().clone().requires_grad_()
    f(xr).sum().backward()
    torch.testing.assert_close(xg.grad, xr.grad, **TOL[torch.float32])


def test_compile_dynamic_shapes(cuda):
    torch._dynamo.reset()
    cf = torch.compile(lambda x: hk.gelu_backward(x, torch.ones_like(x)), fullgraph=True, dynamic=True)
    for n in (33, 4097, 100003):
        x = randn((n,), torch.float16, cuda)
        expect = torch.ops.aten.gelu_backward(torch.ones_like(x), x, approximate="none")
        torch.testing.assert_close(cf(x), expect, **TOL[torch.float16])


def test_export_keeps_the_custom_op(cuda):
    x = randn((8, 64), torch.float32, cuda)
    ep = torch.export.export(hk.nn.GELU("tanh"), (x,))
    assert "torch.ops.hopperkit.gelu.default" in str(ep.graph_module.code)
    torch.testing.assert_close(ep.module()(x), F.gelu(x, approximate="tanh"), **TOL[torch.float32])


def test_runs_on_the_current_stream(cuda):
    """Work queued on a delayed stream must be seen: the op runs on the current stream."""
    n = 1 << 22
    src = torch.randn(n, device=cuda)
    x = torch.full((n,), float("nan"), device=cuda)
    torch.cuda.synchronize()
    side = torch.cuda.Stream(device=cuda)
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~0.1 s: the producer is late
        x.copy_(src)
        y = hk.gelu(x)  # on `side`: after the copy. The legacy stream would see NaN.
    torch.cuda.synchronize()
    torch.testing.assert_close(y, F.gelu(src), **TOL[torch.float32])

    # Produced on a side stream, consumed on the default stream after wait_stream.
    x2 = torch.full((n,), float("nan"), device=cuda)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        x2.copy_(src)
    torch.cuda.current_stream(cuda).wait_stream(side)
    y2 = hk.gelu(x2)
    torch.cuda.synchronize()
    torch.testing.assert_close(y2, F.gelu(src), **TOL[torch.float32])


def test_a_threads_first_cuda_work_may_be_a_hopperkit_kernel(cuda):
    """torch's autograd threads run a hopperkit backward as their first CUDA work; the TMA
    kernels' tensor maps are encoded by a driver call that needs a current context there."""
    import threading

    a = randn((256, 512), torch.bfloat16, cuda)
    b = randn((512, 384), torch.bfloat16, cuda)
    want = hk.matmul(a, b)  # the launch's one-time setup happens in this thread
    torch.cuda.synchronize()
    got: dict = {}

    def work():
        try:
            got["y"] = hk.matmul(a, b)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            got["error"] = e

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert "error" not in got, got.get("error")
    torch.testing.assert_close(got["y"], want, rtol=0, atol=0)


def test_device_guard_each_gpu(cuda):
    """Tensors on any GPU run there, whatever the current device is, and it stays current."""
    current = torch.cuda.current_device()
    for i in range(torch.cuda.device_count()):
        x = randn((1000,), torch.float32, torch.device("cuda", i))
        y = hk.gelu(x)
        assert y.device == x.device and torch.cuda.current_device() == current
        torch.testing.assert_close(y, F.gelu(x), **TOL[torch.float32])


def test_run_picks_a_rung(cuda):
    x = randn((113, 203), torch.bfloat16, cuda)
    for v in hk.variants("gelu"):
        y = hk.run("gelu", v.name, x, approximate="tanh")
        torch.testing.assert_close(y, F.gelu(x, approximate="tanh"), **TOL[torch.bfloat16])
    misaligned = randn((4097,), torch.bfloat16, cuda)[1:]  # base address 2 bytes off
    # The vectorized rung peels the misaligned head and tail: it runs any alignment.
    assert hk.supports("gelu", "v03_vectorized", misaligned) == ""
    torch.testing.assert_close(hk.run("gelu", "v03_vectorized", misaligned, approximate="tanh"),
                               F.gelu(misaligned, approximate="tanh"), **TOL[torch.bfloat16])
    torch.testing.assert_close(hk.gelu(misaligned), F.gelu(misaligned), **TOL[torch.bfloat16])
    with pytest.raises(ValueError, match="gelu has no variant 'v99'"):
        hk.run("gelu", "v99", x)


def test_bad_input_raises_typed_errors_and_keeps_the_context(cuda):
    with pytest.raises(TypeError, match="gelu: x is i32, expected f32, f16 or bf16"):
        hk.gelu(torch.ones(4, dtype=torch.int32, device=cuda))
    with pytest.raises(TypeError, match="gelu: input 0 is float64"):
        hk.gelu(torch.ones(4, dtype=torch.float64, device=cuda))
    with pytest.raises(ValueError, match='approximate must be "tanh" or "none", got "sigmoid"'):
        hk.gelu(torch.ones(4, device=cuda), "sigmoid")
    x = torch.ones(4, 8, device=cuda)
    with pytest.raises(ValueError, match=r"dy has shape \[4x9\] but x has \[4x8\]"):
        hk.gelu_backward(x, torch.ones(4, 9, device=cuda))
    with pytest.raises(TypeError, match="dy is f16 but x is f32"):
        hk.gelu_backward(x, torch.ones(4, 8, device=cuda, dtype=torch.float16))
    with pytest.raises(ValueError, match="input 1 is on cpu"):
        hk.gelu_backward(x, torch.ones(4, 8))
    with pytest.raises(TypeError, match="expected a torch CUDA tensor"):
        hk.run("gelu", "v02_fused", x.cpu().numpy())
    y = hk.gelu(x)  # the context still works
    torch.cuda.synchronize()
    torch.testing.assert_close(y, F.gelu(x), **TOL[torch.float32])


def test_nn_gelu_is_a_drop_in(cuda):
    m = hk.nn.GELU()
    assert m.approximate == "none" and "approximate='none'" in repr(m)
    x = randn((5, 17), torch.float16, cuda)
    torch.testing.assert_close(m(x), torch.nn.GELU()(x), **TOL[torch.float16])
    torch.testing.assert_close(hk.nn.GELU("tanh")(x), torch.nn.GELU("tanh")(x), **TOL[torch.float16])


def test_bench_record(cuda):
    rec = hk.bench("gelu", variant="v03*", shapes=["1024x1024"], dtypes=["f32"], budget_ms=20)
    assert rec["kind"] == "hk-bench" and rec["gpu"]["sm"] >= 90 and rec["ceilings"]["copy_bytes_per_s"] > 0
    rows = rec["rows"]
    assert {r["variant"] for r in rows} == {"v01_unfused", "v03_vectorized"}  # + the baseline
    for r in rows:
        assert r["status"] == "ok", r
        assert r["op"] == "gelu" and r["problem"].startswith("1024x1024_f32")
        assert r["median_us"] > 0 and r["tbps"] > 0 and r["speedup_vs_baseline"] > 0


def test_cpu_tensors_run_the_reference(torch_mod):
    x = randn((33, 65), torch.bfloat16, "cpu").requires_grad_()
    y = hk.gelu(x, "tanh")
    assert y.dtype == torch.bfloat16 and y.device.type == "cpu"
    torch.testing.assert_close(y, F.gelu(x, approximate="tanh"), **TOL[torch.bfloat16])
    dy = randn((33, 65), torch.bfloat16, "cpu", 1.0)
    y.backward(dy)
    xr = x.detach().clone().requires_grad_()
    F.gelu(xr, approximate="tanh").backward(dy)
    torch.testing.assert_close(x.grad, xr.grad, **TOL[torch.bfloat16])
    torch.library.opcheck(hk.ops._gelu.op, (x, "none"))


def test_an_op_without_a_backward_refuses_a_backward_pass(torch_mod):
    # gelu_backward has no backward of its own: it runs on an input that requires grad, and a
    # backward pass through its output raises (as for torch.library.custom_op ops) rather than
    # giving x a wrong gradient; under no_grad its output does not require grad.
    x = randn((7, 9), torch.float32, "cpu").requires_grad_()
    dy = randn((7, 9), torch.float32, "cpu", 1.0)
    dx = hk.gelu_backward(x, dy)
    assert dx.requires_grad
    torch.testing.assert_close(dx, hk.gelu_backward(x.detach(), dy))
    with pytest.raises(RuntimeError, match="hopperkit.gelu_backward.default but no autograd formula"):
        dx.sum().backward()
    assert x.grad is None
    with torch.no_grad():
        assert not hk.gelu_backward(x, dy).requires_grad
    torch.library.opcheck(hk.ops._gelu_backward.op, (x.detach(), dy, "none"))


def test_compiled_autograd_on_cpu(torch_mod):
    # torch.compile traces the ops through their fake implementations and AOTAutograd through
    # their registered backward (aot_eager: no code generation, so it runs on any host).
    x = randn((7, 9), torch.float32, "cpu")
    f = torch.compile(lambda a: hk.gelu(a, "tanh").sum(), fullgraph=True, backend="aot_eager")
    xc, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
    f(xc).backward()
    hk.gelu(xe, "tanh").sum().backward()
    torch.testing.assert_close(xc.grad, xe.grad)
