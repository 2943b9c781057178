"""hk.matmul_w4a16 and the 4-bit weight helpers: pack / unpack / repack round trips (bit-exact),
quantisation bounds, the GPTQ and AutoAWQ loaders, the NumPy path against an fp64 dequantisation
(CPU); the kernels against torch for M from decode to prefill, every group size, both zero-point
modes and both layouts, torch.compile, opcheck and every rung by name (GPU).
"""

from __future__ import annotations

import numpy as np
import pytest

import hopperkit as hk
from hopperkit import w4a16 as w4

GROUPS = [32, 64, 128, None]  # None: one group per row (g = K)


def random_words(rng, shape):
    return rng.integers(-(2**31), 2**31, size=shape, dtype=np.int64).astype(np.int32)


def dequant_np(qweight, scales, zeros, group_size):
    """fp64 dequant(W) [N, K] from the interchange tensors, written independently of the package:
    nibble j of word w is column 8 w + j."""
    n, words = qweight.shape
    u = qweight.view(np.uint32).astype(np.int64)
    q = np.stack([(u >> (4 * j)) & 0xF for j in range(8)], axis=-1).reshape(n, 8 * words)
    groups = scales.shape[1]
    if zeros is None:
        z = np.full((n, groups), 8)
    else:
        zu = zeros.view(np.uint32).astype(np.int64)
        z = np.stack([(zu >> (4 * j)) & 0xF for j in range(8)], axis=-1).reshape(n, -1)[:, :groups]
    gidx = np.arange(8 * words) // group_size
    return (q - z[:, gidx]) * scales.astype(np.float64)[:, gidx]


# ---- format helpers (CPU, NumPy) ---------------------------------------------------------------

def test_pack_nibble_order():
    q = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 15, 14, 13, 12, 11, 10, 9, 8]], dtype=np.uint8)
    w = hk.w4a16_pack(q, 16)
    assert w.dtype == np.int32 and w.shape == (1, 2)
    assert w.view(np.uint32).tolist() == [[0x76543210, 0x89ABCDEF]]
    z = hk.w4a16_pack_zeros(np.arange(1, 12, dtype=np.uint8)[None])
    assert z.view(np.uint32).tolist() == [[0x87654321, 0x00000BA9]]


