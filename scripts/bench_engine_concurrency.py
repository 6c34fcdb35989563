#!/usr/bin/env python3
"""Offline engine throughput against concurrency: `ember bench throughput` with --max-num-seqs C
for each concurrency level C (and optionally each expert weight format, quantized while loading),
the same synthetic workload of --prompts-per-slot * C requests (at least --min-prompts).

Useful for models no peer server can run (the Muse Spark checkpoints); for the GGUF models,
scripts/bench_vs_llamacpp_serve.py measures the same curve through both servers.

  .venv/bin/python scripts/make_muse_bench_model.py      # once: ~/.cache/ember/models/muse-spark-mid
  .venv/bin/python scripts/bench_engine_concurrency.py --name muse_mid \\
      --model ~/.cache/ember/models/muse-spark-mid --formats bf16 nvfp4 mxfp4 fp8

Writes bench/results/throughput_<name>.json (every run) and .md (a table per format).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def run(args: argparse.Namespace, fmt: str, conc: int) -> dict:
    prompts = max(args.min_prompts, args.prompts_per_slot * conc)
    cmd = [str(args.ember), "bench", "throughput", str(args.model), "--json", "--input-len", str(args.input_len),
           "--output-len", str(args.output_len), "--num-prompts", str(prompts), "--max-num-seqs", str(conc),
           "--threads", str(args.threads), "--max-model-len", str(args.input_len + args.output_len + 16)]
    if fmt != "bf16":
        cmd += ["--quantization", fmt]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result = json.loads(out)
    result.update({"format": fmt, "concurrency": conc, "load_average": os.getloadavg()[0]})
    print(f"[{fmt} c={conc}] {result['output_tokens_per_second']:.1f} out tok/s, "
          f"{result['total_tokens_per_second']:.1f} total tok/s, {result['elapsed_s']:.1f} s", flush=True)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", required=True)
    p.add_argument("--model", type=pathlib.Path, required=True)
    p.add_argument("--ember", type=pathlib.Path, default=ROOT / "build/release/tools/ember/ember")
    p.add_argument("--formats", nargs="+", default=["bf16"], choices=["bf16", "nvfp4", "mxfp4", "fp8"])
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=32)
    p.add_argument("--prompts-per-slot", type=int, default=1)
    p.add_argument("--min-prompts", type=int, default=4)
    p.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "bench/results")
    args = p.parse_args()

    start = time.time()
    runs = [run(args, fmt, c) for fmt in args.formats for c in args.concurrency]
    meta = {"model": str(args.model), "threads": args.threads, "input_len": args.input_len,
            "output_len": args.output_len, "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    base = args.out_dir / f"throughput_{args.name}"
    base.with_suffix(".json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    lines = ["| format | concurrency | requests | out tok/s | total tok/s | req/s | load avg |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        lines.append(f"| {r['format']} | {r['concurrency']} | {r['num_requests']} | {r['output_tokens_per_second']:.1f} | "
                     f"{r['total_tokens_per_second']:.1f} | {r['requests_per_second']:.2f} | {r['load_average']:.1f} |")
    base.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {base}.json and .md in {time.time() - start:.0f}s")


if __name__ == "__main__":
    main()
