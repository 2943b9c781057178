"""Numerics over a training run: the small language model trained with hopperkit's kernels against
its plain-PyTorch twin.

``python -m hopperkit.train_check [--size small] [--steps 200] [--seeds 3] [--ours-seeds 1]
[--batch 8 --seq 256] [--json PATH]`` trains ``hopperkit.reference_model.ReferenceLM`` from
``--seeds`` initialisations (seed 0, 1, ...) and ``hk.nn.TransformerLM`` from the first
``--ours-seeds`` of them, all on the same batches of a synthetic language, with AdamW in bf16,
and compares the loss curves in windows of ``--window`` steps. At a window, hopperkit's run from
seed k deviates from the reference's run from seed k by some amount; the reference's
seed-to-seed spread at seed k is the largest distance of another seed's mean loss from seed k's.
hopperkit passes a window where its deviation is within that spread (averaged over k): the paired
runs differ by the kernels' rounding only, so a kernel that were wrong would show as a curve
further off than a change of initialisation moves it.

The language: each token has four possible successors, drawn once from the vocabulary; a
sequence starts at a random token and picks one of its token's successors at each step. The best
achievable loss is ln 4 = 1.386; a model starts at about ln(vocab).

Before training, both bf16 models' first-step gradients are compared with the reference model's
in f32 from the same weights, per parameter: relative error and scale (a scale below 1 is a
gradient systematically too small, the kind of bias that slows training while every kernel stays
inside its error bound).

The JSON document (kind "hk-train-check") holds the configuration, every step's loss of each run,
the windows' means, spreads and deviations, the gradient comparison and the verdict.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import math
import platform
import sys
from typing import Any

try:
    import torch
except ImportError:  # the module imports without torch; main() says it needs it
    torch = None  # type: ignore[assignment]

SUCCESSORS = 4


def _language(vocab: int, seed: int) -> Any:
    """The successor table [vocab, 4] (host memory: the batches are drawn on the host)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (vocab, SUCCESSORS), generator=g)


