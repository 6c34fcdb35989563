#!/usr/bin/env python3
"""Expert parallelism against one process and tensor parallelism on this machine: `ember bench
throughput` on the mid-size Muse Spark config at concurrency 1, 16 and 64 (that many requests at
once, 64-token prompts, 32 output tokens each), for one process with all cores, --tensor-parallel-size
2, TEP (tp 2 with --enable-expert-parallel) and, where this ember has it, DEP (--data-parallel-size 2
--enable-expert-parallel); `--rounds` alternating rounds each, plus rank 0's time in collectives.

    .venv/bin/python scripts/bench_expert_parallel.py --out bench/results/ep_s18
"""
import argparse
import json
import pathlib
import re
import statistics
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODEL = pathlib.Path.home() / ".cache/ember/models/muse-spark-mid"
SHAPES = {
    "one process": ["--threads", "2"],
    "tp 2": ["--tensor-parallel-size", "2"],
    "tep 2": ["--tensor-parallel-size", "2", "--enable-expert-parallel"],
    "dep 2": ["--data-parallel-size", "2", "--enable-expert-parallel"],
}
CONCURRENCY = [1, 16, 64]


def supported(ember, shape):
    help_text = subprocess.run([str(ember), "bench", "throughput", "--help"], capture_output=True, text=True).stdout
    return all(not flag.startswith("--") or flag in help_text for flag in SHAPES[shape])


def run(ember, shape, concurrency):
    cmd = [str(ember), "bench", "throughput", str(MODEL), "--input-len", "64", "--output-len", "32", "--num-prompts",
           str(concurrency), "--max-num-seqs", str(concurrency), "--json", "--no-enable-prefix-caching", *SHAPES[shape]]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    # Rank 0's exit lines, one per group it talks in (tensor group, and the expert group under DEP).
    comm = re.findall(r"r0 I [^\]]*\] communication: (\d+) collectives in the \w+ group, ([\d.]+) s", proc.stderr)
    return {"output_tok_s": result["output_tokens_per_second"], "elapsed_s": result["elapsed_s"],
            "steps": result["steps"], "collectives": sum(int(n) for n, _ in comm),
            "comm_s": sum(float(s) for _, s in comm)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ember", default=ROOT / "build/release/tools/ember/ember")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args()
    shapes = [s for s in SHAPES if supported(args.ember, s)]
    rows = []
    for concurrency in CONCURRENCY:
        runs = {s: [] for s in shapes}
        for _ in range(args.rounds):
            for shape in shapes:
                runs[shape].append(run(args.ember, shape, concurrency))
        one = statistics.median(r["output_tok_s"] for r in runs["one process"])
        for shape in shapes:
            last = runs[shape][-1]
            tok_s = statistics.median(r["output_tok_s"] for r in runs[shape])
            row = {"concurrency": concurrency, "shape": shape, "output_tok_s": tok_s, "vs_one_process": tok_s / one,
                   "collectives": last["collectives"], "comm_s": last["comm_s"], "steps": last["steps"],
                   "comm_ms_per_step": 1000 * last["comm_s"] / max(last["steps"], 1), "runs": runs[shape]}
            rows.append(row)
            print(f"c={concurrency:3d} {shape:12s} {tok_s:8.1f} output tok/s ({row['vs_one_process']:.2f}x one "
                  f"process), {last['collectives']} collectives, {row['comm_ms_per_step']:.2f} ms/step in them")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
