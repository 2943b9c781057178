"""hk.quantize_fp8 and hk.matmul_fp8: the NumPy quantiser's grid and groups (any machine), the
family in the registry, bad input, and with torch: the torch quantiser against the NumPy one,
matmul_fp8 against the fp64 product of the dequantised operands in DeepGEMM's calc_diff sense
(CUDA: the kernels; CPU tensors: the fp64 reference), every scaling mode, odd shapes, a weight
stored [K, N], torch.compile(fullgraph=True) and opcheck.
"""

from __future__ import annotations

import numpy as np
import pytest

import hopperkit as hk
from hopperkit.fp8 import FP8_MAX, _round_fp8_np, fp8_scale_shape

try:
    import torch
except ImportError:
    torch = None

MODES = ["tensor", "row", "block"]


def calc_diff(x, y) -> float:
    """DeepGEMM's calc_diff: 1 - 2 sum(x y) / sum(x^2 + y^2) (0 for equal tensors)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    den = (x * x + y * y).sum()
    return 0.0 if den == 0 else float(1 - 2 * (x * y).sum() / den)


def expand_scales(s, mode, rows, cols, block_rows):
    s = np.asarray(s, np.float64)
    if mode == "tensor":
        return np.full((rows, cols), s.reshape(-1)[0])
    if mode == "row":
        return np.repeat(s.reshape(rows, 1), cols, 1)
    return np.repeat(np.repeat(s, block_rows, 0)[:rows], 128, 1)[:, :cols]


def dequant_matmul(qa, sa, qb, sb, mode):
    """fp64 D of quantised operands, per 128-deep block for block-wise scales (the op's oracle)."""
    qa, qb = np.asarray(qa, np.float64), np.asarray(qb, np.float64)
    m, k = qa.shape
    n = qb.shape[0]
    sa, sb = np.asarray(sa, np.float64), np.asarray(sb, np.float64)
    if mode == "tensor":
        return sa.reshape(-1)[0] * sb.reshape(-1)[0] * (qa @ qb.T)
    if mode == "row":
        return sa.reshape(m, 1) * (qa @ qb.T) * sb.reshape(1, n)
    d = np.zeros((m, n))
    for kb in range(-(-k // 128)):
        part = qa[:, kb * 128:(kb + 1) * 128] @ qb[:, kb * 128:(kb + 1) * 128].T
        d += sa[:, kb:kb + 1] * part * np.repeat(sb[:, kb], 128)[:n].reshape(1, n)
    return d


# ---- the NumPy quantiser (no torch needed) ---------------------------------------------------

def test_round_fp8_grid():
    # e4m3: 3 mantissa bits, normals from 2^-6, subnormal step 2^-9, saturation at 448.
    v = np.array([1.0, 1.0625, 1.1875, 0.0, -3.3, 1e6, -1e6, 2**-10, 3 * 2**-10, 2**-6 * 1.07], np.float32)
    got = _round_fp8_np(v, "e4m3")
    assert got.tolist() == [1.0, 1.0, 1.25, 0.0, -3.25, 448.0, -448.0, 0.0, 2**-8, 9 * 2**-9]
    # e5m2: 2 mantissa bits, max 57344.
    assert _round_fp8_np(np.array([1.2, 1e9, 5.5], np.float32), "e5m2").tolist() == [1.25, 57344.0, 6.0]


@pytest.mark.parametrize("mode,block_rows", [("tensor", 1), ("row", 1), ("block", 1), ("block", 128)])
@pytest.mark.parametrize("dtype", ["e4m3", "e5m2"])
def test_quantize_numpy_groups(rng, mode, block_rows, dtype):
    rows, cols = 130, 300
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x[7] = 0.0  # an all-zero row
    q, s = hk.quantize_fp8(x, scaling=mode, dtype=dtype, block_rows=block_rows)
    assert q.shape == x.shape and q.dtype == np.float32
    assert s.shape == fp8_scale_shape(mode, rows, cols, block_rows) and s.dtype == np.float32
    assert np.abs(q).max() == FP8_MAX[dtype]  # the largest magnitude lands on the largest value
    assert np.array_equal(_round_fp8_np(q, dtype), q)  # every value is on the format's grid
    full = expand_scales(s, mode, rows, cols, block_rows)
    ulp = 2.0**-3 if dtype == "e4m3" else 2.0**-2
    assert np.all(np.abs(q * full - x) <= np.maximum(np.abs(x) * ulp, full * 2.0**-9) * 1.0001)
    if mode == "row":
        assert s[7] == 1.0


def test_quantize_bad_input():
    x = np.zeros((4, 8), np.float32)
    with pytest.raises(ValueError, match="scaling must be"):
        hk.quantize_fp8(x, scaling="channel")
    with pytest.raises(ValueError, match="dtype must be"):
        hk.quantize_fp8(x, dtype="e3m4")
    with pytest.raises(ValueError, match="block_rows must be 1"):
        hk.quantize_fp8(x, scaling="block", block_rows=64)
    with pytest.raises(ValueError, match=r"x must be \[rows, cols\]"):
        hk.quantize_fp8(np.zeros(8, np.float32))


def test_family_registered():
    assert "gemm_fp8" in hk.families()
    rungs = {v.name: v for v in hk.variants("gemm_fp8")}
    assert {"v01_dequant_naive", "baseline_cublaslt", "v02_wgmma_tensor_row", "v03_wgmma_block_scaled",
            "v04_aligned_pack", "v05_split_k", "v06_cluster_multicast", "v07_wgmma_in_flight",
            "v08_lean_issue"} <= set(rungs)
    assert "reference" in rungs["v01_dequant_naive"].flags
    assert "baseline" in rungs["baseline_cublaslt"].flags
    for name in ("baseline_cublaslt", "v04_aligned_pack", "v05_split_k", "v07_wgmma_in_flight", "v08_lean_issue"):
        assert "production" in rungs[name].flags
    for name in ("v02_wgmma_tensor_row", "v03_wgmma_block_scaled", "v06_cluster_multicast"):
        assert "production" not in rungs[name].flags


def test_matmul_fp8_numpy_is_a_type_error():
    a = np.zeros((4, 16), np.float32)
    s = np.ones(1, np.float32)
    with pytest.raises(TypeError, match="expected e4m3 or e5m2"):
        hk.matmul_fp8(a, s, a, s)


# ---- torch ------------------------------------------------------------------------------------

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch: torch is not installed")


@pytest.fixture(params=["cuda", "cpu"])
def dev(request):
    if request.param == "cuda":
        return request.getfixturevalue("cuda")
    if torch is None:
        pytest.skip("needs torch: torch is not installed")
    return torch.device("cpu")


def _fp8_dlpack_ok() -> str:
    """'' when this torch hands fp8 tensors to hopperkit's C++ (DLPack), else why not."""
    try:
        torch.utils.dlpack.to_dlpack(torch.zeros(1, dtype=torch.float8_e4m3fn))
    except Exception as e:  # noqa: BLE001 - any refusal is the reason
        return f"this torch cannot export float8 tensors through DLPack ({e})"
    return ""


def _operands(m, n, k, mode, device, seed, kn=False):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen)
    x.view(-1)[torch.randint(0, m * k, (max(1, m * k // 4096),), generator=gen)] *= 100.0  # outliers
    w = torch.randn(n, k, generator=gen) * 0.1
    qa, sa = hk.quantize_fp8(x, scaling=mode, block_rows=1)
    qb, sb = hk.quantize_fp8(w, scaling=mode, block_rows=128)
    ref = dequant_matmul(qa.float().numpy(), sa.numpy(), qb.float().numpy(), sb.numpy(), mode)
    if kn:  # the weight stored [K, N], passed as its [N, K] view
        qb = qb.t().contiguous().t()
    return [t.to(device) for t in (qa, sa, qb, sb)], ref


@needs_torch
@pytest.mark.parametrize("mode", MODES)
def test_quantize_torch_matches_numpy(mode):
    x = torch.randn(257, 1000, generator=torch.Generator().manual_seed(3)) * 3
    for block_rows in (1, 128):
        q, s = hk.quantize_fp8(x, scaling=mode, block_rows=block_rows)
        qn, sn = hk.quantize_fp8(x.numpy(), scaling=mode, block_rows=block_rows)
        assert q.dtype == torch.float8_e4m3fn and s.dtype == torch.float32
        np.testing.assert_array_equal(s.numpy(), sn)
        np.testing.assert_array_equal(q.float().numpy(), qn)


@needs_torch
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 17, 17), (129, 129, 129), (1000, 1040, 1024), (1, 2112, 7168)])
def test_matmul_fp8_calc_diff(dev, mode, shape):
    if dev.type == "cpu":
        if _fp8_dlpack_ok():
            pytest.skip(_fp8_dlpack_ok())
        if shape[0] * shape[1] * shape[2] > 2e8:
            pytest.skip("the fp64 CPU reference at this size is slow; the CUDA run covers it")
    m, n, k = shape
    (a, sa, b, sb), ref = _operands(m, n, k, mode, dev, seed=m + n + k)
    d = hk.matmul_fp8(a, sa, b, sb)
    assert d.shape == (m, n) and d.dtype == torch.bfloat16 and d.device == a.device
    assert calc_diff(d.float().cpu().numpy(), ref) < 1e-3


@needs_torch
def test_block_scaling_beats_tensor_scaling_with_outliers(dev):
    # Twelve activations 1e5 x the rest: one per-tensor scale spends e4m3's range on them and
    # pushes the other values of A into its subnormals; row-wise and 1 x 128 block scales keep
    # that to the outliers' rows and blocks. Through the public op (the kernels on a GPU), on the
    # rows of D without an outlier, against the fp64 product of the unquantised operands.
    if dev.type == "cpu" and _fp8_dlpack_ok():
        pytest.skip(_fp8_dlpack_ok())
    m, n, k = 256, 256, 512
    gen = torch.Generator().manual_seed(21)
    x = torch.randn(m, k, generator=gen, dtype=torch.float64)
    w = torch.randn(n, k, generator=gen, dtype=torch.float64) * 0.05
    at = torch.randint(0, m * k, (12,), generator=gen)
    x.view(-1)[at] = torch.where(x.view(-1)[at] < 0, -1e5, 1e5).double()
    clean = np.setdiff1d(np.arange(m), (at // k).numpy())
    exact = (x @ w.T).numpy()[clean]
    diffs = {}
    for mode in MODES:
        qa, sa = hk.quantize_fp8(x.float(), scaling=mode, block_rows=1)
        qb, sb = hk.quantize_fp8(w.float(), scaling=mode, block_rows=128)
        d = hk.matmul_fp8(*(t.to(dev) for t in (qa, sa, qb, sb)), out_dtype=torch.float32)
        diffs[mode] = calc_diff(d.cpu().numpy()[clean], exact)
    assert diffs["block"] <= diffs["tensor"] and diffs["row"] <= diffs["tensor"], diffs
    # teeth: per-tensor scaling is several times worse here; block-wise keeps e4m3's rounding
    assert diffs["tensor"] > 4 * diffs["block"] and diffs["block"] < 5e-3, diffs


@needs_torch
@pytest.mark.parametrize("mode", ["tensor", "block"])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float16] if torch is not None else [])
def test_matmul_fp8_weight_kn_and_bias(cuda, mode, out_dtype):
    m, n, k = 300, 264, 1000
    (a, sa, b, sb), ref = _operands(m, n, k, mode, cuda, seed=5, kn=True)
    assert b.stride() == (1, n)
    bias = torch.randn(n, device=cuda).to(out_dtype)
    d = hk.matmul_fp8(a, sa, b, sb, out_dtype=out_dtype, bias=bias)
    assert d.dtype == out_dtype
    assert calc_diff(d.double().cpu().numpy(), ref + bias.double().cpu().numpy()) < 1e-3


@needs_torch
def test_matmul_fp8_bad_input(dev):
    a = torch.zeros(8, 32, dtype=torch.float8_e4m3fn, device=dev)
    s = torch.ones(1, device=dev)
    with pytest.raises(ValueError, match="K must match"):
        hk.matmul_fp8(a, s, torch.zeros(16, 31, dtype=torch.float8_e4m3fn, device=dev), s)
    with pytest.raises(TypeError, match="expected e4m3 or e5m2"):
        hk.matmul_fp8(a.to(torch.bfloat16), s, a, s)
    with pytest.raises(ValueError, match="row-wise sa must be"):
        hk.matmul_fp8(a, torch.ones(9, device=dev), a, torch.ones(8, device=dev))
    with pytest.raises(TypeError, match="out_dtype must be"):
        hk.matmul_fp8(a, s, a, s, out_dtype=torch.int32)


@needs_torch
def test_matmul_fp8_compile_and_opcheck(cuda):
    (a, sa, b, sb), ref = _operands(256, 384, 512, "block", cuda, seed=9)

    def f(a, sa, b, sb):
        return hk.matmul_fp8(a, sa, b, sb)

    d = torch.compile(f, fullgraph=True)(a, sa, b, sb)
    assert calc_diff(d.float().cpu().numpy(), ref) < 1e-3
    # test_schema is left out: its mutation check multiplies the inputs, which torch does not
    # implement for float8 ("mul_cuda" not implemented for 'Float8_e4m3fn'); the schema declares no
    # mutation and the other checks run the op.
    torch.library.opcheck(torch.ops.hopperkit.matmul_fp8.default, (a, sa, b, sb, None, "bf16"),
                          test_utils=("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"))
    x = torch.randn(64, 256, device=cuda)
    torch.library.opcheck(torch.ops.hopperkit.quantize_fp8.default, (x, "block", "e4m3", 1))
    q, s = torch.compile(lambda t: hk.quantize_fp8(t, scaling="row"), fullgraph=True)(x)
    assert q.dtype == torch.float8_e4m3fn and s.shape == (64,)


@needs_torch
def test_matmul_fp8_fast_accum(dev):
    # The accumulation over all of K (torch._scaled_mm's use_fast_accum): per-tensor and row-wise,
    # DeepGEMM's criterion still met at K = 4096; block-wise scales refuse it.
    if dev.type == "cpu" and _fp8_dlpack_ok():
        pytest.skip(_fp8_dlpack_ok())
    for mode in ("tensor", "row"):
        (a, sa, b, sb), ref = _operands(256, 384, 4096, mode, dev, seed=31)
        d = hk.matmul_fp8(a, sa, b, sb, use_fast_accum=True)
        assert calc_diff(d.float().cpu().numpy(), ref) < 1e-3
    (a, sa, b, sb), _ = _operands(64, 128, 256, "block", dev, seed=32)
    with pytest.raises(ValueError, match="fast_accum takes per-tensor or row-wise"):
        hk.matmul_fp8(a, sa, b, sb, use_fast_accum=True)
