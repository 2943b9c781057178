"""CPU: python -m hopperkit.plot on a synthetic `hk bench --json` document."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hopperkit import plot

pytest.importorskip("matplotlib", reason="the plot module needs matplotlib")

BW, PEAK = 4.2e12, 760e12


def _row(op, variant, problem, flops, bytes_, us, baseline=False, base_us=None, status="ok"):
    row = {"op": op, "variant": variant, "problem": problem, "status": status, "baseline": baseline,
           "flops": flops, "bytes": bytes_}
    if status == "ok":
        row.update(median_us=us, min_us=us * 0.98, p25_us=us * 0.99, p75_us=us * 1.01, samples=50,
                   tflops=flops / us / 1e6, tbps=bytes_ / us / 1e6)
        if base_us:
            row["speedup_vs_baseline"] = base_us / us
    return row


def synthetic_document() -> dict:
    """The gelu ladder on two problems plus a size sweep, a compute-bound gemm family, and one
    FAIL and one SKIP row; environment and ceilings as `hk bench --json` writes them."""
    rows = []
    rungs = [("v01_unfused", 4.0, True), ("v02_fused", 1.3, False), ("v03_vectorized", 1.05, False)]
    for problem, n, bpe in [("16384x8192_bf16_tanh_fwd", 16384 * 8192, 4), ("16384x8192_f32_tanh_fwd", 16384 * 8192, 8)]:
        ideal = n * bpe / BW * 1e6
        for name, slow, base in rungs:
            rows.append(_row("gelu", name, problem, 8.0 * n, n * bpe, ideal * slow, base, ideal * 4.0))
    for k in range(12, 27, 2):  # a sweep: one configuration at 8 sizes
        n = 1 << k
        ideal = n * 4 / BW * 1e6 + 2.0  # launch latency dominates small sizes
        for name, slow, base in rungs:
            rows.append(_row("gelu", name, f"{n}_bf16_erf_fwd", 8.0 * n, n * 4, ideal * slow, base, ideal * 4.0))
    rows.append(_row("gelu", "v03_vectorized", "3_bf16_erf_bwd", 48, 18, 0, status="FAIL: dx[1]: got 0"))
    m = 8192
    for name, frac, base in [("baseline_cublas", 0.85, True), ("v01_naive", 0.02, False), ("v08_wgmma", 0.7, False)]:
        us = 2 * m**3 / (PEAK * frac) * 1e6
        rows.append(_row("gemm", name, f"m{m}_n{m}_k{m}_bf16", 2.0 * m**3, 3 * m * m * 2, us, base,
                         2 * m**3 / (PEAK * 0.85) * 1e6))
    rows.append(_row("gemm", "v09_fp8", f"m{m}_n{m}_k{m}_bf16", 2.0 * m**3, 3 * m * m * 2, 0,
                     status="SKIP: needs sm_100"))
    return {"kind": "hk-bench", "hopperkit_git_sha": "0123456789ab", "date": "2025-01-01T00:00:00Z",
            "gpu": {"name": "NVIDIA H200", "sm": 90, "sm_count": 132},
            "ceilings": {"copy_bytes_per_s": BW, "bf16_flops_per_s": PEAK, "measured_at": "2025-01-01"},
            "options": {"warm_l2": False, "quick": False, "variant": ""}, "rows": rows}


def test_sweep_detection():
    found = plot.sweeps(synthetic_document()["rows"])
    assert list(found) == [("gelu", "bf16_erf_fwd")]
    assert len(found[("gelu", "bf16_erf_fwd")]) == 8 * 3


def test_plot_command_writes_every_chart(tmp_path):
    src = tmp_path / "bench.json"
    src.write_text(json.dumps(synthetic_document()))
    out = tmp_path / "charts"
    res = subprocess.run([sys.executable, "-m", "hopperkit.plot", str(src), "-o", str(out)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    stems = {"roofline", "ladder-gelu", "ladder-gemm", "scaling-gelu-bf16_erf_fwd"}
    expected = {f"{s}.{ext}" for s in stems for ext in ("png", "svg")}
    assert {p.name for p in out.iterdir()} == expected
    assert set(res.stdout.split()) == {str(out / name) for name in expected}
    for name in expected:
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG") if name.endswith(".png") else b"<svg" in data[:2000]
        assert len(data) > 5000
    svg = (out / "ladder-gemm.svg").read_text()
    assert "SKIP" in svg and "v08_wgmma" in svg
    assert "FAIL" in (out / "ladder-gelu.svg").read_text()


def test_without_ceilings_and_rows_merge(tmp_path):
    doc = synthetic_document()
    del doc["ceilings"]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({**doc, "rows": doc["rows"][:6]}))
    b.write_text(json.dumps({**doc, "rows": doc["rows"][6:]}))
    merged = plot.load([a, b])
    assert len(merged["rows"]) == len(doc["rows"])
    written = plot.plot(merged, tmp_path / "out")
    assert (tmp_path / "out" / "roofline.svg") in written


def test_rejects_non_benchmark_json(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": 1}))
    assert plot.main([str(bad), "-o", str(tmp_path / "o")]) == 1
