#!/usr/bin/env python3
"""Regenerate the measured-results tables in the docs from committed `hk bench --json` files.

Reads every docs/results/*.json whose "kind" is "hk-bench" (the files `hk bench --json` and
scripts/gpu-check.sh write) and rewrites, in place:

  - each block  <!-- results:begin FAMILY[,FAMILY...] -->  ...  <!-- results:end -->  in
    docs/*.md: per family, a table of every rung and of the public op (the `public:<variant>`
    rows: what the family's dispatch chose) on every problem measured, with the median time,
    TB/s (memory-bound families) or TFLOP/s (gemm), the percentage of the copy bandwidth or of
    the bf16 peak measured in the same run, and the speedup over the family's baseline in the
    same run; headed by the GPU, driver, CUDA version, commit, date and the exact command;
  - the block  <!-- headline:begin -->  ...  <!-- headline:end -->  in README.md: the public
    op's rows of the quick suite (`hk bench` with no family), or of every file when no quick
    suite was committed.

Usage:
  scripts/results-tables.py                 rewrite the blocks from docs/results/*.json
  scripts/results-tables.py --check         exit 1 (and name the files) if a block is stale
  scripts/results-tables.py --print         print the tables instead of writing them
  scripts/results-tables.py --results DIR   read DIR/*.json instead (e.g. a gpu-check --out DIR)

To publish a run: scripts/gpu-check.sh --out DIR; cp DIR/bench-*.json docs/results/;
scripts/results-tables.py; commit docs/results, docs and README.md together.
"""
import argparse
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = re.compile(r"(<!-- results:begin ([a-z0-9_,]+) -->\n)(.*?)(<!-- results:end -->)", re.S)
HEADLINE = re.compile(r"(<!-- headline:begin -->\n)(.*?)(<!-- headline:end -->)", re.S)
NO_RESULTS = ("_No results committed yet — run `scripts/gpu-check.sh --out DIR`, copy "
              "`DIR/bench-*.json` to `docs/results/` and run `scripts/results-tables.py`._\n")
# Families whose rate is arithmetic (TFLOP/s against the bf16 peak); the rest are memory-bound
# (TB/s against the copy bandwidth).
COMPUTE_FAMILIES = {"gemm"}


def load(results_dir):
    runs = []
    for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        with open(path) as f:
            try:
                j = json.load(f)
            except json.JSONDecodeError as e:
                sys.exit(f"results-tables: {path}: not JSON ({e})")
        if j.get("kind") != "hk-bench" or not isinstance(j.get("rows"), list):
            continue  # hk microbench / hk profile output, or something else
        rel = os.path.relpath(path, ROOT)
        j["_path"] = rel if not rel.startswith("..") else os.path.basename(path)
        runs.append(j)
    return runs


def short_sha(sha):
    return (sha or "?")[:7]


def cuda_version(v):
    if not isinstance(v, int) or v <= 0:
        return str(v or "?")
    return f"{v // 1000}.{(v % 1000) // 10}"


def command_of(run):
    """The exact command, as gpu-check records it; else what the options and rows imply."""
    if run.get("command"):
        return run["command"]
    opts = run.get("options", {})
    if opts.get("quick"):
        cmd = "hk bench"
    else:
        fams = []
        for r in run["rows"]:
            if r["op"] not in fams:
                fams.append(r["op"])
        cmd = "hk bench " + " ".join(fams)
        if opts.get("variant"):
            cmd += f" --variant '{opts['variant']}'"
    if opts.get("warm_l2"):
        cmd += " --warm"
    return cmd + " (reconstructed: the JSON does not record its shapes, dtypes or budget)"


def environment(run):
    gpu = run.get("gpu", {})
    ceil = run.get("ceilings", {})
    uuid = gpu.get("uuid", "")
    driver = run.get("driver") or f"driver API {cuda_version(run.get('driver_version'))}"
    date = run.get("date", "?").replace("T", " ").replace("Z", " UTC")
    parts = [f"**{gpu.get('name', 'unknown GPU')}**" + (f" ({uuid[:12]})" if uuid else ""),
             f"driver {driver}" if run.get("driver") else driver,
             f"CUDA {cuda_version(run.get('cuda_runtime_version'))}",
             f"commit `{short_sha(run.get('hopperkit_git_sha'))}`", date]
    line = ", ".join(parts)
    line += (f"; copy bandwidth {ceil.get('copy_bytes_per_s', 0) / 1e12:.2f} TB/s, bf16 peak "
             f"{ceil.get('bf16_flops_per_s', 0) / 1e12:.0f} TFLOP/s (measured ceilings)")
    line += "; L2 warm" if run.get("options", {}).get("warm_l2") else "; L2 flushed before every sample"
    if run.get("stopped"):
        line += "; **the run was stopped early: rows are missing**"
    return line + ".\n"


def rate(r, run, compute):
    """(rate text, % of the ceiling text) for an ok row."""
    ceil = run.get("ceilings", {})
    s = r["median_us"] * 1e-6
    if compute:
        peak = ceil.get("bf16_flops_per_s", 0)
        return f"{r['flops'] / s / 1e12:.0f}", (f"{100 * r['flops'] / s / peak:.1f}" if peak else "—")
    copy = ceil.get("copy_bytes_per_s", 0)
    return f"{r['bytes'] / s / 1e12:.2f}", (f"{100 * r['bytes'] / s / copy:.1f}" if copy else "—")


def variant_cell(v):
    if v.startswith("public:"):
        return f"**public** → `{v.split(':', 1)[1]}`"
    if v == "public":
        return "**public**"
    return f"`{v}`"


def baseline_name(rows):
    for r in rows:
        if r.get("baseline"):
            return r["variant"]
    return None


