"""hk.swiglu, hk.rope and hk.rope_tables, and the decoder block built from hopperkit's kernels.

CPU: the NumPy path (fp64 reference) against NumPy formulas, bad input, the registry, the block
benchmark's markdown. GPU: the torch ops against PyTorch (values, strided views, autograd,
opcheck, torch.compile(fullgraph=True)); hk.nn.TransformerBlock and hk.nn.TransformerLM against
hopperkit.reference_model with one state dict (outputs and gradients within bf16 tolerances),
and the block under torch.compile.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import hopperkit as hk

try:
    import torch
except ImportError:
    torch = None


# ---- NumPy formulas ---------------------------------------------------------------------------

def swiglu_np(x):
    f = x.shape[-1] // 2
    g, u = x[..., :f].astype(np.float64), x[..., f:].astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        return g / (1.0 + np.exp(-g)) * u


def rope_np(x, cos, sin):
    half = cos.shape[-1]
    xd = x.astype(np.float64)
    c, s = cos.astype(np.float64)[None, :, None, :], sin.astype(np.float64)[None, :, None, :]
    x1, x2 = xd[..., :half], xd[..., half:2 * half]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s, xd[..., 2 * half:]], axis=-1)


def tables_np(seq, rotary, theta=10000.0):
    ang = np.arange(seq)[:, None] * theta ** (-2.0 * np.arange(rotary // 2) / rotary)[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


# ---- CPU: the NumPy path -------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 10), (2, 3, 8), (1, 2), (5, 4098)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_swiglu_numpy_matches_formula(rng, shape, dtype):
    x = (3 * rng.standard_normal(shape)).astype(dtype)
    y = hk.swiglu(x)
    assert y.shape == (*shape[:-1], shape[-1] // 2) and y.dtype == dtype
    np.testing.assert_allclose(y.astype(np.float64), swiglu_np(x), rtol=1e-3 if dtype == np.float16 else 1e-6,
                               atol=1e-5)


def test_swiglu_numpy_special_values():
    x = np.array([[np.nan, np.inf, -np.inf, -100.0, 1.0, 1.0, 1.0, 2.0]], np.float32)
    y = hk.swiglu(x)
    assert np.isnan(y[0, 0]) and y[0, 1] == np.inf and np.isnan(y[0, 2]) and abs(y[0, 3]) < 1e-30


def test_swiglu_numpy_backward_matches_finite_differences(rng):
    x = rng.standard_normal((3, 8)).astype(np.float32)
    dy = rng.standard_normal((3, 4)).astype(np.float32)
    dx = hk.swiglu_backward(x, dy)
    assert dx.shape == x.shape and dx.dtype == np.float32
    h = 1e-6
    xd, dy = x.astype(np.float64), dy.astype(np.float64)
    for idx in [(0, 0), (1, 3), (2, 5), (0, 7)]:
        xp, xm = xd.copy(), xd.copy()
        xp[idx] += h
        xm[idx] -= h
        fd = ((swiglu_np(xp) - swiglu_np(xm)) * dy).sum() / (2 * h)
        assert abs(dx[idx] - fd) < 1e-6 * (1 + abs(fd)), idx


def test_swiglu_bad_input():
    with pytest.raises(ValueError, match="must be even"):
        hk.swiglu(np.zeros((2, 7), np.float32))
    with pytest.raises(TypeError, match="i32"):
        hk.swiglu(np.zeros((2, 8), np.int32))


@pytest.mark.parametrize("rotary", [8, 4, 2])
def test_rope_numpy_matches_formula(rng, rotary):
    x = rng.standard_normal((2, 5, 3, 8)).astype(np.float32)
    cos, sin = tables_np(5, rotary)
    y = hk.rope(x, cos, sin)
    assert y.shape == x.shape and y.dtype == np.float32
    np.testing.assert_allclose(y, rope_np(x, cos, sin), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(y[..., rotary:], x[..., rotary:])  # passed through exactly
    back = hk.rope_backward(y, cos, sin)
    np.testing.assert_allclose(back, x, rtol=1e-5, atol=1e-5)  # a rotation: the backward undoes it


def test_rope_numpy_strided_input(rng):
    qkv = rng.standard_normal((2, 6, 5, 16)).astype(np.float32)
    q = qkv[:, :, :3]
    cos, sin = tables_np(6, 16)
    np.testing.assert_allclose(hk.rope(q, cos, sin), rope_np(q, cos, sin), rtol=1e-6, atol=1e-6)


def test_rope_bad_input():
    x = np.zeros((1, 4, 2, 8), np.float32)
    cos, sin = tables_np(4, 8)
    with pytest.raises(ValueError, match="rotary_dim / 2 = 5"):
        hk.rope(x, np.zeros((4, 5), np.float32), np.zeros((4, 5), np.float32))
    with pytest.raises(TypeError, match="cos is f16"):
        hk.rope(x, cos.astype(np.float16), sin)
    with pytest.raises(ValueError, match=r"\[B, S, H, D\]"):
        hk.rope(x[0], cos, sin)
    with pytest.raises(ValueError, match="even"):
        hk.rope_tables(4, 7)


def test_rope_tables_values():
    cos, sin = hk.rope_tables(7, 16, theta=500.0)
    if torch is not None:
        cos, sin = cos.numpy(), sin.numpy()
    want_c, want_s = tables_np(7, 16, 500.0)
    assert cos.shape == (7, 8) and cos.dtype == np.float32
    np.testing.assert_allclose(cos, want_c, rtol=0, atol=1e-7)
    np.testing.assert_allclose(sin, want_s, rtol=0, atol=1e-7)


def test_registry_lists_the_rungs():
    assert [v.name for v in hk.variants("swiglu")] == ["v01_naive", "v02_vectorized"]
    assert [v.name for v in hk.variants("rope")] == ["v01_naive", "v02_vectorized"]


def test_block_bench_markdown():
    from hopperkit import block_bench

    doc = {"rows": [{"model": "block", "pass": "fwd", "candidate": "hopperkit", "status": "ok", "median_us": 100.0,
                     "tokens_per_s": 1.6e8, "speedup_vs_torch": 1.25},
                    {"model": "block", "pass": "fwd", "candidate": "torch.compile", "status": "SKIP: x"}],
           "profile": {"block": {"hopperkit": {"forward": [{"kernel": "gemm_v18_kernel", "device_us": 50.0,
                                                            "calls": 4, "share": 0.5}]}}}}
    text = block_bench.markdown(doc)
    assert "| block | fwd | hopperkit | 100.0 |" in text and "1.25x" in text and "SKIP: x" in text
    assert "**block, hopperkit, forward**" in text and "`gemm_v18_kernel` | 50.0 | 4 | 50.0%" in text
    cfg = block_bench.parse_args(["--dim", "256", "--models", "block", "--no-compile"])
    assert cfg.dim == 256 and cfg.models == ["block"] and not cfg.compile and cfg.kv_heads == 4
    assert cfg.graph and cfg.size is None
    cfg = block_bench.parse_args(["--size", "xl", "--no-graph"])
    assert (cfg.dim, cfg.layers, cfg.heads, cfg.kv_heads, cfg.ffn) == (1600, 48, 25, 25, 6400) and not cfg.graph
    with pytest.raises(SystemExit):
        block_bench.parse_args(["--size", "huge"])


# ---- GPU: the torch ops ------------------------------------------------------------------------

TOL = {"float32": dict(atol=1e-5, rtol=1e-5), "float16": dict(atol=1e-5, rtol=2e-3),
       "bfloat16": dict(atol=1e-5, rtol=1.6e-2)}


def _tol(dt):
    return TOL[str(dt).split(".")[-1]]


@pytest.mark.parametrize("shape", [(1, 2), (7, 2046), (3, 5, 96), (64, 2 * 1376)])
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_swiglu_matches_torch_with_grad(cuda, shape, dt):
    F = torch.nn.functional
    dtype = getattr(torch, dt)
    x = (3 * torch.randn(shape, device=cuda)).to(dtype).requires_grad_()
    y = hk.swiglu(x)
    f = shape[-1] // 2
    xr = x.detach().double().requires_grad_()
    yr = F.silu(xr[..., :f]) * xr[..., f:]
    torch.testing.assert_close(y, yr.to(dtype), **_tol(dtype))
    dy = torch.randn_like(y)
    y.backward(dy)
    yr.backward(dy.double())
    torch.testing.assert_close(x.grad, xr.grad.to(dtype), **_tol(dtype))


def test_swiglu_strided_views(cuda):
    F = torch.nn.functional
    base = torch.randn(16, 3000, device=cuda, dtype=torch.bfloat16)
    for x in (base[:, :2048], base[:, 1:2049], base[::2, 3:1003], base.view(4, 4, 3000)[:, :, 5:105]):
        f = x.shape[-1] // 2
        want = (F.silu(x[..., :f].double()) * x[..., f:].double()).bfloat16()
        torch.testing.assert_close(hk.swiglu(x), want, **_tol(torch.bfloat16))


@pytest.mark.parametrize("rotary", [128, 64])
@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_rope_matches_reference_on_qkv_slices(cuda, rotary, dt):
    from hopperkit.reference_model import apply_rope

    dtype = getattr(torch, dt)
    b, s, hq, hkv, d = 2, 37, 8, 2, 128
    qkv = torch.randn(b, s, hq + 2 * hkv, d, device=cuda, dtype=dtype)
    cos, sin = hk.rope_tables(s, rotary, device=cuda)
    for x in (qkv[:, :, :hq], qkv[:, :, hq:hq + hkv], qkv.transpose(1, 2).contiguous().transpose(1, 2)):
        x = x.detach().requires_grad_()
        y = hk.rope(x, cos, sin)
        assert y.shape == x.shape and y.is_contiguous()
        torch.testing.assert_close(y, apply_rope(x.detach().double(), cos.double(), sin.double()).to(dtype),
                                   **_tol(dtype))
        dy = torch.randn_like(y)
        y.backward(dy)
        torch.testing.assert_close(x.grad, apply_rope(dy.double(), cos.double(), -sin.double()).to(dtype),
                                   **_tol(dtype))


def test_opcheck(cuda):
    x = torch.randn(5, 34, device=cuda, dtype=torch.float32, requires_grad=True)
    torch.library.opcheck(hk.block_ops._swiglu.op, (x,))
    torch.library.opcheck(hk.block_ops._swiglu_backward.op, (x.detach(), torch.randn(5, 17, device=cuda)))
    q = torch.randn(2, 7, 3, 16, device=cuda, dtype=torch.float32, requires_grad=True)
    cos, sin = hk.rope_tables(7, 16, device=cuda)
    torch.library.opcheck(hk.block_ops._rope.op, (q, cos, sin))
    a = torch.randn(6, 32, device=cuda, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(16, 32, device=cuda, dtype=torch.bfloat16, requires_grad=True)
    c = torch.randn(6, 16, device=cuda, dtype=torch.bfloat16, requires_grad=True)
    torch.library.opcheck(hk.block_ops._matmul_add.op, (a, w.t(), c))
    qkv = torch.randn(2, 33, 8, 64, device=cuda, dtype=torch.bfloat16)
    cos, sin = hk.rope_tables(33, 64, device=cuda)
    torch.library.opcheck(hk.block_ops._rope_attention, (qkv, cos, sin, 4, 2, 0.0))
    o, lse, qr, kr = hk.block_ops._rope_attention(qkv, cos, sin, 4, 2, 0.0)
    torch.library.opcheck(hk.block_ops._rope_attention_backward,
                          (qkv, qr, kr, o, lse, torch.randn_like(o), cos, sin, 4, 2, 0.0))


def test_compile_fullgraph(cuda):
    torch._dynamo.reset()

    def f(x, q, cos, sin):
        return hk.swiglu(x * 2).sum() + hk.rope(q, cos, sin).float().sum()

    x = torch.randn(9, 64, device=cuda, dtype=torch.bfloat16)
    q = torch.randn(1, 5, 2, 32, device=cuda, dtype=torch.bfloat16)
    cos, sin = hk.rope_tables(5, 32, device=cuda)
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(x, q, cos, sin), f(x, q, cos, sin))


# ---- GPU: the block and the LM against the reference model --------------------------------------

def _rel(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30)).item()


def _init(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02 if name.startswith("embed") else p.shape[1] ** -0.5)
            else:
                p.uniform_(0.5, 1.5)  # norm weights off 1, so their gradients are tested


BLOCK_CONFIGS = [dict(dim=256, n_heads=4, n_kv_heads=2, ffn_dim=512),
                 dict(dim=512, n_heads=8, n_kv_heads=8, ffn_dim=1376),
                 dict(dim=256, n_heads=2, n_kv_heads=1, ffn_dim=768, rotary_dim=64)]


def _check_block(dev, cfg, fuse_residual=True):
    from hopperkit.reference_model import ReferenceBlock

    torch.manual_seed(0)
    ours = hk.nn.TransformerBlock(**cfg, fuse_residual=fuse_residual, device=dev)
    _init(ours)
    theirs = ReferenceBlock(**cfg, device=dev)
    theirs.load_state_dict(ours.state_dict())
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    x = torch.randn(2, 200, cfg["dim"], device=dev, dtype=torch.bfloat16)
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = ours(xa), theirs(xb)
    assert ya.shape == yb.shape == x.shape and ya.dtype == torch.bfloat16
    assert _rel(ya - x, yb - x) < 2e-2  # the block's update, beside the residual it adds to
    dy = torch.randn_like(ya)
    ya.backward(dy)
    yb.backward(dy)
    assert _rel(xa.grad, xb.grad) < 3e-2
    pb = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert _rel(p.grad, pb[name].grad) < 5e-2, name


@pytest.mark.parametrize("fuse", [True, False], ids=["fused_residual", "torch_add"])
@pytest.mark.parametrize("cfg", BLOCK_CONFIGS, ids=lambda c: "_".join(f"{k}{v}" for k, v in c.items()))
def test_block_matches_reference(cuda, cfg, fuse):
    _check_block(cuda, cfg, fuse)


@pytest.mark.parametrize("fuse", [True, False], ids=["fused_residual", "torch_add"])
def test_block_matches_reference_on_cpu(torch_mod, fuse):
    # CPU tensors run every hopperkit op's fp64 reference: the module's wiring (slices, strides,
    # autograd, parameter names) checked without a GPU.
    _check_block(torch.device("cpu"), BLOCK_CONFIGS[0], fuse)


def _check_rope_attention(device, hq, hkv, d, s):
    """hk.rope_attention against rope, rope and attention composed on the slices of qkv: the same
    forward, and the same d(qkv) through autograd (the composed path's slice backward)."""
    g = torch.Generator().manual_seed(hq * 100 + s)
    qkv = torch.randn(2, s, hq + 2 * hkv, d, generator=g).bfloat16().to(device).requires_grad_()
    cos, sin = hk.rope_tables(s, d, device=device)
    o = hk.rope_attention(qkv, cos, sin, hq, hkv)
    q = hk.rope(qkv[:, :, :hq], cos, sin)
    k = hk.rope(qkv[:, :, hq:hq + hkv], cos, sin)
    want = hk.attention(q, k, qkv[:, :, hq + hkv:], causal=True)
    assert o.shape == (2, s, hq, d) and o.dtype == torch.bfloat16
    torch.testing.assert_close(o, want, rtol=0, atol=0)
    dy = torch.randn(o.shape, generator=g).bfloat16().to(device)
    got, = torch.autograd.grad(o, qkv, dy)
    ref, = torch.autograd.grad(want, qkv, dy)
    # dq is summed by atomics on the GPU: equal up to the order of f32 additions, then rounded
    assert _rel(got.double(), ref.double()) < 1e-2
    for lo, hi in ((0, hq), (hq, hq + hkv), (hq + hkv, hq + 2 * hkv)):  # every slice written
        assert _rel(got[:, :, lo:hi].double(), ref[:, :, lo:hi].double()) < 1e-2


@pytest.mark.parametrize("hq,hkv,d,s", [(4, 2, 64, 129), (2, 2, 80, 64), (8, 1, 128, 200)])
def test_rope_attention_matches_the_composed_ops(cuda, hq, hkv, d, s):
    _check_rope_attention(cuda, hq, hkv, d, s)


def test_rope_attention_matches_the_composed_ops_on_cpu(torch_mod):
    _check_rope_attention(torch.device("cpu"), 4, 2, 16, 9)


def test_rope_attention_bad_input(torch_mod):
    cos, sin = hk.rope_tables(4, 8)
    with pytest.raises(ValueError, match="n_heads"):
        hk.rope_attention(torch.zeros(1, 4, 5, 8, dtype=torch.bfloat16), cos, sin, 2, 2)
    with pytest.raises(TypeError):
        hk.rope_attention(np.zeros((1, 4, 6, 8), np.float16), cos, sin, 2, 2)


def test_linear_residual_matches_torch(cuda):
    _check_linear_residual(cuda)


def test_linear_residual_matches_torch_on_cpu(torch_mod):
    _check_linear_residual(torch.device("cpu"))


def _check_linear_residual(device):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 37, 96, generator=g).bfloat16().to(device).requires_grad_()
    w = (torch.randn(80, 96, generator=g) / 10).bfloat16().to(device).requires_grad_()
    r = torch.randn(2, 37, 80, generator=g).bfloat16().to(device).requires_grad_()
    y = hk.block_ops.linear_residual(x, w, r)
    xr, wr, rr = (t.detach().double().requires_grad_() for t in (x, w, r))
    yr = rr + F.linear(xr, wr)
    assert y.shape == (2, 37, 80) and y.dtype == torch.bfloat16
    torch.testing.assert_close(y.double(), yr, atol=2e-2, rtol=2e-2)
    dy = torch.randn(2, 37, 80, generator=g).bfloat16().to(device)
    y.backward(dy)
    yr.backward(dy.double())
    for got, want in ((x.grad, xr.grad), (w.grad, wr.grad), (r.grad, rr.grad)):
        assert _rel(got.double(), want) < 1e-2


