"""Charts from benchmark JSON: ``python -m hopperkit.plot results.json [more.json ...] -o DIR``.

Reads any ``hk bench --json`` document (``hk.bench()`` returns the same record): ``rows`` with op,
variant, problem, status, flops, bytes, median_us, tflops, tbps, speedup_vs_baseline, and the
``ceilings`` measured on the GPU (copy bandwidth, bf16 cuBLAS peak). Writes, as PNG and SVG:

* ``roofline``: every ok row at (arithmetic intensity, achieved TFLOP/s) under the measured
  ceilings, one colour per family, each point labelled with its rung number;
* ``ladder-<family>``: per family, each variant's achieved throughput (TB/s when the family is
  memory-bound, TFLOP/s otherwise, against the ceiling) and its speed in % of the baseline, one
  bar per problem; FAIL and SKIP rows are marked, not dropped;
* ``scaling-<family>-<config>``: when a sweep is present (one configuration benchmarked at three
  or more sizes), throughput against problem size, one line per variant.

Plots are drawn from JSON only, never from printed tables (docs/design.md §6). Needs matplotlib.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterable

# Problem-key fields that give a size ("16384x8192", "4097", "m4096"); the others (dtype,
# mode, ...) name a configuration. A sweep is one configuration at several sizes.
_SIZE_FIELD = re.compile(r"^(\d+(x\d+)*|[a-z]\d+)$")
_DTYPES = {"f32", "f16", "bf16", "e4m3", "e5m2", "i32", "u8", "i4"}


def load(paths: Iterable[str | Path]) -> dict:
    """Merges benchmark documents: all rows, the first document's environment and ceilings."""
    merged: dict[str, Any] = {}
    rows: list[dict] = []
    for path in paths:
        doc = json.loads(Path(path).read_text())
        if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
            raise ValueError(f"{path}: not a benchmark document (no 'rows' list)")
        for key, value in doc.items():
            if key != "rows" and key not in merged:
                merged[key] = value
        rows.extend(doc["rows"])
    merged["rows"] = rows
    return merged


def _ok(row: dict) -> bool:
    return row.get("status") == "ok" and row.get("median_us", 0) > 0


def _achieved_flops(row: dict) -> float:
    return row["flops"] / (row["median_us"] * 1e-6)


def _achieved_bytes(row: dict) -> float:
    return row["bytes"] / (row["median_us"] * 1e-6)


def _ceilings(doc: dict) -> tuple[float, float]:
    c = doc.get("ceilings") or {}
    return float(c.get("copy_bytes_per_s") or 0), float(c.get("bf16_flops_per_s") or 0)


def _rung(variant: str) -> str:
    return variant.split("_", 1)[0]


def _config(key: str) -> str:
    return "_".join(f for f in key.split("_") if f in _DTYPES or not _SIZE_FIELD.match(f)) or "all"


def _memory_bound(rows: list[dict], bw: float, peak: float) -> bool:
    """A family is memory-bound when its rows' median arithmetic intensity is below the ridge."""
    ai = sorted(r["flops"] / r["bytes"] for r in rows if r.get("bytes", 0) > 0 and r.get("flops", 0) > 0)
    if not ai:
        return True
    ridge = peak / bw if bw > 0 and peak > 0 else 10.0
    return ai[len(ai) // 2] < ridge


def _metric(memory_bound: bool) -> tuple[str, Any, str]:
    if memory_bound:
        return "achieved TB/s", lambda r: _achieved_bytes(r) / 1e12, "copy"
    return "achieved TFLOP/s", lambda r: _achieved_flops(r) / 1e12, "bf16"


def _save(fig: Any, out: Path, stem: str, written: list[Path]) -> None:
    for ext in ("png", "svg"):
        path = out / f"{stem}.{ext}"
        fig.savefig(path, dpi=150, bbox_inches="tight")
        written.append(path)


def _title(doc: dict, what: str) -> str:
    gpu = (doc.get("gpu") or {}).get("name")
    sha = doc.get("hopperkit_git_sha")
    extra = ", ".join(p for p in (f"hopperkit {sha}" if sha else None, doc.get("date")) if p)
    return (f"{what} — {gpu}" if gpu else what) + (f"\n{extra}" if extra else "")


def roofline(doc: dict, plt: Any, out: Path, written: list[Path]) -> None:
    rows = [r for r in doc["rows"] if _ok(r) and r.get("flops", 0) > 0 and r.get("bytes", 0) > 0]
    if not rows:
        return
    bw, peak = _ceilings(doc)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ai = [r["flops"] / r["bytes"] for r in rows]
    lo, hi = min(ai) / 4, max(ai) * 4
    if bw > 0 and peak > 0:
        lo, hi = min(lo, peak / bw / 8), max(hi, peak / bw * 8)
        xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.plot(xs, [min(peak, bw * x) / 1e12 for x in xs], color="black", lw=1.5)
        ax.annotate(f"copy {bw / 1e12:.2f} TB/s", (lo, bw * lo / 1e12), textcoords="offset points",
                    xytext=(4, 6), rotation=0, fontsize=8)
        ax.annotate(f"bf16 peak {peak / 1e12:.0f} TFLOP/s", (hi, peak / 1e12), textcoords="offset points",
                    xytext=(-4, 6), ha="right", fontsize=8)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    families = list(OrderedDict.fromkeys(r["op"] for r in rows))
    for i, fam in enumerate(families):
        mine = [r for r in rows if r["op"] == fam]
        xs = [r["flops"] / r["bytes"] for r in mine]
        ys = [_achieved_flops(r) / 1e12 for r in mine]
        ax.scatter(xs, ys, s=22, color=colors[i % len(colors)], label=fam, zorder=3)
        for r, x, y in zip(mine, xs, ys):
            ax.annotate(_rung(r["variant"]), (x, y), textcoords="offset points", xytext=(3, -8), fontsize=6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP / byte of minimum traffic)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="lower right")
    note = "" if bw > 0 and peak > 0 else " (no measured ceilings in the JSON)"
    ax.set_title(_title(doc, "Roofline" + note), fontsize=10)
    _save(fig, out, "roofline", written)
    plt.close(fig)