def family_table(fam, run):
    rows = [r for r in run["rows"] if r["op"] == fam]
    compute = fam in COMPUTE_FAMILIES
    base = baseline_name(rows)
    unit, ceil = ("TFLOP/s", "% of bf16 peak") if compute else ("TB/s", "% of copy")
    vs = f"vs `{base}`" if base else "vs baseline"
    out = [f"| rung | problem | median µs | spread % | {unit} | {ceil} | {vs} |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r["status"] != "ok":
            out.append(f"| {variant_cell(r['variant'])} | {r['problem']} | {r['status']} | | | | |")
            continue
        us = r["median_us"]
        spread = 100 * (r.get("p75_us", us) - r.get("p25_us", us)) / us if us > 0 else 0
        rt, pct = rate(r, run, compute)
        sp = f"{r['speedup_vs_baseline']:.2f}x" if r.get("speedup_vs_baseline") else "—"
        out.append(f"| {variant_cell(r['variant'])} | {r['problem']} | {us:.1f} | {spread:.1f} | {rt} | {pct} | {sp} |")
    return "\n".join(out) + "\n"


def runs_for(fam, runs):
    """The runs to show for a family: its ladder runs; the quick suite only when there is none."""
    have = [r for r in runs if any(x["op"] == fam for x in r["rows"])]
    ladders = [r for r in have if not r.get("options", {}).get("quick")]
    return ladders or have


def results_block(fams, runs):
    parts = []
    for fam in fams:
        fam_runs = runs_for(fam, runs)
        if len(fams) > 1:
            parts.append(f"#### {fam}\n")
        if not fam_runs:
            parts.append(f"_No committed run measured {fam}._\n")
            continue
        for run in fam_runs:
            parts.append(environment(run))
            parts.append(f"Command: `{command_of(run)}` (`{run['_path']}`).\n")
            parts.append(family_table(fam, run))
    if not any(runs_for(f, runs) for f in fams):
        return NO_RESULTS
    return "_Generated by `scripts/results-tables.py` from `docs/results/`; edit the JSON, not this table._\n\n" + "\n".join(parts)


def headline_block(runs):
    quick = [r for r in runs if r.get("options", {}).get("quick")]
    src = quick or runs
    if not src:
        return NO_RESULTS
    # One row per (op, problem): the public op's row, from the latest run that has one.
    best = {}
    order = []
    for run in sorted(src, key=lambda r: r.get("date", "")):
        for r in run["rows"]:
            if not r["variant"].startswith("public"):
                continue
            k = (r["op"], r["problem"])
            if k not in best:
                order.append(k)
            base = next((x for x in run["rows"] if x["op"] == r["op"] and x["problem"] == r["problem"]
                         and x.get("baseline")), None)
            best[k] = (r, run, base)
    if not best:
        return "_The committed runs have no public-op rows (`public:<variant>`)._\n"
    used = []
    lines = ["| op | problem | public op runs | median µs | rate | % of ceiling | vs baseline |",
             "|---|---|---|---:|---:|---:|---|"]
    for k in order:
        r, run, base = best[k]
        if run not in used:
            used.append(run)
        if r["status"] != "ok":
            lines.append(f"| {r['op']} | {r['problem']} | {variant_cell(r['variant'])} | {r['status']} | | | |")
            continue
        compute = r["op"] in COMPUTE_FAMILIES
        rt, pct = rate(r, run, compute)
        unit, ceil = ("TFLOP/s", "bf16 peak") if compute else ("TB/s", "copy")
        chosen = r["variant"].split(":", 1)[-1]
        if r.get("speedup_vs_baseline") and base:
            vs = f"{r['speedup_vs_baseline']:.2f}x `{base['variant']}`"
        else:
            vs = "—"
        lines.append(f"| {r['op']} | {r['problem']} | `{chosen}` | {r['median_us']:.1f} | {rt} {unit} | "
                     f"{pct}% of {ceil} | {vs} |")
    head = ["_Generated by `scripts/results-tables.py` from `docs/results/`._\n"]
    for run in used:
        head.append(environment(run).rstrip("\n") + f" Command: `{command_of(run)}`.\n")
    return "\n".join(head) + "\n" + "\n".join(lines) + "\n"


def rewrite(text, runs):
    text = BLOCK.sub(lambda m: m.group(1) + results_block(m.group(2).split(","), runs) + m.group(4), text)
    return HEADLINE.sub(lambda m: m.group(1) + headline_block(runs) + m.group(3), text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--results", default=os.path.join(ROOT, "docs", "results"),
                    help="directory of hk bench JSON files (default docs/results)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a block is stale")
    ap.add_argument("--print", action="store_true", help="print each rewritten block to stdout")
    ap.add_argument("files", nargs="*", help="documents to rewrite (default docs/*.md and README.md)")
    args = ap.parse_args()
    runs = load(args.results)
    files = args.files or sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT, "README.md")]
    stale = []
    for path in files:
        with open(path) as f:
            old = f.read()
        new = rewrite(old, runs)
        if args.print:
            for m in list(BLOCK.finditer(new)) + list(HEADLINE.finditer(new)):
                print(f"== {os.path.relpath(path, ROOT)}\n{m.group(0)}\n")
        if new != old:
            stale.append(os.path.relpath(path, ROOT))
            if not args.check and not args.print:
                with open(path, "w") as f:
                    f.write(new)
    if args.check and stale:
        print("results-tables: stale results blocks in " + ", ".join(stale), file=sys.stderr)
        return 1
    if not args.check and not args.print:
        print(f"results-tables: {len(runs)} run(s) from {args.results}; "
              f"rewrote {len(stale)} file(s)" + (": " + ", ".join(stale) if stale else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