def test_block_compiles(cuda):
    torch._dynamo.reset()
    torch.manual_seed(0)
    block = hk.nn.TransformerBlock(256, 4, 2, 512, device=cuda)
    _init(block)
    x = torch.randn(2, 64, 256, device=cuda, dtype=torch.bfloat16)
    cos, sin = block.rope_tables(64, cuda)
    compiled = torch.compile(block, fullgraph=True)
    torch.testing.assert_close(compiled(x, cos, sin), block(x, cos, sin), atol=2e-2, rtol=2e-2)
    xg = x.clone().requires_grad_()
    compiled(xg, cos, sin).float().square().mean().backward()
    assert xg.grad is not None and torch.isfinite(xg.grad).all()


def _check_lm(dev):
    from hopperkit.reference_model import ReferenceLM

    torch.manual_seed(0)
    cfg = dict(vocab=1000, dim=256, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=512)
    ours = hk.nn.TransformerLM(**cfg, device=dev)
    _init(ours)
    theirs = ReferenceLM(**cfg, device=dev)
    theirs.load_state_dict(ours.state_dict())
    tokens = torch.randint(0, 1000, (2, 128), device=dev)
    targets = torch.randint(0, 1000, (2, 128), device=dev)
    la, lossa = ours(tokens, targets)
    lb, lossb = theirs(tokens, targets)
    assert la.shape == (2, 128, 1000)
    assert _rel(la, lb) < 3e-2
    assert abs(lossa.item() - lossb.item()) < 2e-2 * abs(lossb.item())
    lossa.backward()
    lossb.backward()
    pb = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert _rel(p.grad, pb[name].grad) < 6e-2, name


