"""hk.attention: the fp64 reference path against an independent NumPy implementation (CPU, no
torch needed), and on the GPU against torch's scaled_dot_product_attention: both layouts through
strides, GQA, causal (bottom-right aligned) and windowed masks, softcap, fully masked rows,
autograd through the backward kernels, the deterministic backward, opcheck and torch.compile."""

from __future__ import annotations

import math

import numpy as np
import pytest

import hopperkit as hk
from hopperkit.attention import _attention, attention_backward


# ---- an independent NumPy oracle (bshd, float64) ----------------------------------------------

def np_attention(q, k, v, causal=False, scale=None, window=(-1, -1), softcap=0.0):
    """o, lse of attention on [B, S, H, D] float64 arrays (GQA by head index // group)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    B, Sq, Hq, D = q.shape
    Sk, Hk = k.shape[1], k.shape[2]
    g = Hq // Hk
    scale = 1.0 / math.sqrt(D) if not scale else scale
    o = np.zeros_like(q)
    lse = np.full((B, Hq, Sq), -np.inf)
    i = np.arange(Sq)[:, None]
    j = np.arange(Sk)[None, :]
    diag = i + Sk - Sq
    allowed = np.ones((Sq, Sk), dtype=bool)
    right = 0 if causal else window[1]
    if right >= 0:
        allowed &= j <= diag + right
    if window[0] >= 0:
        allowed &= j >= diag - window[0]
    for b in range(B):
        for h in range(Hq):
            s = scale * q[b, :, h, :] @ k[b, :, h // g, :].T
            if softcap > 0:
                s = softcap * np.tanh(s / softcap)
            s = np.where(allowed, s, -np.inf)
            m = s.max(axis=1, keepdims=True)
            ok = np.isfinite(m[:, 0])
            p = np.where(ok[:, None], np.exp(s - np.where(ok[:, None], m, 0)), 0.0)
            z = p.sum(axis=1)
            o[b, :, h, :] = np.where(ok[:, None], p @ v[b, :, h // g, :] / np.where(ok, z, 1)[:, None], 0)
            lse[b, h] = np.where(ok, m[:, 0] + np.log(np.where(ok, z, 1)), -np.inf)
    return o, lse


def np_attention_grad(q, k, v, dout, causal=False, scale=None, window=(-1, -1), softcap=0.0, h=1e-6):
    """dq, dk, dv of sum(dout * o) by central differences of np_attention."""
    grads = []
    base = [np.asarray(x, dtype=np.float64).copy() for x in (q, k, v)]
    for n in range(3):
        g = np.zeros_like(base[n])
        for idx in np.ndindex(base[n].shape):
            args = [x.copy() for x in base]
            args[n][idx] += h
            up = (np_attention(*args, causal, scale, window, softcap)[0] * dout).sum()
            args[n][idx] -= 2 * h
            dn = (np_attention(*args, causal, scale, window, softcap)[0] * dout).sum()
            g[idx] = (up - dn) / (2 * h)
        grads.append(g)
    return grads


CASES = [  # (B, Sq, Sk, Hq, Hkv, D, causal, window, softcap)
    (1, 5, 5, 2, 1, 4, False, (-1, -1), 0.0),
    (2, 7, 4, 4, 2, 3, True, (-1, -1), 0.0),   # Sq > Sk: the first 3 rows see no key
    (1, 3, 9, 2, 2, 8, True, (2, -1), 0.0),
    (1, 6, 6, 3, 1, 5, False, (1, 1), 1.5),
]


def case_id(c):
    return "b{}_sq{}_sk{}_h{}x{}_d{}_{}_w{}x{}_cap{}".format(*c[:6], "causal" if c[6] else "full", *c[7], c[8])


def arrays(c, seed=0):
    B, Sq, Sk, Hq, Hkv, D = c[:6]
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, Sq, Hq, D)).astype(np.float16)
    k = rng.standard_normal((B, Sk, Hkv, D)).astype(np.float16)
    v = rng.standard_normal((B, Sk, Hkv, D)).astype(np.float16)
    return q, k, v


@pytest.mark.parametrize("c", CASES, ids=case_id)
def test_numpy_path_matches_independent_oracle(c):
    q, k, v = arrays(c)
    causal, window, cap = c[6], c[7], c[8]
    o, lse = hk.attention(q, k, v, causal=causal, window=window, softcap=cap, return_lse=True)
    want_o, want_lse = np_attention(q, k, v, causal, None, window, cap)
    assert o.dtype == np.float16 and o.shape == q.shape and lse.dtype == np.float32
    np.testing.assert_allclose(o.astype(np.float64), want_o, atol=2e-3, rtol=2e-3)
    np.testing.assert_allclose(lse, want_lse.astype(np.float32), atol=1e-5, rtol=1e-5)
    # bhsd: the same numbers through the other layout
    ob = hk.attention(*(x.transpose(0, 2, 1, 3) for x in (q, k, v)), causal=causal, window=window, softcap=cap,
                      layout="bhsd")
    np.testing.assert_allclose(ob.transpose(0, 2, 1, 3).astype(np.float64), want_o, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("c", CASES, ids=case_id)
def test_backward_reference_matches_finite_differences(c):
    q, k, v = arrays(c, 1)
    causal, window, cap = c[6], c[7], c[8]
    o, lse = hk.reference("attention", q, k, v, causal=causal, window_left=window[0], window_right=window[1],
                          softcap=cap)
    dout = np.random.default_rng(2).standard_normal(o.shape)
    dq, dk, dv = hk.reference("attention", q, k, v, o.astype(np.float16), dout.astype(np.float16),
                              lse.astype(np.float32), backward=True, causal=causal, window_left=window[0],
                              window_right=window[1], softcap=cap)
    # the finite differences see the same (rounded) o and dout the reference took
    want = np_attention_grad(q, k, v, dout.astype(np.float16).astype(np.float64), causal, None, window, cap)
    for got, exp in zip((dq, dk, dv), want):
        np.testing.assert_allclose(got, exp, atol=2e-3, rtol=2e-3)


def test_numpy_bad_input():
    q = np.zeros((1, 4, 3, 8), np.float16)
    k = np.zeros((1, 4, 2, 8), np.float16)
    with pytest.raises(ValueError, match="multiple"):
        hk.attention(q, k, k)
    with pytest.raises(TypeError, match="bf16 or f16"):
        hk.attention(q.astype(np.float32), q.astype(np.float32), q.astype(np.float32))
    with pytest.raises(ValueError, match="layout"):
        hk.attention(q, q, q, layout="sbhd")


def test_registry_lists_the_ladder():
    names = {v.name: v for v in hk.variants("attention")}
    for n in ("v01_materialized", "v02_online_softmax", "v03_fa2_mma_sync", "v04_fa2_backward"):
        assert n in names
    assert names["v02_online_softmax"].is_production and not names["v01_materialized"].is_production


# ---- GPU: against torch -----------------------------------------------------------------------

def sdpa_ref(q, k, v, causal, scale=None):
    """torch SDPA in f64 on bshd tensors, GQA by repeating k/v (top-left causal: Sq == Sk only)."""
    import torch
    g = q.shape[2] // k.shape[2]
    qt, kt, vt = (x.double().transpose(1, 2) for x in (q, k, v))
    kt, vt = kt.repeat_interleave(g, 1), vt.repeat_interleave(g, 1)
    o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=scale)
    return o.transpose(1, 2)


TOL = {"torch.bfloat16": dict(atol=2e-2, rtol=1.6e-2), "torch.float16": dict(atol=3e-3, rtol=2e-3)}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("d", [64, 128, 40, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_matches_sdpa(cuda, dtype, d, causal):
    import torch
    dt = getattr(torch, dtype)
    q = torch.randn(2, 300, 8, d, device=cuda, dtype=dt)
    k = torch.randn(2, 300, 2, d, device=cuda, dtype=dt)
    v = torch.randn(2, 300, 2, d, device=cuda, dtype=dt)
    o = hk.attention(q, k, v, causal=causal)
    torch.testing.assert_close(o.double(), sdpa_ref(q, k, v, causal), **TOL[str(dt)])


def test_bhsd_views_and_bottom_right_causal(cuda):
    import torch
    q = torch.randn(2, 4, 77, 64, device=cuda, dtype=torch.bfloat16)   # bhsd
    k = torch.randn(2, 1, 200, 64, device=cuda, dtype=torch.bfloat16)  # MQA
    v = torch.randn(2, 1, 200, 64, device=cuda, dtype=torch.bfloat16)
    o = hk.attention(q, k, v, causal=True, layout="bhsd")
    want, _ = np_attention(*(x.transpose(1, 2).float().cpu().numpy() for x in (q, k, v)), causal=True)
    torch.testing.assert_close(o.transpose(1, 2).double().cpu(), torch.from_numpy(want), atol=2e-2, rtol=1.6e-2)
    # the same tensors as bshd views (transposed, no copy)
    o2 = hk.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
    torch.testing.assert_close(o2, o.transpose(1, 2), atol=0, rtol=0)


@pytest.mark.parametrize("d", [64, 128, 48])
@pytest.mark.parametrize("deterministic", [False, True])
def test_backward_matches_sdpa_autograd(cuda, d, deterministic):
    import torch
    q = torch.randn(2, 257, 8, d, device=cuda, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(2, 257, 2, d, device=cuda, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(2, 257, 2, d, device=cuda, dtype=torch.bfloat16, requires_grad=True)
    dout = torch.randn(2, 257, 8, d, device=cuda, dtype=torch.bfloat16)
    hk.attention(q, k, v, causal=True, deterministic=deterministic).backward(dout)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    sdpa_ref(q64, k64, v64, True).backward(dout.double())
    # The family's tolerance (AttentionProblem::tolerance): 16 u x the RMS of the reference plus
    # 2 u relative, u = 2^-8. The backward rounds P and dS to bf16 before its GEMMs, and the
    # forward's bf16 output feeds its row sums: at 8 u a few of ~2e5 gradients landed just past.
    for got, want in ((q.grad, q64.grad), (k.grad, k64.grad), (v.grad, v64.grad)):
        scale = want.abs().pow(2).mean().sqrt().item()
        torch.testing.assert_close(got.double(), want, atol=16 * 2**-8 * scale, rtol=2 * 2**-8)


def test_deterministic_backward_repeats_bitwise(cuda):
    import torch
    q = torch.randn(1, 600, 8, 64, device=cuda, dtype=torch.bfloat16)
    k = torch.randn(1, 600, 2, 64, device=cuda, dtype=torch.bfloat16)
    v = torch.randn(1, 600, 2, 64, device=cuda, dtype=torch.bfloat16)
    o, lse = hk.attention(q, k, v, causal=True, return_lse=True)
    dout = torch.randn_like(o)
    runs = [attention_backward(q, k, v, o, dout, lse, causal=True, deterministic=True) for _ in range(3)]
    for r in runs[1:]:
        for a, b in zip(runs[0], r):
            assert torch.equal(a, b)


def test_fully_masked_rows_are_zero_with_minus_inf_lse(cuda):
    import torch
    q = torch.randn(1, 10, 2, 64, device=cuda, dtype=torch.float16)
    k = torch.randn(1, 4, 2, 64, device=cuda, dtype=torch.float16)
    o, lse = hk.attention(q, k, k, causal=True, return_lse=True)  # rows 0..5 see no key
    assert torch.all(o[:, :6] == 0) and torch.all(torch.isneginf(lse[:, :, :6]))
    assert torch.all(torch.isfinite(lse[:, :, 6:]))


def test_opcheck_and_compile(cuda):
    import torch
    q = torch.randn(1, 64, 2, 64, device=cuda, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, 64, 2, 64, device=cuda, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, 64, 2, 64, device=cuda, dtype=torch.bfloat16, requires_grad=True)
    op = _attention.op
    torch.library.opcheck(op, (q, k, v, True, 0.0, -1, -1, 0.0, "bshd", False),
                          test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))
    f = torch.compile(lambda a, b, c: hk.attention(a, b, c, causal=True), fullgraph=True)
    torch.testing.assert_close(f(q, k, v), hk.attention(q, k, v, causal=True))
