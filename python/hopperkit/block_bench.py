"""The decoder block and the language model, hopperkit against plain PyTorch.

``python -m hopperkit.block_bench [--size small|medium|large|xl|2.7b | --dim 2048 --heads 16
--kv-heads 4 ...] [--seq 2048 --batch 8 ...] [--json PATH]`` builds ``hk.nn.TransformerBlock``
and ``hk.nn.TransformerLM`` and their twins from ``hopperkit.reference_model`` (the same parameters: one state dict loaded into both), checks
the outputs agree, then times forward (under ``torch.no_grad``) and forward + backward of each,
eager, ``torch.compile`` and the step captured as one CUDA graph (``*.graph``: no host time per
kernel), all candidates interleaved in one process (``bench.time_interleaved``:
sample r of every candidate before sample r + 1 of any, the L2 swept and a spin kernel queued
before each sample). Then a ``torch.profiler`` pass per model and per direction lists the kernels
by device time: which kernels dominate the forward and the backward of each. ``--models swiglu
rope`` times the block's two element-wise ops alone at its shapes (``hk.swiglu`` on the gate/up
output, ``hk.rope`` on the q heads of the QKV output) against their PyTorch formulas.

The JSON document (kind "hk-block-bench") holds the configuration, one row per (model, pass,
candidate) with ``median_us``, ``tokens_per_s`` and ``speedup_vs_torch`` (eager PyTorch is the
baseline), and under ``profile`` the kernel tables and the device time by sub-layer (forward: the
ranges of ``hk.nn.sublayer_ranges``) and by autograd node (backward).
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
from typing import Any, Callable

try:
    import torch
except ImportError:  # the module imports without torch; main() says it needs it
    torch = None  # type: ignore[assignment]


# The benchmarking lecture's model sizes: name -> (d_model, layers, heads); d_ff = 4 d_model.
SIZES = {"small": (768, 12, 12), "medium": (1024, 24, 16), "large": (1280, 36, 20), "xl": (1600, 48, 25),
         "2.7b": (2560, 32, 32)}


def _median(v: list[float]) -> float:
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _op_modules(cfg: argparse.Namespace, which: str):
    """The block's own element-wise ops alone, at its shapes, as (hopperkit, PyTorch) modules:
    "swiglu" on the gate/up output [B, S, 2F], "rope" on the q heads of the QKV output."""
    import hopperkit as hk
    from . import reference_model as ref
    from .nn import _block_dims

    hq, _, dh, _ = _block_dims(cfg.dim, cfg.heads, cfg.kv_heads, cfg.ffn, None)

    class Op(torch.nn.Module):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def forward(self, x):
            return self.fn(x)

    if which == "swiglu":
        def eager(x):
            f = x.shape[-1] // 2
            return torch.nn.functional.silu(x[..., :f]) * x[..., f:]

        return Op(hk.swiglu), Op(eager)
    cos, sin = hk.rope_tables(cfg.seq, dh, cfg.theta, device=cfg.device)
    return (Op(lambda qkv: hk.rope(qkv[:, :, :hq], cos, sin)),
            Op(lambda qkv: ref.apply_rope(qkv[:, :, :hq], cos, sin)))


def init_weights(model: Any, seed: int) -> None:
    """The benchmarks' initialisation, the same on every device: N(0, 0.02) for the embedding,
    N(0, 1 / fan_in) for every matrix (the residual stream's scale stays near 1 through the
    layers); vectors (the norms' weights) keep theirs."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 2:
                std = 0.02 if name.startswith("embed") else p.shape[1] ** -0.5
                p.copy_((torch.randn(p.shape, generator=g) * std).to(p.dtype))


def _models(cfg: argparse.Namespace, which: str):
    """(hopperkit model, reference model) for "block", "lm", or one of the ops ("swiglu", "rope")."""
    import hopperkit as hk
    from . import reference_model as ref

    if which in ("swiglu", "rope"):
        return _op_modules(cfg, which)
    torch.manual_seed(0)
    common = dict(head_dim=None, rotary_dim=None, rope_theta=cfg.theta, device=cfg.device, dtype=torch.bfloat16)
    if which == "block":
        ours = hk.nn.TransformerBlock(cfg.dim, cfg.heads, cfg.kv_heads, cfg.ffn, fuse_residual=cfg.fuse_residual,
                                      **common)
        theirs = ref.ReferenceBlock(cfg.dim, cfg.heads, cfg.kv_heads, cfg.ffn, **common)
    elif which == "block_naive":
        ours = None
        theirs = ref.ReferenceBlock(cfg.dim, cfg.heads, cfg.kv_heads, cfg.ffn, attention="naive", **common)
    else:
        ours = hk.nn.TransformerLM(cfg.vocab, cfg.dim, cfg.layers, cfg.heads, cfg.kv_heads, cfg.ffn,
                                   fuse_residual=cfg.fuse_residual, **common)
        theirs = ref.ReferenceLM(cfg.vocab, cfg.dim, cfg.layers, cfg.heads, cfg.kv_heads, cfg.ffn, **common)
    init_weights(ours if ours is not None else theirs, 0)
    if ours is not None:
        theirs.load_state_dict(ours.state_dict())
    return ours, theirs


def _inputs(cfg: argparse.Namespace, which: str) -> dict:
    g = torch.Generator(device=cfg.device).manual_seed(1)
    if which in ("swiglu", "rope"):
        from .nn import _block_dims

        hq, hkv, dh, ffn = _block_dims(cfg.dim, cfg.heads, cfg.kv_heads, cfg.ffn, None)
        shape = (cfg.batch, cfg.seq, 2 * ffn) if which == "swiglu" else (cfg.batch, cfg.seq, hq + 2 * hkv, dh)
        out = (cfg.batch, cfg.seq, ffn) if which == "swiglu" else (cfg.batch, cfg.seq, hq, dh)
        x = torch.randn(shape, device=cfg.device, dtype=torch.bfloat16, generator=g)
        return {"x": x, "dy": torch.randn(out, device=cfg.device, dtype=torch.bfloat16, generator=g)}
    if which == "block":
        x = torch.randn(cfg.batch, cfg.seq, cfg.dim, device=cfg.device, dtype=torch.bfloat16, generator=g)
        return {"x": x, "dy": torch.randn_like(x)}
    tokens = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq), device=cfg.device, generator=g)
    targets = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq), device=cfg.device, generator=g)
    return {"tokens": tokens, "targets": targets}