def test_lm_matches_reference(cuda):
    _check_lm(cuda)


def _check_master_weights(dev):
    # f32 master weights: the same bf16 values kept in f32 give the bf16 model's logits and loss
    # exactly (each forward casts them to bf16), and gradients that are the bf16 model's, upcast
    # (the embedding, used twice, sums its two contributions in f32 instead of bf16).
    torch.manual_seed(0)
    cfg = dict(vocab=300, dim=128, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=256)
    lm16 = hk.nn.TransformerLM(**cfg, device=dev)
    _init(lm16)
    lm32 = hk.nn.TransformerLM(**cfg, device=dev, dtype=torch.float32)
    lm32.load_state_dict({k: v.float() for k, v in lm16.state_dict().items()})
    assert lm32.compute_dtype == torch.bfloat16
    tokens = torch.randint(0, 300, (2, 64), device=dev)
    targets = torch.randint(0, 300, (2, 64), device=dev)
    l16, loss16 = lm16(tokens, targets)
    l32, loss32 = lm32(tokens, targets)
    assert l32.dtype == torch.bfloat16
    assert torch.equal(l32, l16) and torch.equal(loss32, loss16)
    loss16.backward()
    loss32.backward()
    p16 = dict(lm16.named_parameters())
    for name, p in lm32.named_parameters():
        assert p.grad is not None and p.grad.dtype == torch.float32, name
        if name == "embed.weight":
            assert _rel(p.grad, p16[name].grad.float()) < 1e-2, name
        else:
            assert torch.equal(p.grad, p16[name].grad.float()), name
    with pytest.raises(TypeError, match="compute_dtype must be"):
        hk.nn.TransformerLM(**cfg, device=dev, dtype=torch.float32, compute_dtype=torch.float32)