def batch(table: Any, step: int, batch_size: int, seq: int, seed: int, device: Any = "cpu") -> tuple:
    """(tokens, targets) [batch, seq] int64 of step `step` on `device`: the same for every run."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    vocab = table.shape[0]
    toks = torch.empty(batch_size, seq + 1, dtype=torch.long)
    toks[:, 0] = torch.randint(0, vocab, (batch_size,), generator=g)
    choice = torch.randint(0, SUCCESSORS, (batch_size, seq), generator=g)
    for t in range(seq):
        toks[:, t + 1] = table[toks[:, t], choice[:, t]]
    toks = toks.to(device)
    return toks[:, :-1], toks[:, 1:]


def train(model: Any, data: list, lr: float, progress: str = "") -> list[float]:
    """Loss of each step of AdamW on `data` (a list of (tokens, targets))."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    losses = []
    for i, (tokens, targets) in enumerate(data):
        opt.zero_grad(set_to_none=True)
        _, loss = model(tokens, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if progress and (i + 1) % 50 == 0:
            print(f"[{progress}] step {i + 1}: loss {losses[-1]:.4f}", file=sys.stderr, flush=True)
    return losses


def _grads(model: Any, tokens: Any, targets: Any) -> tuple[float, dict]:
    """One forward + backward: the loss and each parameter's gradient in f32."""
    model.zero_grad(set_to_none=True)
    _, loss = model(tokens, targets)
    loss.backward()
    return float(loss.detach()), {n: p.grad.detach().float() for n, p in model.named_parameters()
                                  if p.grad is not None}


def grad_check(ours: Any, ref: Any, tokens: Any, targets: Any) -> dict:
    """The first step's gradients of hopperkit's bf16 model and the reference's bf16 model, both
    against the reference model in f32 from the same weights (the truth), per parameter kind
    (``blocks.<i>.`` folded: the blocks' sums): relative error |g - g32| / |g32|, and scale
    <g, g32> / |g32|^2, 1 for a gradient of the right size; below 1 a gradient systematically
    too small, which slows training while each kernel stays inside its error bound."""
    ref32 = copy.deepcopy(ref).float()
    loss32, g32 = _grads(ref32, tokens, targets)
    loss_o, go = _grads(ours, tokens, targets)
    loss_r, gr = _grads(ref, tokens, targets)
    del ref32
    kinds: dict[str, dict[str, float]] = {}
    for name, t in g32.items():
        kind = ".".join(name.split(".")[2:]) if name.startswith("blocks.") else name
        acc = kinds.setdefault(kind, {"t2": 0.0, "eo2": 0.0, "er2": 0.0, "po": 0.0, "pr": 0.0})
        acc["t2"] += float((t * t).sum())
        for key, g in (("o", go[name]), ("r", gr[name])):
            acc[f"e{key}2"] += float(((g - t) ** 2).sum())
            acc[f"p{key}"] += float((g * t).sum())
    rows = []
    for kind, a in kinds.items():
        t2 = a["t2"] or 1e-30
        rows.append({"param": kind, "hopperkit_rel_err": math.sqrt(a["eo2"] / t2),
                     "torch_rel_err": math.sqrt(a["er2"] / t2), "hopperkit_scale": a["po"] / t2,
                     "torch_scale": a["pr"] / t2})
    return {"loss_f32": loss32, "loss_hopperkit": loss_o, "loss_torch": loss_r, "params": rows}


def windows(losses: list[float], width: int) -> list[float]:
    return [sum(losses[i:i + width]) / len(losses[i:i + width]) for i in range(0, len(losses), width)]


def compare(ours: list[float] | list[list[float]], refs: list[list[float]], width: int) -> dict:
    """Windowed means. hopperkit's run k started from reference seed k's initialisation; per
    window, its deviation is |hopperkit_k - reference_k| and the reference's spread at seed k the
    largest |reference_s - reference_k| over the other seeds; with several hopperkit runs both
    are averaged over k. A window is inside when the deviation is at most the spread. ``ours``:
    one run (seed 0) or a list of runs (seeds 0, 1, ...)."""
    runs = ours if ours and isinstance(ours[0], list) else [ours]
    ow = [windows(r, width) for r in runs]
    rw = [windows(r, width) for r in refs]
    n = len(ow[0])
    dev = [sum(abs(ow[k][i] - rw[k][i]) for k in range(len(ow))) / len(ow) for i in range(n)]
    spread = [sum(max((abs(rw[s][i] - rw[k][i]) for s in range(len(rw)) if s != k), default=0.0)
                  for k in range(len(ow))) / len(ow) for i in range(n)]
    inside = [d <= s for d, s in zip(dev, spread)]
    frac = sum(inside) / len(inside) if inside else 0.0
    mean_ours = [sum(r[i] for r in ow) / len(ow) for i in range(n)]
    return {"ours": mean_ours, "ours_runs": ow, "reference": rw, "spread": spread, "deviation": dev,
            "inside": inside, "fraction_inside": frac, "final_inside": bool(inside[-1]) if inside else False}


def run(cfg: argparse.Namespace, progress: bool = True) -> dict:
    import hopperkit as hk
    from . import reference_model as ref
    from .block_bench import SIZES, init_weights

    if not 1 <= cfg.ours_seeds <= cfg.seeds or cfg.seeds < 2:
        raise ValueError(f"train_check: needs --seeds >= 2 and 1 <= --ours-seeds <= --seeds, got {cfg.seeds} "
                         f"and {cfg.ours_seeds}")
    dim, layers, heads = SIZES[cfg.size] if cfg.size else (cfg.dim, cfg.layers, cfg.heads)
    ffn = 4 * dim
    dev = torch.device(cfg.device)
    table = _language(cfg.vocab, 1234)
    data = [batch(table, i, cfg.batch, cfg.seq, cfg.data_seed, dev) for i in range(cfg.steps)]
    common = dict(device=dev, dtype=torch.bfloat16)
    refs = []
    states = []  # the initial weights of the seeds hopperkit also starts from
    for seed in range(cfg.seeds):
        model = ref.ReferenceLM(cfg.vocab, dim, layers, heads, heads, ffn, **common)
        init_weights(model, seed)
        if seed < cfg.ours_seeds:
            states.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        refs.append(train(model, data, cfg.lr, f"torch seed {seed}" if progress else ""))
        del model
    ours = []
    grads = None
    for seed in range(cfg.ours_seeds):
        ours_model = hk.nn.TransformerLM(cfg.vocab, dim, layers, heads, heads, ffn, **common)
        ours_model.load_state_dict(states[seed])
        if seed == 0:  # the first step's gradients, both bf16 models against the f32 reference
            ref0 = ref.ReferenceLM(cfg.vocab, dim, layers, heads, heads, ffn, **common)
            ref0.load_state_dict(states[0])
            grads = grad_check(ours_model, ref0, *data[0])
            del ref0
        ours.append(train(ours_model, data, cfg.lr, f"hopperkit seed {seed}" if progress else ""))
        del ours_model
    cmp = compare(ours, refs, cfg.window)
    ok = cmp["fraction_inside"] >= cfg.pass_fraction and cmp["final_inside"]
    from . import _C
    from .bench import command_line

    config = {k: getattr(cfg, k) for k in ("size", "vocab", "steps", "seeds", "ours_seeds", "batch", "seq", "lr",
                                           "window", "data_seed", "pass_fraction")}
    config.update(dim=dim, layers=layers, heads=heads, ffn=ffn)
    return {"kind": "hk-train-check", "hopperkit_git_sha": _C.git_sha, "torch": torch.__version__,
            "python": platform.python_version(),
            "gpu": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": command_line("python -m hopperkit.train_check", sys.argv[1:]),
            "config": config, "losses": {"hopperkit": ours[0], "hopperkit_runs": ours, "torch": refs},
            "windows": cmp, "grad_check": grads,
            "best_possible_loss": math.log(SUCCESSORS), "status": "ok" if ok else "FAIL: outside the seed spread"}


def markdown(doc: dict) -> str:
    w = doc["windows"]
    width = doc["config"]["window"]
    runs = len(w["ours_runs"])
    paired = [sum(r[i] for r in w["reference"][:runs]) / runs for i in range(len(w["ours"]))]
    what = "seed 0" if runs == 1 else f"mean of seeds 0-{runs - 1}"
    out = [f"| steps | hopperkit ({what}) | torch ({what}) | deviation | seed spread | inside |",
           "|---|---:|---:|---:|---:|---|"]
    for i, (o, r0, d, s, ins) in enumerate(zip(w["ours"], paired, w["deviation"], w["spread"], w["inside"])):
        out.append(f"| {i * width + 1}-{(i + 1) * width} | {o:.4f} | {r0:.4f} | {d:.4f} | {s:.4f} | "
                   f"{'yes' if ins else 'no'} |")
    out.append("")
    out.append(f"{100 * w['fraction_inside']:.0f}% of the windows inside the spread; status: {doc['status']}")
    g = doc.get("grad_check")
    if g:
        out += ["", f"First step's gradients against the f32 reference model (loss {g['loss_f32']:.4f}; bf16: "
                    f"hopperkit {g['loss_hopperkit']:.4f}, torch {g['loss_torch']:.4f}):", "",
                "| parameter | hopperkit rel. err | torch rel. err | hopperkit scale | torch scale |",
                "|---|---:|---:|---:|---:|"]
        out += [f"| `{r['param']}` | {r['hopperkit_rel_err']:.4f} | {r['torch_rel_err']:.4f} | "
                f"{r['hopperkit_scale']:.4f} | {r['torch_scale']:.4f} |" for r in g["params"]]
    return "\n".join(out) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from .block_bench import SIZES

    ap = argparse.ArgumentParser(prog="python -m hopperkit.train_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=[*sorted(SIZES), "none"], default="small",
                    help="one of the course's model sizes, or none for --dim / --layers / --heads")
    ap.add_argument("--dim", type=int, default=768, help="with --size none")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=10000)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=3, help="reference runs (initialisations)")
    ap.add_argument("--ours-seeds", type=int, default=1,
                    help="hopperkit runs, from the first N of the reference's initialisations (deviations and "
                         "spreads averaged over them)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--window", type=int, default=10, help="steps per compared window")
    ap.add_argument("--data-seed", type=int, default=7)
    ap.add_argument("--pass-fraction", type=float, default=0.9,
                    help="the share of windows that must lie inside the spread (the last always)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", help="write the JSON document here")
    cfg = ap.parse_args(argv)
    if cfg.size == "none":
        cfg.size = None
    return cfg


def main(argv: list[str] | None = None) -> int:
    if torch is None:
        print("hopperkit.train_check needs torch", file=sys.stderr)
        return 2
    cfg = parse_args(argv)
    doc = run(cfg)
    from .bench import emit

    emit(doc, markdown(doc), cfg.json)
    return 0 if doc["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
