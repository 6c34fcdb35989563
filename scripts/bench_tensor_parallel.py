#!/usr/bin/env python3
"""Tensor parallelism against one process on this machine: `ember bench throughput` for a prefill
case (4 prompts of 512 tokens, 1 output token each) and a decode case (1 request, 16-token prompt,
128 outputs), one process with all cores against --tensor-parallel-size N with the cores shared
among the ranks, `--rounds` alternating rounds each, plus rank 0's communication log line.

    .venv/bin/python scripts/bench_tensor_parallel.py --out bench/results/tp_s17
"""
import argparse
import json
import pathlib
import re
import statistics
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = pathlib.Path.home() / ".cache/ember/models"
MODELS = {
    "muse-spark-mid": (CACHE / "muse-spark-mid", 2),
    "gemma-3-270m Q4_K_M": (CACHE / "gemma-3-270m-q4_k_m.gguf", 2),
    "SmolLM2-135M BF16": (CACHE / "SmolLM2-135M-Instruct.BF16.gguf", 3),
}
CASES = {"prefill": ["--input-len", "512", "--output-len", "1", "--num-prompts", "4"],
         "decode": ["--input-len", "16", "--output-len", "128", "--num-prompts", "1"]}


def run(ember, model, case, tp):
    cmd = [str(ember), "bench", "throughput", str(model), *CASES[case], "--json", "--no-enable-prefix-caching"]
    cmd += ["--tensor-parallel-size", str(tp)] if tp > 1 else ["--threads", "2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout[proc.stdout.index("{"):])
    comm = re.search(r"r0 I [^\]]*\] communication: (\d+) collectives in the tensor group, ([\d.]+) s", proc.stderr)
    key = "input_tokens_per_second" if case == "prefill" else "output_tokens_per_second"
    return {"tokens_per_second": result[key], "elapsed_s": result["elapsed_s"], "steps": result["steps"],
            "collectives": int(comm.group(1)) if comm else 0, "comm_s": float(comm.group(2)) if comm else 0.0}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ember", default=ROOT / "build/release/tools/ember/ember")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=pathlib.Path)
    args = parser.parse_args()
    rows = []
    for name, (model, tp) in MODELS.items():
        if not model.exists():
            print(f"skip {name}: {model} missing")
            continue
        for case in CASES:
            runs = {1: [], tp: []}
            for _ in range(args.rounds):
                for size in (1, tp):
                    runs[size].append(run(args.ember, model, case, size))
            one = statistics.median(r["tokens_per_second"] for r in runs[1])
            many = statistics.median(r["tokens_per_second"] for r in runs[tp])
            last = runs[tp][-1]
            row = {"model": name, "case": case, "tp": tp, "one_process_tok_s": one, "tp_tok_s": many,
                   "ratio": many / one, "collectives": last["collectives"], "comm_s": last["comm_s"],
                   "elapsed_s": last["elapsed_s"], "steps": last["steps"], "runs": runs}
            rows.append(row)
            print(f"{name:22s} {case:8s} 1 process (2 threads) {one:8.1f} tok/s | tp {tp} {many:8.1f} tok/s "
                  f"({many / one:.2f}x) | rank 0: {last['collectives']} collectives, {last['comm_s']:.3f} s of "
                  f"{last['elapsed_s']:.2f} s", flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