def test_master_weights_on_cpu(torch_mod):
    _check_master_weights(torch.device("cpu"))


def test_master_weights(cuda):
    _check_master_weights(cuda)


def test_sublayer_ranges_leave_compiled_graphs_whole(torch_mod):
    """The ranges mark eager calls only: torch.compile traces the block as one graph with them on."""
    torch._dynamo.reset()
    block = hk.nn.TransformerBlock(64, 4, 2)
    x = torch.randn(2, 8, 64, dtype=torch.bfloat16)
    with hk.nn.sublayer_ranges():
        explained = torch._dynamo.explain(block)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    torch._dynamo.reset()


def test_lm_matches_reference_on_cpu(torch_mod):
    _check_lm(torch.device("cpu"))


def test_block_bench_helpers_on_cpu(torch_mod):
    """The benchmark's model building, agreement check, steps and profile on a tiny CPU config
    (the timing itself needs CUDA)."""
    from hopperkit import block_bench as bb

    cfg = bb.parse_args(["--dim", "128", "--heads", "4", "--kv-heads", "2", "--seq", "32", "--batch", "2",
                         "--layers", "2", "--vocab", "300"])
    cfg.device = "cpu"
    for which in ("block", "lm", "swiglu", "rope"):
        ours, theirs = bb._models(cfg, which)
        assert ours.state_dict().keys() == theirs.state_dict().keys()
        inp = bb._inputs(cfg, which)
        check = bb._agreement(ours, theirs, which, inp)
        assert check["status"] == "ok", check
        fwd, fwd_bwd = bb._steps(ours, which, inp)
        assert fwd().shape[:2] == (2, 32)
        fwd_bwd()
        assert all(p.grad is not None for p in ours.parameters())
        prof = bb._profile(ours, which, inp, 1, 5)
        assert set(prof) == {"forward", "backward", "forward_sublayers", "backward_nodes", "kernel_us_per_step"}
        assert set(prof["kernel_us_per_step"]) == {"forward", "backward"}
        if which in ("block", "lm"):
            # every sub-layer of every block is a range, each with time in it
            sub = {r["range"]: r for r in prof["forward_sublayers"]}
            assert set(sub) == {"attn_norm", "qkv", "rope_attention", "attn_out", "ffn_norm", "gate_up", "swiglu",
                                "down"}, sub
            assert all(r["calls"] == (2 if which == "lm" else 1) and r["us"] > 0 for r in sub.values()), sub
            assert abs(sum(r["share"] for r in sub.values()) - 1) < 1e-6
            nodes = {r["range"] for r in prof["backward_nodes"]}
            assert {"hopperkit::rope_attention", "hopperkit::swiglu", "hopperkit::rms_norm"} <= nodes, nodes
        # the ranges are off outside the profile
        assert not hk.nn._SUBLAYER_RANGES
    # the lecture's starting point: the same block with materialised scores agrees with both
    ours, theirs = bb._models(cfg, "block")
    naive = bb._models(cfg, "block_naive")[1]
    naive.load_state_dict(ours.state_dict())
    assert naive.attention == "naive"
    inp = bb._inputs(cfg, "block")
    assert bb._agreement(ours, naive, "block", inp)["status"] == "ok"
    assert bb._agreement(theirs, naive, "block", inp)["rel_err"] < 2e-2


