#!/usr/bin/env python3
"""One call each of a hopperkit public op and of the PyTorch calls a user would otherwise write,
inside a profiler range, for Nsight Compute to compare kernel against kernel.

Each row is one case of ``python -m hopperkit.bench`` (same shapes, dtypes, layouts and calls; its
helpers build the compiled peers and the backwards): hopperkit's op, then ``torch.compile`` of the
PyTorch expression, and eager PyTorch where that is a cuBLAS call (``x @ w``, ``x @ w.t()``,
``F.linear``) or when ``--eager`` asks for it on every row. The default rows are those where the
benchmark has hopperkit behind its fastest peer; ``--list`` prints them, ``--row NAME``
(repeatable) picks some:

  ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \\
      --section LaunchStats --section WarpStateStats --section SchedulerStats \\
      --nvtx --profile-from-start off -o ncu-peers \\
      python3 scripts/ncu-public-vs-peers.py --row rms_norm_bf16

The GEMM rows (matmul_*, linear_*) want the tensor pipes too:

  ncu --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \\
      --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \\
      --nvtx --profile-from-start off -o ncu-peers-gemm \\
      python3 scripts/ncu-public-vs-peers.py --row matmul_4096x4096x4096_bf16

``ncu --import ncu-peers.ncu-rep --print-summary per-kernel`` (or ``--page details``) reads the
report back. Every call runs twice before the range (compilation, module load, autograd's graph);
inside it each runs once, in the order the script prints to stderr, and under its own NVTX range
``<row>:<candidate>`` (shown per kernel with ``--nvtx``). ncu flushes the caches before every
kernel it profiles and, by default, locks the clocks at base: read its durations as ratios
between the candidates of a row, not as the benchmark's microseconds.
"""
import argparse
import functools
import sys

import torch
import torch.nn.functional as F

import hopperkit as hk
# The benchmark's own helpers, so that each row is the case it times: `_compile` compiles a fresh
# copy of the lambda with dynamic=False (each row its own graph, static shapes), `_autograd` is
# the backward alone through autograd, `_rope_torch` the rotate_half formula rope is timed against.
from hopperkit.bench import _autograd, _compile, _rope_torch

ROWS = {}  # name -> (what it compares, eager is cuBLAS, build() -> (hopperkit, eager, compiled))


def _add(name, what, build, cublas=False):
    ROWS[name] = (what, cublas, build)


def randn(*shape, dt=torch.bfloat16):
    return torch.randn(*shape, device="cuda", dtype=dt)


def _backward(ours_fwd, torch_fwd, inputs, dy):
    """A backward row, as bench.py poses it: autograd through hopperkit's op against autograd
    through the PyTorch expression, eager and compiled. The forward runs at the first call (a
    warm-up here) and its graph is kept, so the profiled call is the graph's backward alone: the
    forward kernels are not in the report. Every input's gradient is computed."""
    return (_autograd(ours_fwd, inputs, dy), _autograd(torch_fwd, inputs, dy),
            _autograd(_compile(torch_fwd), inputs, dy))


def rms_norm(dt):
    x, w = randn(16384, 8192, dt=dt), randn(8192, dt=dt)
    f = lambda x=x, w=w: F.rms_norm(x, (x.shape[-1],), w, 1e-6)
    return lambda: hk.rms_norm(x, w, 1e-6), f, _compile(f)


def rms_norm_backward(dt):
    x, w, dy = randn(16384, 8192, dt=dt), randn(8192, dt=dt), randn(16384, 8192, dt=dt)
    return _backward(hk.rms_norm, lambda x, w: F.rms_norm(x, (x.shape[-1],), w, 1e-6), (x, w), dy)


def softmax_backward(dt):
    x, dy = randn(16384, 8192, dt=dt), randn(16384, 8192, dt=dt)
    return _backward(hk.softmax, lambda x: torch.softmax(x, -1), (x,), dy)


def weighted_sum(dt):
    x, w = randn(16384, 8192, dt=dt), randn(8192, dt=dt)
    f = lambda x=x, w=w: x @ w
    return lambda: hk.weighted_sum(x, w), f, _compile(f)


def swiglu(dt):
    rows, ff = 16384, 8192  # x [rows, 2F] = [gate | up], y [rows, F]
    x = randn(rows, 2 * ff, dt=dt)
    f = lambda x=x, ff=ff: F.silu(x[..., :ff]) * x[..., ff:]
    return lambda: hk.swiglu(x), f, _compile(f)


def rope(dt):
    # [B, S, H, D] contiguous; hk.rope takes f32 [S, D/2] tables, the formula [S, 1, D] ones.
    bsz, seq, heads, hd = 8, 2048, 16, 128
    cos, sin = hk.rope_tables(seq, hd, device="cuda")
    cos_full, sin_full = torch.cat([cos, cos], -1)[:, None], torch.cat([sin, sin], -1)[:, None]
    x = randn(bsz, seq, heads, hd, dt=dt)
    f = lambda x=x: _rope_torch(x, cos_full, sin_full)
    return lambda: hk.rope(x, cos, sin), f, _compile(f)


