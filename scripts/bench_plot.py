#!/usr/bin/env python3
"""Plots `ember bench serve` results: throughput and latency against concurrency.

  .venv/bin/python scripts/bench_plot.py ember.json llama.json -o serve.png

Each input is one `ember bench serve --result-json` file (or a file with a "runs"
list of them, as scripts/bench_vs_llamacpp_serve.py writes); every run becomes
one line per panel, labelled with its "label".
"""
from __future__ import annotations

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_runs(runs: list[dict], path: str, title: str = "") -> None:
    panels = [
        ("Output throughput (tok/s)", lambda s: s["output_throughput"], None),
        ("TTFT (ms)", lambda s: s["ttft_ms"]["median"], lambda s: s["ttft_ms"]["p99"]),
        ("ITL (ms)", lambda s: s["itl_ms"]["median"], lambda s: s["itl_ms"]["p99"]),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(15, 4.2))
    for ax, (name, med, p99) in zip(axes, panels):
        for i, run in enumerate(runs):
            levels = [s for s in run["levels"] if "concurrency" in s]
            xs = [s["concurrency"] for s in levels]
            color = f"C{i}"
            ax.plot(xs, [med(s) for s in levels], "o-", color=color,
                    label=run["label"] + (" median" if p99 else ""))
            if p99:
                ax.plot(xs, [p99(s) for s in levels], "x--", color=color, alpha=0.6, label=run["label"] + " p99")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_title(name)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--title", default="")
    args = p.parse_args()
    runs = []
    for path in args.results:
        with open(path) as f:
            data = json.load(f)
        runs.extend(data["runs"] if "runs" in data else [data])
    plot_runs(runs, args.output, args.title)


if __name__ == "__main__":
    main()
