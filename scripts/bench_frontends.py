#!/usr/bin/env python3
"""Same-run A/B of two `ember serve` front ends (e.g. main's build vs a branch's): for every
concurrency level each build is started fresh on loopback with the same engine options, and one
client (`ember bench serve` of --client, the same for both) sends the same deterministic load.
The builds alternate (OLD first in even repeats, NEW first in odd ones); the best repeat of each
is compared (the one least disturbed by other load on the machine).

Usage:
  .venv/bin/python scripts/bench_frontends.py --old /work/main/build/release/tools/ember/ember \\
      --new build/release/tools/ember/ember --concurrency 1 16 64 --repeats 2

Writes bench/results/<name>.json (every run) and <name>.md (the table with NEW/OLD ratios).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from bench_servers import free_port, stop, wait_ready  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = pathlib.Path(os.environ.get("EMBER_CACHE", pathlib.Path.home() / ".cache/ember"))


def run_one(binary: pathlib.Path, label: str, args: argparse.Namespace, conc: int, repeat: int,
            log_dir: pathlib.Path) -> dict:
    port = free_port()
    log = open(log_dir / f"{label}_c{conc}_r{repeat}.log", "w")
    proc = subprocess.Popen([str(binary), "serve", str(args.model), "--port", str(port), "--threads",
                             str(args.threads), "--max-num-seqs", str(conc), "--max-model-len", str(args.ctx),
                             "--served-model-name", "model"], stdout=log, stderr=subprocess.STDOUT)
    out_json = log_dir / f"{label}_c{conc}_r{repeat}.json"
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, proc)
        n = max(args.min_prompts, args.prompts_per_slot * conc)
        subprocess.run([str(args.client), "bench", "serve", "--base-url", url, "--model", "model", "--label", label,
                        "--dataset", "random", "--input-len", str(args.input_len), "--output-len",
                        str(args.output_len), "--num-prompts", str(n), "--concurrency", str(conc), "--seed",
                        str(args.seed), "--result-json", str(out_json)], check=True, stdout=subprocess.DEVNULL)
        with open(out_json) as f:
            level = json.load(f)["levels"][0]
    finally:
        stop(proc)
        log.close()
    level["repeat"] = repeat
    return level


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--old", type=pathlib.Path, required=True)
    p.add_argument("--new", type=pathlib.Path, required=True)
    p.add_argument("--client", type=pathlib.Path, default=None, help="the ember whose bench serve runs (default --new)")
    p.add_argument("--name", default="frontend_beast_vs_httplib_smollm2")
    p.add_argument("--model", type=pathlib.Path, default=CACHE / "models/SmolLM2-135M-Instruct.Q4_1.gguf")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--prompts-per-slot", type=int, default=2)
    p.add_argument("--min-prompts", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "bench/results")
    args = p.parse_args()
    args.client = args.client or args.new
    builds = {"old": args.old, "new": args.new}
    runs: dict[str, dict[int, list[dict]]] = {"old": {}, "new": {}}
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = pathlib.Path(tmp)
        for conc in args.concurrency:
            for repeat in range(args.repeats):
                order = ["old", "new"] if repeat % 2 == 0 else ["new", "old"]
                for label in order:
                    level = run_one(builds[label], label, args, conc, repeat, log_dir)
                    runs[label].setdefault(conc, []).append(level)
                    print(f"c={conc} r={repeat} {label}: {level['output_throughput']:.1f} out tok/s, "
                          f"TTFT med {level['ttft_ms']['median']:.1f} ms, failed {level['failed']}", flush=True)
    rows = ["| conc | old out tok/s | new out tok/s | new/old | old TTFT med (ms) | new TTFT med (ms) | "
            "old TPOT med (ms) | new TPOT med (ms) | failed (old/new) |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    summary = {}
    for conc in args.concurrency:
        o = max(runs["old"][conc], key=lambda s: s["output_throughput"])
        n = max(runs["new"][conc], key=lambda s: s["output_throughput"])
        ratio = n["output_throughput"] / o["output_throughput"]
        summary[conc] = ratio
        rows.append(f"| {conc} | {o['output_throughput']:.1f} | {n['output_throughput']:.1f} | {ratio:.3f} | "
                    f"{o['ttft_ms']['median']:.1f} | {n['ttft_ms']['median']:.1f} | {o['tpot_ms']['median']:.2f} | "
                    f"{n['tpot_ms']['median']:.2f} | {sum(r['failed'] for r in runs['old'][conc])}/"
                    f"{sum(r['failed'] for r in runs['new'][conc])} |")
    cpu = platform.processor() or "unknown"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    meta = {"old": str(args.old), "new": str(args.new), "client": str(args.client), "cpu": cpu,
            "nproc": os.cpu_count(), "threads": args.threads, "repeats": args.repeats, "input_len": args.input_len,
            "output_len": args.output_len, "ratio_new_over_old_best": summary}
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with open(args.out_dir / f"{args.name}.json", "w") as f:
        json.dump({"meta": meta, "runs": runs}, f, indent=1)
    table = "\n".join(rows)
    with open(args.out_dir / f"{args.name}.md", "w") as f:
        f.write(f"# `ember serve` front ends, same run: {args.new} (new) vs {args.old} (old)\n\n"
                f"SmolLM2-135M Q4_1, {args.threads} threads, random {args.input_len}-token prompts, "
                f"{args.output_len}-token outputs, best of {args.repeats} alternating repeats, one client "
                f"({args.client}). CPU: {cpu} ({os.cpu_count()} cores).\n\n{table}\n")
    print(table)


if __name__ == "__main__":
    main()