@pytest.mark.parametrize("n,k", [(1, 8), (3, 24), (17, 200), (64, 1152)])
def test_pack_unpack_round_trip_bit_exact(rng, n, k):
    q = rng.integers(0, 16, size=(n, k)).astype(np.uint8)
    assert np.array_equal(hk.w4a16_unpack(hk.w4a16_pack(q)), q)
    words = random_words(rng, (n, k // 8))  # every bit pattern is a valid word
    assert np.array_equal(hk.w4a16_pack(hk.w4a16_unpack(words)), words)
    z = rng.integers(0, 16, size=(n, 13)).astype(np.uint8)
    assert np.array_equal(hk.w4a16_unpack_zeros(hk.w4a16_pack_zeros(z), 13), z)


@pytest.mark.parametrize("n,k", [(1, 8), (8, 128), (13, 200), (72, 1152), (257, 384)])
def test_repack_round_trip_and_padding(rng, n, k):
    words = random_words(rng, (n, k // 8))
    tiled = hk.w4a16_repack(words)
    kp = (k + 127) // 128 * 128
    assert tiled.shape == ((n + 7) // 8, kp) and tiled.dtype == np.int32
    assert np.array_equal(hk.w4a16_unrepack(tiled, n, k), words)
    # every word placed once; the rest (padding) zero
    assert np.count_nonzero(tiled) <= words.size
    assert sorted(tiled[tiled != 0].tolist()) == sorted(words[words != 0].tolist())
    # lane 4 r + t of n-tile 0, k-tile 0, chunk c holds word (r, 4 c + t)
    if n >= 2 and k >= 128:
        assert tiled[0, 4 * (4 * 1 + 2) + 3] == words[1, 4 * 3 + 2]


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("g", [32, 64, 128, 256])
def test_quantize_bounds(rng, symmetric, g):
    n, k = 6, 256
    w = rng.standard_normal((n, k)).astype(np.float32)
    w[2, :g] = 0.0  # an all-zero group: s = 1, q = z
    qweight, scales, zeros = hk.w4a16_quantize(w, g, symmetric=symmetric)
    assert qweight.shape == (n, k // 8) and scales.shape == (n, k // g) and scales.dtype == np.float32
    assert (zeros is None) == symmetric
    deq = dequant_np(qweight, scales, zeros, g)
    step = np.repeat(scales.astype(np.float64), g, axis=1)
    assert np.all(np.abs(deq - w) <= (1.0 if symmetric else 0.5) * step + 1e-6)
    assert scales[2, 0] == 1.0 and np.all(deq[2, :g] == 0.0)


def test_gptq_loader_is_a_transpose(rng):
    n, k, g = 24, 256, 64
    groups = k // g
    words = random_words(rng, (n, k // 8))
    z = rng.integers(0, 16, size=(n, groups)).astype(np.uint8)
    scales = rng.random((n, groups)).astype(np.float16)
    # GPTQ v1: qweight [K/8, N], qzeros [G, N/8] packed along N holding z - 1, scales [G, N]
    stored = ((z.astype(np.int64) - 1) & 0xF).T  # [G, N]
    qzeros = hk.w4a16_pack(stored.astype(np.uint8))  # packs along the last dim: N
    q2, s2, z2 = hk.w4a16_from_gptq(np.ascontiguousarray(words.T), qzeros, np.ascontiguousarray(scales.T),
                                    g_idx=np.arange(k) // g)
    assert np.array_equal(q2, words) and np.array_equal(s2, scales)
    assert np.array_equal(hk.w4a16_unpack_zeros(z2, groups), z)
    with pytest.raises(ValueError, match="act-order"):
        hk.w4a16_from_gptq(np.ascontiguousarray(words.T), qzeros, np.ascontiguousarray(scales.T),
                           g_idx=rng.permutation(np.arange(k) // g))


def test_awq_loader_unpermutes_nibbles(rng):
    n, k, g = 16, 128, 32
    groups = k // g
    q = rng.integers(0, 16, size=(n, k)).astype(np.int64)
    z = rng.integers(0, 16, size=(n, groups)).astype(np.int64)
    scales = rng.random((n, groups)).astype(np.float16)
    order = [0, 2, 4, 6, 1, 3, 5, 7]

    def awq_pack(v):  # [R, C] -> [R, C / 8], nibble i holds column 8 w + order[i]
        r, c = v.shape
        out = np.zeros((r, c // 8), dtype=np.int64)
        for i, col in enumerate(order):
            out |= v[:, col::8] << (4 * i)
        return out.astype(np.uint32).view(np.int32)

    q2, s2, z2 = hk.w4a16_from_awq(awq_pack(q.T.copy()), awq_pack(z.T.copy()), np.ascontiguousarray(scales.T))
    assert np.array_equal(hk.w4a16_unpack(q2), q.astype(np.uint8))
    assert np.array_equal(hk.w4a16_unpack_zeros(z2, groups), z.astype(np.uint8))
    assert np.array_equal(s2, scales)


def test_helper_errors():
    with pytest.raises(ValueError, match=r"\[0, 15\]"):
        hk.w4a16_pack(np.full((1, 8), 16))
    with pytest.raises(ValueError, match="multiple of 8"):
        hk.w4a16_pack(np.zeros((1, 12), dtype=np.uint8))
    with pytest.raises(ValueError, match="group_size must be a multiple of 32"):
        hk.w4a16_pack(np.zeros((1, 64), dtype=np.uint8), group_size=48)
    with pytest.raises(TypeError, match="int32"):
        hk.w4a16_unpack(np.zeros((1, 8), dtype=np.int64))
    with pytest.raises(ValueError, match="non-finite"):
        hk.w4a16_quantize(np.full((1, 32), np.nan, dtype=np.float32), 32)
    with pytest.raises(ValueError, match="expected"):
        hk.w4a16_unrepack(np.zeros((1, 128), dtype=np.int32), 9, 128)


# ---- the NumPy path: the fp64 reference (CPU) -----------------------------------------------------

def problem_inputs(rng, m, n, k, g, symmetric, dtype=np.float16):
    x = rng.standard_normal((m, k)).astype(dtype)
    qweight = random_words(rng, (n, k // 8))
    scales = (rng.random((n, k // g)) * 0.1 + 0.01).astype(dtype)
    zeros = None if symmetric else random_words(rng, (n, (k // g + 7) // 8))
    return x, qweight, scales, zeros


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("g", GROUPS)
@pytest.mark.parametrize("m", [1, 7, 16, 33])
def test_numpy_path_matches_fp64(rng, m, g, symmetric):
    n = 40
    k = 3 * g if g else 96
    g = g or k
    x, qweight, scales, zeros = problem_inputs(rng, m, n, k, g, symmetric)
    want = x.astype(np.float64) @ dequant_np(qweight, scales, zeros, g).T
    y = hk.matmul_w4a16(x, qweight, scales, zeros, group_size=g)
    assert y.shape == (m, n) and y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2.0**-10, atol=1e-3)
    tiled = hk.matmul_w4a16(x, hk.w4a16_repack(qweight), scales, zeros, group_size=g, layout="tiled")
    assert np.array_equal(tiled, y)
    # leading dims fold into M
    y3 = hk.matmul_w4a16(x.reshape(1, m, k), qweight, scales, zeros, group_size=g)
    assert y3.shape == (1, m, n) and np.array_equal(y3[0], y)


def test_numpy_path_errors(rng):
    x, qweight, scales, zeros = problem_inputs(rng, 4, 16, 256, 128, False)
    with pytest.raises(ValueError, match="group_size must be a multiple of 32"):
        hk.matmul_w4a16(x, qweight, scales, zeros, group_size=96)
    with pytest.raises(TypeError, match="qweight is f32, expected i32"):
        hk.matmul_w4a16(x, qweight.astype(np.float32), scales, zeros, group_size=128)
    with pytest.raises(TypeError, match="scales is f32, expected f16"):
        hk.matmul_w4a16(x, qweight, scales.astype(np.float32), zeros, group_size=128)
    with pytest.raises(ValueError, match="qweight has shape"):
        hk.matmul_w4a16(x, qweight[:, :16], scales, zeros, group_size=128)
    with pytest.raises(ValueError, match="layout must be"):
        hk.matmul_w4a16(x, qweight, scales, zeros, group_size=128, layout="cols")
    with pytest.raises(TypeError, match="x is f32, expected bf16 or f16"):
        hk.matmul_w4a16(x.astype(np.float32), qweight, scales, zeros, group_size=128)


# ---- torch (GPU) -------------------------------------------------------------------------------------

def torch_inputs(torch, dev, m, n, k, g, symmetric, dtype):
    gen = torch.Generator().manual_seed(m * 1000 + n + k + g)
    w = torch.randn(n, k, generator=gen)
    qweight, scales, zeros = hk.w4a16_quantize(w, g, symmetric=symmetric)
    x = torch.randn(m, k, generator=gen).to(dtype)
    return x.to(dev), qweight.to(dev), scales.to(dtype).to(dev), None if zeros is None else zeros.to(dev)


def torch_reference(torch, x, qweight, scales, zeros, g):
    deq = dequant_np(qweight.cpu().numpy(), scales.float().cpu().numpy(), None if zeros is None else zeros.cpu().numpy(), g)
    return x.double().cpu() @ torch.from_numpy(deq).T


@pytest.mark.parametrize("layout", ["rows", "tiled"])
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("g", GROUPS)
@pytest.mark.parametrize("m", [1, 7, 16, 33, 128])
def test_matmul_w4a16_cuda(cuda, m, g, symmetric, layout):
    import torch

    n = 264
    k = 3 * g if g else 384
    g = g or k
    dtype = torch.bfloat16 if (m + g) % 2 else torch.float16
    x, qweight, scales, zeros = torch_inputs(torch, cuda, m, n, k, g, symmetric, dtype)
    qw = hk.w4a16_repack(qweight) if layout == "tiled" else qweight
    y = hk.matmul_w4a16(x, qw, scales, zeros, group_size=g, layout=layout)
    assert y.shape == (m, n) and y.dtype == dtype and y.device == x.device
    want = torch_reference(torch, x, qweight, scales, zeros, g)
    u = 2.0**-8 if dtype == torch.bfloat16 else 2.0**-11
    atol = 4 * u * k**0.5 * float(scales.abs().max()) * 8 + 2.0**-20 * k
    rtol = 2.0**-7 if dtype == torch.bfloat16 else 2.0**-10
    torch.testing.assert_close(y.double().cpu(), want, rtol=rtol, atol=atol)
    # Marlin's rule: mean |y - ref| / mean |ref| at most 1e-3 (f16: about 2 u). bf16's u is 8x
    # f16's: its output rounding alone averages about 2^-9 of |y|, so bf16 is held to 2 u = 2^-7.
    mre = float((y.double().cpu() - want).abs().mean() / want.abs().mean())
    assert mre <= (1e-3 if dtype == torch.float16 else 2.0**-7), f"mean relative error {mre:.3g}"


def test_every_rung_and_compile(cuda):
    import torch

    x, qweight, scales, zeros = torch_inputs(torch, cuda, 16, 136, 256, 64, False, torch.bfloat16)
    want = hk.matmul_w4a16(x, qweight, scales, zeros, group_size=64)
    ran = []
    for v in hk.variants("gemm_w4a16"):
        if hk.supports("gemm_w4a16", v.name, x, qweight, scales, zeros, group_size=64):
            continue  # a rung for other shapes (M = 1 only, say): its own suite covers it
        ran.append(v.name)
        got = hk.run("gemm_w4a16", v.name, x, qweight, scales, zeros, group_size=64)
        torch.testing.assert_close(got.float(), want.float(), rtol=2.0**-6, atol=0.05 * 16)
    assert {"v02_decode_gemv", "v03_mma_dequant", "v04_decode_mma_splitk", "baseline_cublas_dequant"} <= set(ran)
    fn = torch.compile(lambda a: hk.matmul_w4a16(a, qweight, scales, zeros, group_size=64), fullgraph=True)
    torch.testing.assert_close(fn(x), want)
    torch.library.opcheck(torch.ops.hopperkit.matmul_w4a16.default, (x, qweight, scales, zeros, 64, "rows"))
    # the torch helpers run on the device and agree with the NumPy ones
    assert torch.equal(hk.w4a16_unpack(qweight).cpu(), torch.from_numpy(hk.w4a16_unpack(qweight.cpu().numpy())))
    assert torch.equal(hk.w4a16_repack(qweight).cpu(), torch.from_numpy(hk.w4a16_repack(qweight.cpu().numpy())))


# ---- the int4 names: quantize_int4, int4_matmul, nn.Int4Linear ---------------------------------------

def test_int4_names_match_matmul_w4a16(rng):
    x, qweight, scales, zeros = problem_inputs(rng, 5, 40, 256, 64, False)
    # the group size is read from the shapes
    assert np.array_equal(hk.int4_matmul(x, qweight, scales, zeros),
                          hk.matmul_w4a16(x, qweight, scales, zeros, group_size=64))
    with pytest.raises(ValueError, match="does not divide K"):
        hk.int4_matmul(x, qweight, scales[:, :3], zeros)
    w = rng.standard_normal((40, 256)).astype(np.float32)
    for symmetric in (False, True):
        got, want = hk.quantize_int4(w, 64, symmetric), hk.w4a16_quantize(w, 64, symmetric)
        assert all((a is None and b is None) or np.array_equal(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("rows", [1, 15])
def test_int4_linear_from_linear(cuda, rows, symmetric):
    import torch

    torch.manual_seed(rows)
    lin = torch.nn.Linear(256, 72, bias=True, dtype=torch.bfloat16, device=cuda)
    m = hk.nn.Int4Linear.from_linear(lin, group_size=64, symmetric=symmetric)
    assert m.qweight.shape == (72, 32) and m.scales.dtype == torch.bfloat16 and (m.zeros is None) == symmetric
    assert set(m.state_dict()) == {"qweight", "scales", "bias"} | (set() if symmetric else {"zeros"})
    deq = torch.from_numpy(dequant_np(m.qweight.cpu().numpy(), m.scales.float().cpu().numpy(),
                                      None if m.zeros is None else m.zeros.cpu().numpy(), 64))
    # round to nearest: each weight within one quantisation step of the layer's (a step at the
    # clamped end of a group's range), plus the scale's rounding to bf16
    step = m.scales.double().cpu().repeat_interleave(64, dim=1)
    assert (deq - lin.weight.double().cpu()).abs().le(1.05 * step).all()
    x = torch.randn(3, rows, 256, device=cuda, dtype=torch.bfloat16)
    y = m(x)
    assert y.shape == (3, rows, 72) and y.dtype == torch.bfloat16 and y.device == x.device
    want = x.double().cpu() @ deq.T + lin.bias.double().cpu()
    torch.testing.assert_close(y.double().cpu(), want, rtol=2.0**-7, atol=0.02)
    with pytest.raises(ValueError, match="does not divide"):
        hk.nn.Int4Linear(256, 8, group_size=96)