def ladder(doc: dict, family: str, plt: Any, out: Path, written: list[Path]) -> None:
    rows = [r for r in doc["rows"] if r.get("op") == family]
    variants = list(OrderedDict.fromkeys(r["variant"] for r in rows))
    problems = list(OrderedDict.fromkeys(r["problem"] for r in rows))
    bw, peak = _ceilings(doc)
    memory_bound = _memory_bound([r for r in rows if _ok(r)], bw, peak)
    label, value, ceiling_name = _metric(memory_bound)
    ceiling = (bw if memory_bound else peak) / 1e12
    width = 0.8 / max(1, len(problems))
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(max(6, 1.3 * len(variants) + 3), 7))
    by = {(r["variant"], r["problem"]): r for r in rows}
    cmap = plt.get_cmap("tab10" if len(problems) <= 10 else "tab20")
    tallest = 0.0
    for j, prob in enumerate(problems):
        xs, speed, pct = [], [], []
        for i, var in enumerate(variants):
            r = by.get((var, prob))
            x = i - 0.4 + width * (j + 0.5)
            if r is None:
                continue
            if not _ok(r):
                mark = str(r.get("status", "?")).split(":", 1)[0]
                for ax in (top, bottom):
                    ax.annotate(mark, (x, 0), xytext=(0, 3), textcoords="offset points", ha="center",
                                va="bottom", fontsize=6, rotation=90, color="crimson")
                continue
            xs.append(x)
            speed.append(value(r))
            pct.append(100.0 * r["speedup_vs_baseline"] if r.get("speedup_vs_baseline") else math.nan)
        color = cmap(j % cmap.N)
        top.bar(xs, speed, width, label=prob, color=color)
        bottom.bar(xs, pct, width, color=color)
        tallest = max([tallest] + speed)
    top.set_ylim(0, 1.15 * max(tallest, ceiling, 1e-9))
    if ceiling > 0:
        top.axhline(ceiling, color="black", ls="--", lw=1)
        top.annotate(f"{ceiling_name} ceiling {ceiling:.2f}", (len(variants) - 0.45, ceiling), ha="right",
                     va="bottom", fontsize=7)
    bottom.axhline(100, color="black", ls="--", lw=1)
    top.set_ylabel(label)
    bottom.set_ylabel("% of baseline speed")
    bottom.set_xlim(-0.6, len(variants) - 0.4)
    bottom.set_xticks(range(len(variants)))
    bottom.set_xticklabels(variants, rotation=20, ha="right", fontsize=8)
    top.legend(title="problem", fontsize=7, title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    for ax in (top, bottom):
        ax.grid(True, axis="y", alpha=0.25)
    top.set_title(_title(doc, f"{family} ladder"), fontsize=10)
    _save(fig, out, f"ladder-{family}", written)
    plt.close(fig)


def sweeps(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """(family, configuration) -> its ok rows, for configurations measured at three or more sizes."""
    groups: dict[tuple[str, str], list[dict]] = OrderedDict()
    for r in rows:
        if _ok(r) and r.get("bytes", 0) > 0:
            groups.setdefault((r["op"], _config(r["problem"])), []).append(r)
    return OrderedDict((k, v) for k, v in groups.items() if len({r["problem"] for r in v}) >= 3)


def scaling(doc: dict, plt: Any, out: Path, written: list[Path]) -> None:
    bw, peak = _ceilings(doc)
    for (family, config), rows in sweeps(doc["rows"]).items():
        memory_bound = _memory_bound(rows, bw, peak)
        label, value, ceiling_name = _metric(memory_bound)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for var in OrderedDict.fromkeys(r["variant"] for r in rows):
            mine = sorted((r for r in rows if r["variant"] == var), key=lambda r: r["bytes"])
            ax.plot([r["bytes"] for r in mine], [value(r) for r in mine], marker="o", ms=3, label=var)
        ceiling = (bw if memory_bound else peak) / 1e12
        if ceiling > 0:
            ax.axhline(ceiling, color="black", ls="--", lw=1, label=f"{ceiling_name} ceiling")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("problem size (bytes of minimum traffic)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=7)
        ax.set_title(_title(doc, f"{family} scaling, {config}"), fontsize=10)
        _save(fig, out, f"scaling-{family}-{config}", written)
        plt.close(fig)


def plot(doc: dict, out: str | Path) -> list[Path]:
    """Draws every chart for a loaded document (see ``load``) into ``out``; returns the files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    roofline(doc, plt, out, written)
    for family in OrderedDict.fromkeys(r["op"] for r in doc["rows"]):
        ladder(doc, family, plt, out, written)
    scaling(doc, plt, out, written)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hopperkit.plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("json", nargs="+", help="hk bench --json documents (rows are merged)")
    parser.add_argument("-o", "--out", required=True, help="output folder (created when missing)")
    args = parser.parse_args(argv)
    try:
        doc = load(args.json)
    except (OSError, ValueError) as e:
        print(f"hopperkit.plot: {e}", file=sys.stderr)
        return 1
    written = plot(doc, args.out)
    if not written:
        print("hopperkit.plot: no rows to plot", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
