#!/usr/bin/env python3
"""Host time per call of hopperkit's Python ops against their torch equivalents, layer by layer.

    PYTHONPATH=<build>/python python scripts/host_overhead.py [--iters 300] [--no-profile]

Needs a CUDA GPU, torch and an importable hopperkit. Runs in well under 60 s on an H200.

Host time = time.perf_counter() around one call, with torch.cuda.synchronize() *before* each
sample (so the launch queue is empty and a call never waits for queue space), reported as the
median in microseconds. Each op is timed twice:
  idle : the GPU is idle when the call starts;
  busy : a ~300 us torch.cuda._sleep spin is queued just before the call (as hopperkit.bench does).
A call whose 'busy' time is ~300 us above its 'idle' time blocks on the device somewhere inside
(an implicit synchronisation: cudaFree, a blocking memcpy, a sync in a library).

Then the hk depthwise conv is peeled layer by layer (public wrapper -> torch custom op ->
custom-op kernel body -> hk._core.launch -> _C.launch -> _C.supports/explain) so each layer's
own cost is the difference between two rows, and cProfile splits one batch of calls between
Python frames and the C extension (cProfile inflates Python time ~1.5-2x; use it for shares).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import hopperkit as hk
from hopperkit import _C
from hopperkit import _core

DEV = torch.device("cuda", 0)


def spin_cycles(us: float) -> int:
    khz = getattr(torch.cuda.get_device_properties(0), "clock_rate", 0) or 1_980_000
    return int(us * khz / 1e3)


SPIN = 0


def host_us(fn, iters: int, busy: bool = False) -> float:
    for _ in range(5):  # warm-up: first-call caches (cuDNN plans, func attributes, allocator)
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(iters):
        torch.cuda.synchronize()
        if busy:
            torch.cuda._sleep(SPIN)
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def row(name: str, fn, iters: int, both: bool = True) -> None:
    idle = host_us(fn, iters)
    if both:
        busy = host_us(fn, iters, busy=True)
        flag = "  <-- blocks on the device?" if busy - idle > 150 else ""
        print(f"  {name:<58} idle {idle:8.1f} us   busy {busy:8.1f} us{flag}", flush=True)
    else:
        print(f"  {name:<58} {idle:8.1f} us", flush=True)


def main() -> None:
    global SPIN
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--no-profile", action="store_true")
    args = ap.parse_args()
    n = args.iters
    t_start = time.perf_counter()
    torch.manual_seed(0)
    SPIN = spin_cycles(300.0)
    bf = torch.bfloat16
    print(f"torch {torch.__version__}, hopperkit {hk.__version__} ({hk.git_sha}), "
          f"{torch.cuda.get_device_name(0)}, python {sys.version.split()[0]}")

    # ---- operands -------------------------------------------------------------------------
    # Depthwise 7x7 (the bench's ConvNeXt layer) and dense 3x3 (ResNet stage), channels_last bf16.
    xd = torch.randn(64, 128, 56, 56, device=DEV, dtype=bf).to(memory_format=torch.channels_last)
    wd = torch.randn(128, 1, 7, 7, device=DEV, dtype=bf).to(memory_format=torch.channels_last)
    xc = torch.randn(64, 256, 56, 56, device=DEV, dtype=bf).to(memory_format=torch.channels_last)
    wc = torch.randn(256, 256, 3, 3, device=DEV, dtype=bf).to(memory_format=torch.channels_last)
    xs = torch.randn(8, 256, 14, 14, device=DEV, dtype=bf).to(memory_format=torch.channels_last)  # small dense
    a = torch.randn(4096, 4096, device=DEV, dtype=bf)
    b = torch.randn(4096, 4096, device=DEV, dtype=bf)
    xr = torch.randn(4096, 4096, device=DEV, dtype=bf)
    gr = torch.randn(4096, device=DEV, dtype=bf)

    print("\n[1] public ops against torch (median host us per call)")
    row("hk.conv2d depthwise 7x7 64x128x56x56", lambda: hk.conv2d(xd, wd, padding=3, groups=128), n)
    row("F.conv2d  depthwise 7x7 64x128x56x56", lambda: F.conv2d(xd, wd, padding=3, groups=128), n)
    row("hk.conv2d dense 3x3 64x256x56x56 (cuDNN)", lambda: hk.conv2d(xc, wc, padding=1), n // 2)
    row("F.conv2d  dense 3x3 64x256x56x56", lambda: F.conv2d(xc, wc, padding=1), n // 2)
    row("hk.conv2d dense 3x3 8x256x14x14 (cuDNN)", lambda: hk.conv2d(xs, wc, padding=1), n)
    row("F.conv2d  dense 3x3 8x256x14x14", lambda: F.conv2d(xs, wc, padding=1), n)
    row("hk.matmul 4096^3 bf16", lambda: hk.matmul(a, b), n)
    row("torch.matmul 4096^3 bf16", lambda: torch.matmul(a, b), n)
    row("hk.rms_norm 4096x4096 bf16", lambda: hk.rms_norm(xr, gr), n)
    if hasattr(F, "rms_norm"):
        row("F.rms_norm 4096x4096 bf16", lambda: F.rms_norm(xr, (4096,), gr, 1e-6), n)
    row("hk.gelu 4096x4096 bf16", lambda: hk.gelu(xr), n)
    row("F.gelu 4096x4096 bf16", lambda: F.gelu(xr), n)
    with torch.no_grad():
        row("hk.conv2d depthwise under torch.no_grad()", lambda: hk.conv2d(xd, wd, padding=3, groups=128), n, False)
    with torch.inference_mode():
        row("hk.conv2d depthwise under torch.inference_mode()",
            lambda: hk.conv2d(xd, wd, padding=3, groups=128), n, False)

    # ---- the depthwise call, layer by layer ----------------------------------------------
    print("\n[2] hk.conv2d depthwise, layer by layer (each row includes the rows below it)")
    xv, wv = xd.permute(0, 2, 3, 1), wd.permute(0, 2, 3, 1)  # [N,H,W,C] and [Cout,kH,kW,1] views
    cargs = (xv, wv, None, 1, 1, 3, 3, 3, 3, 1, 1, 128, "nhwc")
    attrs = dict(stride_h=1, stride_w=1, pad_top=3, pad_bottom=3, pad_left=3, pad_right=3,
                 dilation_h=1, dilation_w=1, groups=128, layout="nhwc")
    y = torch.empty(64, 56, 56, 128, device=DEV, dtype=bf)
    op = torch.ops.hopperkit.conv2d.default
    row("hk.conv2d(...)  public wrapper + all below", lambda: hk.conv2d(xd, wd, padding=3, groups=128), n, False)
    row("torch.ops.hopperkit.conv2d.default(views, 13 args)", lambda: op(*cargs), n, False)
    opdef = None
    try:
        from torch._library.custom_ops import OPDEFS
        opdef = OPDEFS.get("hopperkit::conv2d")
    except Exception:
        pass
    if opdef is not None:
        body = opdef._init_fn  # the kernel_op's `kernel` closure: declare + split + launch
        row("  custom-op kernel body only (no torch dispatcher)", lambda: body(*cargs), n, False)
    row("  hk._core.launch (detach x3, device ctx, stream, _C)",
        lambda: _core.launch("conv2d", "", [xv, wv], [y], attrs), n, False)
    stream = torch.cuda.current_stream(DEV).cuda_stream
    row("  _C.launch only (DLPack x3, attrs, problem, pick, run)",
        lambda: _C.launch("conv2d", "", [xv, wv], [y], attrs, stream), n, False)
    row("  _C.launch with the variant named (skips choose())",
        lambda: _C.launch("conv2d", "v04_depthwise_tiled", [xv, wv], [y], attrs, stream), n, False)
    row("  _C.supports (DLPack x2, attrs, make_problem, supports)",
        lambda: _C.supports("conv2d", "v04_depthwise_tiled", [xv, wv], attrs), n, False)
    row("  _C.explain (as supports + choose + strings)", lambda: _C.explain("conv2d", [xv, wv], attrs), n, False)
    print("  pieces:")
    row("    torch.empty(y) (the declaration's new_like)",
        lambda: torch.empty((64, 56, 56, 128), dtype=bf, device=DEV), n, False)
    row("    x.permute(0,2,3,1) + w.permute", lambda: (xd.permute(0, 2, 3, 1), wd.permute(0, 2, 3, 1)), n, False)
    row("    t.detach() x3", lambda: (xv.detach(), wv.detach(), y.detach()), n, False)
    row("    t.__dlpack__() x3", lambda: (xv.__dlpack__(), wv.__dlpack__(), y.__dlpack__()), n, False)
    def ctx():
        with torch.cuda.device(DEV):
            pass
    row("    with torch.cuda.device(dev) (enter+exit)", ctx, n, False)
    row("    torch.cuda.current_stream(dev).cuda_stream", lambda: torch.cuda.current_stream(DEV).cuda_stream, n, False)
    row("    x.is_contiguous() + is_contiguous(channels_last)",
        lambda: (xd.is_contiguous(), xd.is_contiguous(memory_format=torch.channels_last)), n, False)

    # ---- cProfile of the depthwise call --------------------------------------------------
    if not args.no_profile:
        print("\n[3] cProfile, 500 hk.conv2d depthwise calls (times inflated by the profiler)")
        for _ in range(5):
            hk.conv2d(xd, wd, padding=3, groups=128)
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(500):
            hk.conv2d(xd, wd, padding=3, groups=128)
        prof.disable()
        torch.cuda.synchronize()
        st = pstats.Stats(prof)
        per = lambda secs: secs * 1e6 / 500
        total = sum(v[2] for v in st.stats.values())  # tottime over every profiled frame
        # nanobind functions are not PyCFunctions, so cProfile gives _C.launch no entry of its own:
        # its C++ time lands in the tottime of its Python caller, hopperkit/_core.py:launch (whose
        # own bytecode is ~1 us). Python called back from C++ (torch's Tensor.__dlpack__) keeps
        # its own entries.
        c_ext = sum(v[2] for k, v in st.stats.items() if k[0].endswith("_core.py") and k[2] == "launch")
        dlp = sum(v[3] for k, v in st.stats.items() if k[2] == "__dlpack__")
        hk_py = sum(v[2] for k, v in st.stats.items() if "hopperkit" in k[0]) - c_ext
        torch_py = sum(v[2] for k, v in st.stats.items() if "torch" in k[0])
        builtins = sum(v[2] for k, v in st.stats.items() if k[0] == "~")
        print(f"  per call: profiled total {per(total):.1f} us = hopperkit Python frames {per(hk_py):.1f} + "
              f"C extension (_core.launch self) ~{per(c_ext):.1f} + torch Python frames {per(torch_py):.1f} "
              f"+ builtins/torch C methods {per(builtins):.1f} (+ other {per(total - hk_py - c_ext - torch_py - builtins):.1f});"
              f" Tensor.__dlpack__ cumulative {per(dlp):.1f}")
        for sort in ("tottime", "cumulative"):
            s = io.StringIO()
            pstats.Stats(prof, stream=s).sort_stats(sort).print_stats(28)
            print(f"  --- by {sort} ---")
            print("\n".join("  " + line for line in s.getvalue().splitlines()[6:40]))

    print(f"\ntotal runtime {time.perf_counter() - t_start:.1f} s")


if __name__ == "__main__":
    main()
