#!/usr/bin/env python3
"""Markdown ladder tables from `hk bench --json` files: one table per family (rows in bench
order), each row with the median time, the rate against the copy ceiling or the bf16 peak
measured in the same run, the speedup over the family baseline, and the peer figure from
../shared/baselines where one was measured for that problem.

Usage: scripts/ladder-tables.py BENCH.json|BENCH.err [...] [--family NAME ...]
A .err file is hk bench's stderr: the rows it streamed as they finished (what remains of a run
cut short before it wrote its JSON). The docs' ladder tables (docs/<family>.md) are this
script's output for one gpu-check run.
"""
import argparse
import json
import re
import sys

# Peer figures on the H200 (../shared/baselines/README.md, 2026-11-29), for the problem they
# were measured on: (family, problem key) -> [(peer, TB/s)]. Another run; the ratio is a guide.
PEERS = {
    ("gelu", "16384x8192_bf16_tanh_fwd"): [("F.gelu", 3.55), ("torch.compile", 3.38)],
    ("softmax", "16384x8192_bf16_fwd"): [("torch.softmax", 1.07), ("torch.compile", 1.74)],
    ("rmsnorm", "16384x8192_bf16_fwd"): [("F.rms_norm", 2.65), ("torch.compile", 4.18)],
    ("row_sum", "16384x8192_bf16"): [("x.sum(-1)", 2.53)],
    ("row_sum", "16384x8192_f32"): [("x.sum(-1)", 3.40)],
    ("weighted_sum", "16384x8192_bf16_fwd"): [("(w*x).sum(-1)", 0.63)],
}


ROW = re.compile(r"\| ([a-z_]+) \| ([a-z0-9_]+) \| ([^|]+) \|([^\n]*)")


def from_stderr(path):
    """hk bench's streamed markdown rows -> JSON-like rows (rates as printed, same run's ceilings)."""
    rows = []
    with open(path, errors="replace") as f:
        for line in f:
            for m in ROW.finditer(line):
                c = [x.strip() for x in m.group(4).split("|")]
                r = {"op": m.group(1), "variant": m.group(2), "problem": m.group(3).strip()}
                if not c[0][:1].isdigit():
                    r["status"] = c[0]
                elif len(c) < 7 or not all(x.replace(".", "", 1).isdigit() for x in c[:6]):
                    continue  # a row cut off mid-line (the process was killed while printing)
                else:
                    us, spread = float(c[0]), float(c[1])
                    r.update(status="ok", median_us=us, p25_us=us, p75_us=us * (1 + spread / 100),
                             tflops=float(c[2]), tbps=float(c[3]), _pct_copy=float(c[4]), _pct_peak=float(c[5]))
                    if c[6].endswith("x"):
                        r["speedup_vs_baseline"] = float(c[6][:-1])
                rows.append(r)
    return {"rows": rows}


def load(paths):
    rows, env = [], None
    for p in paths:
        if p.endswith(".json"):
            with open(p) as f:
                j = json.load(f)
        else:
            j = from_stderr(p)
        env = env or j
        for r in j["rows"]:
            r["_ceil"] = j.get("ceilings", {})
            rows.append(r)
    return rows, env


def fmt_row(r, gemm):
    ok = r["status"] == "ok"
    if not ok:
        return f"| `{r['variant']}` | {r['problem']} | {r['status']} | | | | |"
    us = r["median_us"]
    spread = 100.0 * (r["p75_us"] - r["p25_us"]) / us if us > 0 else 0.0
    ceil = r["_ceil"]
    if gemm:
        peak = ceil.get("bf16_flops_per_s", 0)
        rate = f"{r['tflops']:.0f} TFLOP/s"
        frac = f"{100.0 * r['flops'] / (us * 1e-6) / peak:.1f}" if peak else f"{r.get('_pct_peak', 0):.1f}"
    else:
        copy = ceil.get("copy_bytes_per_s", 0)
        rate = f"{r['tbps']:.2f} TB/s"
        frac = f"{100.0 * r['bytes'] / (us * 1e-6) / copy:.1f}" if copy else f"{r.get('_pct_copy', 0):.1f}"
    vs = f"{r['speedup_vs_baseline']:.2f}x" if "speedup_vs_baseline" in r else "n/a"
    peers = PEERS.get((r["op"], r["problem"]))
    peer = ", ".join(f"{name} {tb:.2f} TB/s ({r['tbps'] / tb:.2f}x)" for name, tb in peers) if peers else ""
    return f"| `{r['variant']}` | {r['problem']} | {us:.1f} ({spread:.1f}) | {rate} | {frac} | {vs} | {peer} |"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+")
    ap.add_argument("--family", action="append", default=[])
    args = ap.parse_args()
    rows, env = load(args.json)
    gpu = env.get("gpu", {})
    ceil = env.get("ceilings", {})
    if gpu:
        print(f"<!-- {gpu.get('name', '?')} {gpu.get('uuid', '')}, {env.get('date', '?')}, commit "
              f"{env.get('hopperkit_git_sha', '?')}; copy ceiling {ceil.get('copy_bytes_per_s', 0) / 1e12:.2f} TB/s, "
              f"bf16 peak {ceil.get('bf16_flops_per_s', 0) / 1e12:.0f} TFLOP/s -->")
    fams = []
    for r in rows:
        if r["op"] not in fams and (not args.family or r["op"] in args.family):
            fams.append(r["op"])
    for fam in fams:
        gemm = fam == "gemm"
        print(f"\n### {fam}\n")
        print(f"| variant | problem | median µs (IQR %) | rate | % of {'bf16 peak' if gemm else 'copy'} | vs baseline | peer (baselines run) |")
        print("|---|---|---:|---:|---:|---:|---|")
        for r in rows:
            if r["op"] == fam:
                print(fmt_row(r, gemm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
