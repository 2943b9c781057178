"""python -m hopperkit.bench: the public ops against PyTorch, and hk.explain."""

from __future__ import annotations

import numpy as np
import pytest

import hopperkit as hk


def test_importing_the_module_keeps_hk_bench_callable():
    import hopperkit.bench as tb

    assert callable(hk.bench)
    assert callable(tb.main) and callable(tb.run)


def test_recorded_command_leaves_out_the_json_files_folder():
    import hopperkit.bench as tb

    cmd = tb.command_line("python -m hopperkit.bench", ["--quick", "--json", "/some/dir/out.json", "--samples", "8"])
    assert cmd == "python -m hopperkit.bench --quick --json out.json --samples 8"
    assert tb.command_line("p", ["--json=/a/b/c.json"]) == "p --json=c.json"


def test_markdown_reports_ratios_to_eager_and_the_best_peer():
    import hopperkit.bench as tb

    doc = {"rows": [
        {"op": "softmax", "variant": "hopperkit", "problem": "p", "status": "ok", "median_us": 50.0,
         "speedup_vs_baseline": 2.0, "vs_best_peer": 1.25},
        {"op": "softmax", "variant": "torch", "problem": "p", "status": "ok", "median_us": 100.0},
        {"op": "softmax", "variant": "torch.compile", "problem": "p", "status": "ok", "median_us": 62.5},
        {"op": "gelu", "variant": "hopperkit", "problem": "q", "status": "FAIL: 3 elements"},
    ]}
    text = tb.markdown(doc)
    assert "| softmax | p | 50.0 | 100.0 | 62.5 | n/a | 2.00x | 1.25x |" in text
    assert "| gelu | q | FAIL: 3 elements |" in text
    assert "stopped early" not in text
    doc["stopped"] = True  # a run stopped by Ctrl-C or a timeout says so above its rows
    assert tb.markdown(doc).startswith("**The run was stopped early: rows are missing.**")


def test_explain_names_the_packing_rung_for_an_odd_k():
    # Metadata only: host arrays describe the problem. x @ W^T with K = 4095 is not
    # TMA-describable as given; the dispatch packs it rather than walking down the ladder.
    x = np.zeros((64, 4095), np.float16)
    w = np.zeros((128, 4095), np.float16)
    text = hk.explain("gemm", x, w.T)
    assert text.splitlines()[0].split(": ")[1].startswith("v19_aligned_pack")
    assert "passed over v18_stream_k_tail: gemm: K*2 bytes must be a multiple of 16 for TMA, got K=4095" in text
    # Above 2^36 flops with TMA-readable operands: v18 (np.zeros touches no memory).
    aligned = hk.explain("gemm", np.zeros((4096, 4096), np.float16), np.zeros((4096, 4096), np.float16).T)
    assert "v18_stream_k_tail" in aligned.splitlines()[0]
    # A small plain product: cuBLAS, where it measured faster than v18.
    small = hk.explain("gemm", np.zeros((256, 512), np.float16), np.zeros((128, 512), np.float16).T)
    assert "baseline_cublas" in small.splitlines()[0]


def test_variants_mark_production_and_ladder_rungs():
    vs = {v.name: v for v in hk.variants("gemm")}
    assert vs["v18_stream_k_tail"].is_production
    assert vs["v19_aligned_pack"].is_production
    assert not vs["v04_register_tiling_2d"].is_production


def test_torch_bench_quick_runs_on_the_gpu(cuda):
    import hopperkit.bench as tb

    doc = tb.run(["softmax", "matmul"], quick=True, samples=3, compile=False, progress=False)
    ours = [r for r in doc["rows"] if r["variant"] == "hopperkit"]
    assert {r["op"] for r in ours} == {"softmax", "matmul"}
    for r in ours:
        assert r["status"] == "ok", r
        assert r["median_us"] > 0 and r["speedup_vs_baseline"] > 0


def test_torch_bench_quick_has_one_checked_row_per_block_op_and_backward(cuda):
    # rope, swiglu, linear and the backwards: one bf16 row each in the quick run, each past the
    # check against PyTorch.
    import hopperkit.bench as tb

    ops = ["rope", "rope_backward", "swiglu", "swiglu_backward", "linear", "softmax_backward", "rms_norm_backward",
           "weighted_sum_backward", "row_scale_relu_backward"]
    doc = tb.run(ops, quick=True, samples=3, compile=False, progress=False)
    ours = [r for r in doc["rows"] if r["variant"] == "hopperkit"]
    assert sorted(r["op"] for r in ours) == sorted(ops)
    for r in ours:
        assert r["status"] == "ok", r
        assert r["problem"].endswith("_bf16") and r["median_us"] > 0


def test_torch_bench_attention_fp8_row_is_checked_against_sdpa(cuda):
    # The FP8 forward against SDPA on the bf16 tensors it was quantised from: the row passes the
    # check (half the RMS of SDPA's output) and is timed beside both SDPA backends.
    import hopperkit.bench as tb

    doc = tb.run(["attention_fp8"], quick=True, samples=3, compile=False, progress=False)
    rows = {r["variant"]: r for r in doc["rows"]}
    assert rows["hopperkit"]["status"] == "ok", rows["hopperkit"]
    assert rows["hopperkit"]["problem"].endswith("_e4m3") and rows["hopperkit"]["median_us"] > 0
    assert {"torch", "torch.cudnn"} <= set(rows)


def test_fp8_per_head_quantisation_round_trips_within_e4m3():
    # The bench's quantiser: each (batch, head) scaled to e4m3's range, descales that undo it.
    torch = pytest.importorskip("torch")
    import hopperkit.bench as tb

    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 40, 16, generator=gen) * torch.tensor([1.0, 50.0, 1e-3]).view(1, 3, 1, 1)
    x8, descale = tb._fp8_per_head(x)
    assert x8.dtype == torch.float8_e4m3fn and descale.shape == (2, 3) and descale.dtype == torch.float32
    assert torch.allclose(x8.float().abs().amax(dim=(2, 3)), torch.full((2, 3), 448.0))
    back = x8.float() * descale[:, :, None, None]
    # e4m3 rounds to 3 mantissa bits (half an ulp: 2^-4 relative), subnormals to steps of 2^-9.
    bound = 2.0 ** -4 * x.abs() + 2.0 ** -10 * descale[:, :, None, None]
    assert ((back - x).abs() <= bound).all()


def test_a_case_whose_call_raises_is_a_fail_row_and_the_run_goes_on():
    import hopperkit.bench as tb

    def boom():
        raise RuntimeError("no kernel for this shape\nsecond line")

    rows: list = []
    case = tb.Case("attention_varlen", "n2_t10_h1_d8_bf16", boom, boom, 1.0, 1.0)
    tb._run_case(case, 0, 1, samples=3, compile=False, flush=None, rows=rows, progress=False)
    assert [r["variant"] for r in rows] == ["hopperkit", "torch"]
    assert rows[0]["status"] == "FAIL: RuntimeError: no kernel for this shape"
    assert "median_us" not in rows[0]
    assert "FAIL: RuntimeError" in tb.markdown({"rows": rows})


def test_the_spin_covers_the_slowest_call_to_issue():
    # A candidate whose call takes 2 ms of host time gets a spin longer than that, so the device
    # does not wait for it inside the timed region; quick calls keep the 300 µs floor.
    import time

    import hopperkit.bench as tb

    assert tb.covering_spin_us([lambda: None]) == 300.0
    assert tb.covering_spin_us([lambda: None, lambda: time.sleep(0.002)]) >= 1.5 * 2000 + 100