def _steps(model: Any, which: str, inp: dict) -> tuple[Callable, Callable]:
    """(forward under no_grad, forward + backward) closures for one model."""
    if which != "lm":
        x, dy = inp["x"], inp["dy"]
        xg = x.detach().requires_grad_(True)

        def fwd():
            with torch.no_grad():
                return model(x)

        def fwd_bwd():
            if list(model.parameters()):
                model.zero_grad(set_to_none=True)
            xg.grad = None
            y = model(xg)
            y.backward(dy)
            return y
    else:
        tokens, targets = inp["tokens"], inp["targets"]

        def fwd():
            with torch.no_grad():
                return model(tokens)

        def fwd_bwd():
            model.zero_grad(set_to_none=True)
            _, loss = model(tokens, targets)
            loss.backward()
            return loss
    return fwd, fwd_bwd


def _graphed(fn: Callable) -> Callable:
    """``fn`` captured as one CUDA graph; returns its replay. One warm-up call on a side stream
    first (autograd's lazy state, torch.cuda.graph's rule); gradients are set to None before the
    capture, so the backward's gradient buffers are the graph's own."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def _agreement(ours: Any, theirs: Any, which: str, inp: dict) -> dict:
    """How far hopperkit's output is from the reference's: ||a - b|| / ||b|| over the whole
    output (the block: over its update, the output less the input it adds to), and the largest
    |a - b|. Two bf16 pipelines differ by rounding: ~1e-2 expected, 5e-2 is a failure."""
    with torch.no_grad():
        if which == "block":
            x = inp["x"]
            a, b = (ours(x) - x).float(), (theirs(x) - x).float()
        elif which == "lm":
            a, b = ours(inp["tokens"]).float(), theirs(inp["tokens"]).float()
        else:
            a, b = ours(inp["x"]).float(), theirs(inp["x"]).float()
    rel = ((a - b).norm() / b.norm().clamp_min(1e-30)).item()
    err = (a - b).abs().max().item()
    return {"rel_err": rel, "max_abs_err": err, "status": "ok" if rel < 5e-2 else f"FAIL: rel err {rel:.3g}"}


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


_RANGE_PREFIX = "hk.block."
_NODE_PREFIX = "autograd::engine::evaluate_function: "


def _kernels(prof: Any):
    """The device kernels of a profile (user annotations' device-side spans, such as the
    sub-layer ranges', left out)."""
    for e in prof.events():
        if (getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA
                and not getattr(e, "is_user_annotation", False) and not e.name.startswith(_RANGE_PREFIX)):
            yield e


def _summed(pairs: Any) -> list[tuple[str, float, int, float]]:
    """(name, µs) pairs summed by name: (name, µs, calls, share of the total), longest first."""
    totals: dict[str, list[float]] = {}
    for name, us in pairs:
        t = totals.setdefault(name, [0.0, 0])
        t[0] += us
        t[1] += 1
    all_us = sum(v[0] for v in totals.values()) or 1.0
    return [(k, v[0], v[1], v[0] / all_us) for k, v in sorted(totals.items(), key=lambda kv: -kv[1][0])]


def _kernel_table(prof: Any, top: int) -> list[dict]:
    """The device kernels of a profile, summed by name, longest first."""
    rows = _summed((e.name, e.time_range.elapsed_us()) for e in _kernels(prof))[:top]
    return [{"kernel": k, "device_us": us, "calls": n, "share": sh} for k, us, n, sh in rows]


def _kernel_us(prof: Any) -> float:
    """The device time of every kernel in a profile (the sum of the whole kernel table)."""
    return sum(e.time_range.elapsed_us() for e in _kernels(prof))


def _range_table(prof: Any, prefix: str, cuda: bool) -> list[dict]:
    """The host ranges whose names start with ``prefix`` (the block's sub-layers in the forward,
    autograd's nodes in the backward), summed by name: the device time of the kernels launched
    inside each, or with ``cuda`` False (a model on the CPU) its host time; longest first."""
    def pairs():
        for e in prof.events():
            if getattr(e, "device_type", None) != torch.autograd.DeviceType.CPU or not e.name.startswith(prefix):
                continue
            name = e.name[len(prefix):]
            # a custom op's autograd node: GeneratedBackwardFor_hopperkit_matmul_defaultBackward
            if name.startswith("GeneratedBackwardFor_hopperkit_") and name.endswith("_defaultBackward"):
                name = "hopperkit::" + name[len("GeneratedBackwardFor_hopperkit_"):-len("_defaultBackward")]
            yield name, e.device_time_total if cuda else e.cpu_time_total

    return [{"range": k, "us": us, "calls": n, "share": sh} for k, us, n, sh in _summed(pairs())]


def _profile(model: Any, which: str, inp: dict, iters: int, top: int) -> dict:
    """Kernel tables of the forward (under ``torch.no_grad``, as the timed forward) and of the
    backward alone, where the time goes by sub-layer (forward, ``hk.nn.sublayer_ranges``) and by
    autograd node (backward), and the kernel time per training step (the forward that saves
    for the backward, then the backward) to set beside the measured step."""
    from torch.profiler import ProfilerActivity, profile

    from .nn import sublayer_ranges

    fwd, _ = _steps(model, which, inp)
    out = {}
    cuda = any(t.is_cuda for t in inp.values() if isinstance(t, torch.Tensor))
    # Host ranges attribute the kernels to sub-layers; a CPU-only run (the tests) records host
    # ops alone, and its kernel tables are empty.
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with sublayer_ranges():
        with profile(activities=activities) as prof:
            for _ in range(iters):
                fwd()
            _sync()
        out["forward"] = _kernel_table(prof, top)
        out["forward_sublayers"] = _range_table(prof, _RANGE_PREFIX, cuda)
        losses = []
        with profile(activities=activities) as prof:
            for _ in range(iters):
                if list(model.parameters()):
                    model.zero_grad(set_to_none=True)
                if which != "lm":
                    x = inp["x"].detach().requires_grad_(True)
                    losses.append((model(x), inp["dy"]))
                else:
                    losses.append((model(inp["tokens"], inp["targets"])[1], None))
            _sync()
        out["kernel_us_per_step"] = {"forward": _kernel_us(prof) / iters}
    with profile(activities=activities) as prof:
        for y, dy in losses:
            y.backward(dy)
        _sync()
    out["backward"] = _kernel_table(prof, top)
    out["backward_nodes"] = _range_table(prof, _NODE_PREFIX, cuda)
    out["kernel_us_per_step"]["backward"] = _kernel_us(prof) / iters
    return out


def run(cfg: argparse.Namespace, progress: bool = True) -> dict:
    from .bench import _flush_buffer, _spin_cycles, time_interleaved

    if torch is None or not torch.cuda.is_available():
        raise RuntimeError("hopperkit.block_bench needs torch with a CUDA device")
    cfg.device = "cuda"
    rows: list[dict] = []
    profiles: dict = {}
    flush = _flush_buffer()
    spin = _spin_cycles()
    tokens = cfg.batch * cfg.seq
    for which in cfg.models:
        if progress:
            print(f"[{which}] building and checking", file=sys.stderr, flush=True)
        ours, theirs = _models(cfg, which)
        inp = _inputs(cfg, which)
        check = _agreement(ours, theirs, which, inp)
        checks: dict[str, dict] = {}
        cands: dict[str, Any] = {"hopperkit": ours, "torch": theirs}
        if cfg.naive and which == "block":
            # the lecture's starting point: the same block with the scores materialised
            naive = _models(cfg, "block_naive")[1]
            naive.load_state_dict(ours.state_dict())
            cands["torch.naive"] = naive
            checks["torch.naive"] = _agreement(ours, naive, which, inp)
        if cfg.compile:
            cands["hopperkit.compile"] = torch.compile(ours)
            cands["torch.compile"] = torch.compile(theirs)
        if cfg.graph:
            cands["hopperkit.graph"] = ours
            cands["torch.graph"] = theirs
        for pass_name, idx in (("fwd", 0), ("fwd_bwd", 1)):
            names, fns = [], []
            peaks: dict[str, float] = {}  # MiB allocated above what the step found, at its peak
            for name, m in cands.items():
                fn = _steps(m, which, inp)[idx]
                try:
                    if name.endswith(".graph"):
                        fn = _graphed(fn)
                    fn()  # compiles outside the timed region; warms up
                    _sync()
                    base_mem = torch.cuda.memory_allocated()
                    torch.cuda.reset_peak_memory_stats()
                    fn()
                    _sync()
                    # a captured step allocates nothing when replayed: its memory is the graph's pool
                    if not name.endswith(".graph"):
                        peaks[name] = (torch.cuda.max_memory_allocated() - base_mem) / 2**20
                except Exception as e:  # noqa: BLE001 - a candidate that cannot run is reported
                    rows.append({"model": which, "pass": pass_name, "candidate": name,
                                 "status": f"SKIP: {type(e).__name__}: {e}"})
                    continue
                names.append(name)
                fns.append(fn)
            if progress:
                print(f"[{which}] timing {pass_name}: {', '.join(names)}", file=sys.stderr, flush=True)
            gpu, host = time_interleaved(fns, cfg.samples, flush, spin)
            med = {n: _median(t) for n, t in zip(names, gpu)}
            base = med.get("torch", 0.0)
            for n, t, h in zip(names, gpu, host):
                us = med[n]
                rows.append({"model": which, "pass": pass_name, "candidate": n,
                             "status": checks.get(n, check)["status"],
                             "median_us": us, "min_us": min(t), "host_us": _median(h), "samples": cfg.samples,
                             "peak_mib": peaks.get(n),
                             "tokens_per_s": tokens / (us * 1e-6) if us > 0 else 0.0,
                             "speedup_vs_torch": base / us if us > 0 and base > 0 else 0.0})
        if cfg.profile:
            if progress:
                print(f"[{which}] profiling", file=sys.stderr, flush=True)
            profiles[which] = {"check": check,
                               "hopperkit": _profile(ours, which, inp, cfg.profile_iters, cfg.top),
                               "torch": _profile(theirs, which, inp, cfg.profile_iters, cfg.top)}
        else:
            profiles[which] = {"check": check}
        del ours, theirs, cands, inp
        torch.cuda.empty_cache()
    from . import _C
    from .bench import command_line

    config = {k: getattr(cfg, k) for k in ("dim", "heads", "kv_heads", "ffn", "seq", "batch", "layers", "vocab",
                                           "theta", "samples", "compile", "graph", "naive", "fuse_residual", "models",
                                           "size")}
    return {"kind": "hk-block-bench", "hopperkit_git_sha": _C.git_sha, "torch": torch.__version__,
            "python": platform.python_version(), "gpu": torch.cuda.get_device_name(0),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": command_line("python -m hopperkit.block_bench", sys.argv[1:]),
            "config": config, "rows": rows, "profile": profiles}


def markdown(doc: dict) -> str:
    """The timing table, then per model and direction the top kernels of each side."""
    out = ["| model | pass | candidate | median µs | tokens/s | vs torch eager | peak MiB | status |",
           "|---|---|---|---:|---:|---:|---:|---|"]
    for r in doc["rows"]:
        if "median_us" not in r:
            out.append(f"| {r['model']} | {r['pass']} | {r['candidate']} | | | | | {r['status']} |")
            continue
        peak = f"{r['peak_mib']:.0f}" if r.get("peak_mib") is not None else ""
        out.append(f"| {r['model']} | {r['pass']} | {r['candidate']} | {r['median_us']:.1f} | "
                   f"{r['tokens_per_s']:.3g} | {r['speedup_vs_torch']:.2f}x | {peak} | {r['status']} |")
    for model, prof in doc.get("profile", {}).items():
        for side in ("hopperkit", "torch"):
            for direction in ("forward", "backward"):
                table = prof.get(side, {}).get(direction)
                if table:
                    out += ["", f"**{model}, {side}, {direction}**: kernels by device time", "",
                            "| kernel | device µs | calls | share |", "|---|---:|---:|---:|"]
                    for k in table:
                        name = k["kernel"] if len(k["kernel"]) <= 90 else k["kernel"][:87] + "..."
                        out.append(f"| `{name}` | {k['device_us']:.1f} | {k['calls']} | {100 * k['share']:.1f}% |")
                key, what = ("forward_sublayers", "sub-layer") if direction == "forward" else \
                    ("backward_nodes", "autograd node")
                ranges = prof.get(side, {}).get(key)
                if ranges:
                    # a model on the CPU has no kernels: its ranges hold host time
                    unit = "device µs" if table else "host µs"
                    out += ["", f"**{model}, {side}, {direction}**: time by {what}", "",
                            f"| {what} | {unit} | calls | share |", "|---|---:|---:|---:|"]
                    out += [f"| `{r['range']}` | {r['us']:.1f} | {r['calls']} | {100 * r['share']:.1f}% |"
                            for r in ranges]
    return "\n".join(out) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The benchmark's configuration; ``device`` (not a flag) is where the models are built: the
    timing needs CUDA, the helpers also build and step the models on the CPU (tests)."""
    ap = argparse.ArgumentParser(prog="python -m hopperkit.block_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), help="one of the course's model sizes: sets --dim, --heads, "
                    "--kv-heads (= heads), --ffn (4 dim) and --layers")
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=None, help="FFN width F (default: Llama's 8 dim / 3, to 256)")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--layers", type=int, default=4, help="blocks of the LM")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--theta", type=float, default=10000.0)
    ap.add_argument("--models", nargs="+", choices=["block", "lm", "swiglu", "rope"], default=["block", "lm"],
                    help="what to time: the block, the LM, or one of the block's ops alone at its shapes")
    ap.add_argument("--samples", type=int, default=10, help="timed samples per candidate")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="leave torch.compile out")
    ap.add_argument("--no-naive", dest="naive", action="store_false",
                    help="leave out torch.naive (the PyTorch block with materialised attention scores)")
    ap.add_argument("--no-graph", dest="graph", action="store_false",
                    help="leave out the steps captured as CUDA graphs (hopperkit.graph, torch.graph)")
    ap.add_argument("--no-fuse-residual", dest="fuse_residual", action="store_false",
                    help="hopperkit's residual adds as separate torch adds instead of in the GEMM epilogues")
    ap.add_argument("--no-profile", dest="profile", action="store_false", help="skip the torch.profiler tables")
    ap.add_argument("--profile-iters", type=int, default=2)
    ap.add_argument("--top", type=int, default=12, help="kernels per profile table")
    ap.add_argument("--json", help="write the JSON document here")
    cfg = ap.parse_args(argv)
    if cfg.size:
        cfg.dim, cfg.layers, cfg.heads = SIZES[cfg.size]
        cfg.kv_heads, cfg.ffn = cfg.heads, 4 * cfg.dim
    cfg.device = "cuda"
    return cfg


def main(argv: list[str] | None = None) -> int:
    cfg = parse_args(argv)
    doc = run(cfg)
    from .bench import emit

    emit(doc, markdown(doc), cfg.json)
    failed = [r for r in doc["rows"] if str(r.get("status", "")).startswith("FAIL")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