def outer(op, dt):
    a, b = randn(4, dt=dt), randn(1 << 26, dt=dt)  # out [4, 2^26]
    if op == "outer_add":
        f = lambda a=a, b=b: a[:, None] + b[None, :]
    else:
        f = lambda a=a, b=b: torch.relu(torch.outer(a, b))
    ours = getattr(hk, op)
    return lambda: ours(a, b), f, _compile(f)


def matmul(m, n, k, dt):
    # The Linear layout: x [M, K] times W^T for W [N, K] (a column-major view, read as it is).
    x, w = randn(m, k, dt=dt), randn(n, k, dt=dt)
    f = lambda x=x, w=w: x @ w.t()
    return lambda: hk.matmul(x, w.t()), f, _compile(f)


def linear(m, n, k, dt):
    x, w, bias = randn(m, k, dt=dt), randn(n, k, dt=dt), randn(n, dt=dt)
    f = lambda x=x, w=w, bias=bias: F.linear(x, w, bias)
    return lambda: hk.linear(x, w, bias), f, _compile(f)


BF16, F32 = torch.bfloat16, torch.float32
for _dn, _dt in (("bf16", BF16), ("f32", F32)):
    _add(f"rms_norm_{_dn}", f"hk.rms_norm vs F.rms_norm, 16384x8192 {_dn}", functools.partial(rms_norm, _dt))
_add("rms_norm_backward_bf16", "autograd through hk.rms_norm vs through F.rms_norm (dx, dw), 16384x8192 bf16",
     functools.partial(rms_norm_backward, BF16))
_add("weighted_sum_bf16", "hk.weighted_sum vs x @ w, 16384x8192 bf16", functools.partial(weighted_sum, BF16),
     cublas=True)
_add("swiglu_bf16", "hk.swiglu vs F.silu(g) * u, x 16384x16384 = [g | u] bf16", functools.partial(swiglu, BF16))
_add("softmax_backward_bf16", "autograd through hk.softmax vs through torch.softmax, 16384x8192 bf16",
     functools.partial(softmax_backward, BF16))
for _dn, _dt in (("f32", F32), ("bf16", BF16)):
    _add(f"rope_{_dn}", f"hk.rope vs rotate_half on f32 tables, [8, 2048, 16, 128] {_dn}",
         functools.partial(rope, _dt))
for _op, _expr in (("outer_add", "a[:, None] + b[None, :]"), ("outer_mul_relu", "relu(outer(a, b))")):
    _add(f"{_op}_bf16", f"hk.{_op} vs {_expr}, 4 x 2^26 bf16", functools.partial(outer, _op, BF16))
for _m, _n, _k in ((4096, 4096, 4096), (4096, 14336, 4096), (8192, 8192, 1024)):
    _add(f"matmul_{_m}x{_n}x{_k}_bf16", f"hk.matmul(x, w.t()) vs x @ w.t(), MxNxK {_m}x{_n}x{_k} bf16",
         functools.partial(matmul, _m, _n, _k, BF16), cublas=True)
_add("linear_16x8192x8192_bf16", "hk.linear vs F.linear with a bias, MxNxK 16x8192x8192 bf16",
     functools.partial(linear, 16, 8192, 8192, BF16), cublas=True)


def _note(name):
    if "backward" in name:
        return ("  each a backward through autograd (the forward ran in the warm-up); Inductor may split it "
                "into several kernels, and autograd may add a small fill for a gradient no one reads")
    if name.startswith(("matmul", "linear", "weighted_sum")):
        return "  torch.compile may call the same cuBLAS kernel as eager (Inductor without max-autotune)"
    return ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--row", action="append", choices=list(ROWS), metavar="NAME",
                    help="profile this row (repeatable); default: every row (--list names them)")
    ap.add_argument("--list", action="store_true", help="print the rows and exit")
    ap.add_argument("--eager", action="store_true",
                    help="eager PyTorch on every row, not only where it is a cuBLAS call")
    args = ap.parse_args(argv)
    if args.list:
        for name, (what, cublas, _) in ROWS.items():
            print(f"{name:28s} {what}{' (+ eager, cuBLAS)' if cublas else ''}")
        return 0
    if not torch.cuda.is_available():
        print("ncu-public-vs-peers: needs torch with a CUDA device", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    calls = []  # (row, candidate, fn) in the order they are profiled
    for name in dict.fromkeys(args.row or ROWS):
        what, cublas, build = ROWS[name]
        ours, eager, compiled = build()
        cands = [("hopperkit", ours)] + ([("torch", eager)] if cublas or args.eager else [])
        cands.append(("torch.compile", compiled))
        for cand, fn in cands:
            fn()  # compiles, loads modules, builds the backward's graph
            fn()
            calls.append((name, cand, fn))
    torch.cuda.synchronize()
    print("kernels in the profiled range, in order (NVTX range <row>:<candidate>):", file=sys.stderr)
    for name in dict.fromkeys(c[0] for c in calls):
        print(f"row {name}: {', '.join(c[1] for c in calls if c[0] == name)}", file=sys.stderr)
        if _note(name):
            print(_note(name), file=sys.stderr)
    sys.stderr.flush()
    torch.cuda.cudart().cudaProfilerStart()
    for name, cand, fn in calls:
        with torch.cuda.nvtx.range(f"{name}:{cand}"):
            fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