def test_train_check_on_cpu(torch_mod):
    """The training comparison end to end on a tiny model (CPU: hopperkit's ops run their fp64
    references), and its window arithmetic on made-up curves."""
    from hopperkit import train_check as tc

    cfg = tc.parse_args(["--size", "none", "--dim", "32", "--layers", "1", "--heads", "2", "--vocab", "50",
                         "--steps", "4", "--seeds", "2", "--ours-seeds", "2", "--batch", "2", "--seq", "8",
                         "--window", "2", "--device", "cpu"])
    doc = tc.run(cfg, progress=False)
    assert doc["kind"] == "hk-train-check" and len(doc["losses"]["hopperkit"]) == 4
    assert len(doc["losses"]["hopperkit_runs"]) == 2
    assert len(doc["losses"]["torch"]) == 2 and all(len(r) == 4 for r in doc["losses"]["torch"])
    assert all(math.isfinite(x) and x > 0 for x in doc["losses"]["hopperkit"])
    # the same initialisation and data: the first step's loss agrees to bf16 rounding
    assert abs(doc["losses"]["hopperkit"][0] - doc["losses"]["torch"][0][0]) < 2e-2 * doc["losses"]["torch"][0][0]
    assert "| 1-2 |" in tc.markdown(doc)
    # the first step's gradients against the f32 reference: every parameter kind, sizes right
    g = doc["grad_check"]
    kinds = {r["param"] for r in g["params"]}
    assert {"embed.weight", "norm.weight", "qkv.weight", "attn_out.weight", "gate_up.weight", "down.weight",
            "attn_norm.weight", "ffn_norm.weight"} <= kinds, kinds
    for r in g["params"]:
        assert 0 < r["hopperkit_rel_err"] < 0.1 and 0 < r["torch_rel_err"] < 0.1, r
        assert abs(r["hopperkit_scale"] - 1) < 0.05 and abs(r["torch_scale"] - 1) < 0.05, r
    assert abs(g["loss_hopperkit"] - g["loss_f32"]) < 2e-2 * g["loss_f32"]
    assert "| `qkv.weight` |" in tc.markdown(doc)
    c = tc.compare([1.0, 1.0, 2.0, 2.0], [[1.0, 1.0, 2.0, 2.0], [1.1, 1.1, 2.5, 2.5], [0.9, 0.9, 2.0, 2.0]], 2)
    assert c["spread"] == pytest.approx([0.1, 0.5]) and c["inside"] == [True, True]
    c = tc.compare([1.3, 1.3, 2.0, 2.0], [[1.0, 1.0, 2.0, 2.0], [1.1, 1.1, 2.5, 2.5]], 2)
    assert c["inside"] == [False, True] and c["fraction_inside"] == 0.5
    # two hopperkit runs, paired with reference seeds 0 and 1: deviations and spreads averaged
    c = tc.compare([[1.05, 1.05], [1.0, 1.0]], [[1.0, 1.0], [1.1, 1.1], [1.3, 1.3]], 2)
    assert c["deviation"] == pytest.approx([0.075]) and c["spread"] == pytest.approx([0.25])
    assert c["ours"] == pytest.approx([1.025]) and c["inside"] == [True]
    with pytest.raises(ValueError, match="ours-seeds"):
        tc.run(tc.parse_args(["--seeds", "2", "--ours-seeds", "3", "--device", "cpu"]), progress=False)
    # the language: every target is one of its token's successors
    table = tc._language(50, 1234)
    toks, tgts = tc.batch(table, 3, 2, 8, 7)
    assert all(int(t) in table[int(x)].tolist() for x, t in zip(toks.flatten(), tgts.flatten()))

