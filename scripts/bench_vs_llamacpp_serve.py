#!/usr/bin/env python3
"""Serving head-to-head: `ember serve` vs llama.cpp's llama-server, one client, same load.

For every concurrency level C each server is started fresh on loopback with C
parallel sequences and the same thread count (llama-server `-np C -c C*ctx
--threads T`, ember `--max-num-seqs C --max-model-len ctx --threads T`), then
`ember bench serve` sends the same deterministic dataset at concurrency C.
The servers alternate (ember first in even repeats, llama.cpp first in odd
ones) so a slow phase of a shared machine does not always hit the same one.

  scripts/build_llama_server.sh          # once: builds llama-server into ~/.cache/ember
  ninja -C build/release ember
  .venv/bin/python scripts/bench_vs_llamacpp_serve.py            # the full suite
  .venv/bin/python scripts/bench_vs_llamacpp_serve.py --concurrency 1 4 --repeats 1

Writes bench/results/serve_<name>.json (every run), serve_<name>.md (the table
with ember/llama.cpp ratios, best of the repeats) and docs/images/serve_<name>.png.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = pathlib.Path(os.environ.get("EMBER_CACHE", pathlib.Path.home() / ".cache/ember"))
sys.path.insert(0, str(ROOT / "scripts"))
from bench_plot import plot_runs  # noqa: E402
from bench_servers import free_port, stop, wait_ready  # noqa: E402


def server_command(kind: str, args: argparse.Namespace, conc: int, port: int) -> list[str]:
    variants = dict(args.ember_variant)
    if kind == "ember" or kind in variants:
        return [str(args.ember), "serve", str(args.model), "--port", str(port), "--threads", str(args.threads),
                "--max-num-seqs", str(conc), "--max-model-len", str(args.ctx), "--served-model-name", "model",
                *args.ember_arg, *variants.get(kind, "").split()]
    return [str(args.llama_server), "-m", str(args.model), "--host", "127.0.0.1", "--port", str(port),
            "--threads", str(args.threads), "--threads-batch", str(args.threads), "-np", str(conc),
            "-c", str(conc * args.ctx), "--alias", "model", "--no-warmup"]


def run_one(kind: str, args: argparse.Namespace, conc: int, repeat: int, log_dir: pathlib.Path) -> dict:
    port = free_port()
    log = open(log_dir / f"{kind}_c{conc}_r{repeat}.log", "w")
    proc = subprocess.Popen(server_command(kind, args, conc, port), stdout=log, stderr=subprocess.STDOUT)
    out_json = log_dir / f"{kind}_c{conc}_r{repeat}.json"
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, proc)
        n = max(args.min_prompts, args.prompts_per_slot * conc)
        cmd = [str(args.ember), "bench", "serve", "--base-url", url, "--model", "model",
               "--label", kind, "--dataset", args.dataset, "--input-len", str(args.input_len),
               "--output-len", str(args.output_len), "--num-prompts", str(n), "--concurrency", str(conc),
               "--seed", str(args.seed), "--goodput", *args.goodput, "--result-json", str(out_json),
               *(["--dataset-path", str(args.dataset_path)] if args.dataset_path else []),
               *(["--long-input-len", str(args.long_input_len), "--long-fraction", str(args.long_fraction)]
                 if args.dataset == "mixed" else [])]
        subprocess.run(cmd, check=False)
        with open(out_json) as f:
            level = json.load(f)["levels"][0]
    finally:
        stop(proc)
        log.close()
    level["repeat"] = repeat
    return level


def best(levels: list[dict]) -> dict:
    # The fastest repeat is the one least disturbed by other load on the machine.
    return max(levels, key=lambda s: s["output_throughput"])


def markdown(results: dict[str, dict[int, list[dict]]], concs: list[int]) -> str:
    embers = [k for k in results if k != "llama.cpp"]
    rows = ["| conc | server | req/s | out tok/s | TTFT med (ms) | TTFT p99 (ms) | TPOT med (ms) | ITL med (ms) "
            "| ITL p99 (ms) | goodput req/s |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in concs:
        b = {k: best(results[k][c]) for k in results}
        for k, s in b.items():
            rows.append(f"| {c} | {k} | {s['request_throughput']:.2f} | {s['output_throughput']:.1f} "
                        f"| {s['ttft_ms']['median']:.1f} | {s['ttft_ms']['p99']:.1f} | {s['tpot_ms']['median']:.2f} "
                        f"| {s['itl_ms']['median']:.2f} | {s['itl_ms']['p99']:.2f} | {s['request_goodput']:.2f} |")
        l = b["llama.cpp"]
        for k in embers:
            e = b[k]
            rows.append(f"| {c} | **{k}/llama.cpp** | {e['request_throughput'] / l['request_throughput']:.2f}x "
                        f"| {e['output_throughput'] / l['output_throughput']:.2f}x "
                        f"| {e['ttft_ms']['median'] / l['ttft_ms']['median']:.2f}x "
                        f"| {e['ttft_ms']['p99'] / l['ttft_ms']['p99']:.2f}x "
                        f"| {e['tpot_ms']['median'] / l['tpot_ms']['median']:.2f}x "
                        f"| {e['itl_ms']['median'] / l['itl_ms']['median']:.2f}x "
                        f"| {e['itl_ms']['p99'] / l['itl_ms']['p99']:.2f}x | |")
    return "\n".join(rows) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", default="smollm2")
    p.add_argument("--model", type=pathlib.Path, default=CACHE / "models/SmolLM2-135M-Instruct.Q4_1.gguf")
    p.add_argument("--ember", type=pathlib.Path, default=ROOT / "build/release/tools/ember/ember")
    p.add_argument("--llama-server", type=pathlib.Path, default=CACHE / "llama.cpp/bin/llama-server")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=512, help="context per sequence")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--dataset", default="random")
    p.add_argument("--dataset-path", type=pathlib.Path, default=None, help="with --dataset jsonl: the file")
    p.add_argument("--ember-arg", action="append", default=[],
                   help="an extra `ember serve` argument (repeat it: --ember-arg=--long-prefill-token-threshold --ember-arg=256)")
    p.add_argument("--ember-variant", nargs=2, action="append", default=[], metavar=("LABEL", "ARGS"),
                   help="another ember server in the same alternation, with these extra arguments "
                        "(e.g. --ember-variant fcfs-prefill '--long-prefill-share 1')")
    p.add_argument("--long-input-len", type=int, default=2048, help="mixed dataset: a long prompt's tokens")
    p.add_argument("--long-fraction", type=float, default=0.25, help="mixed dataset: the share of long prompts")
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--prompts-per-slot", type=int, default=2, help="requests per level = this * concurrency")
    p.add_argument("--min-prompts", type=int, default=16)
    p.add_argument("--goodput", nargs="+", default=["ttft:1000", "tpot:100"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "bench/results")
    p.add_argument("--plot", type=pathlib.Path, default=None, help="default docs/images/serve_<name>.png")
    args = p.parse_args()
    for path in (args.model, args.ember, args.llama_server):
        if not path.exists():
            raise SystemExit(f"{path} is missing (see the usage at the top of this script)")

    log_dir = ROOT / "build/bench_serve" / args.name
    log_dir.mkdir(parents=True, exist_ok=True)
    kinds = ["ember", *(label for label, _ in args.ember_variant), "llama.cpp"]
    results: dict[str, dict[int, list[dict]]] = {k: {} for k in kinds}
    t0 = time.time()
    for r in range(args.repeats):
        for c in args.concurrency:
            order = kinds if r % 2 == 0 else kinds[::-1]
            for kind in order:
                results[kind].setdefault(c, []).append(run_one(kind, args, c, r, log_dir))

    try:
        load = os.getloadavg()
    except OSError:
        load = None
    meta = {"model": args.model.name, "threads": args.threads, "ctx_per_seq": args.ctx,
            "dataset": args.dataset, "dataset_path": str(args.dataset_path or ""), "input_len": args.input_len, "output_len": args.output_len,
            "prompts_per_slot": args.prompts_per_slot, "min_prompts": args.min_prompts, "repeats": args.repeats,
            "goodput": args.goodput, "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.platform()}",
            "load_average_after": load, "suite_seconds": time.time() - t0,
            "ember_cmd": server_command("ember", args, 0, 0), "llama_cmd": server_command("llama.cpp", args, 0, 0),
            "ember_variants": args.ember_variant, "long_input_len": args.long_input_len,
            "long_fraction": args.long_fraction}
    runs = [{"label": k, "levels": [best(results[k][c]) for c in args.concurrency]} for k in results]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with open(args.out_dir / f"serve_{args.name}.json", "w") as f:
        json.dump({"meta": meta, "runs": runs,
                   "all_repeats": {k: {str(c): v for c, v in d.items()} for k, d in results.items()}}, f, indent=1)
    table = markdown(results, args.concurrency)
    (args.out_dir / f"serve_{args.name}.md").write_text(table)
    plot = args.plot or ROOT / f"docs/images/serve_{args.name}.png"
    plot.parent.mkdir(parents=True, exist_ok=True)
    plot_runs(runs, str(plot), f"{args.model.name}: {args.input_len} in / {args.output_len} out, "
              f"{args.threads} threads (best of {args.repeats})")
    print(table)
    print(f"wrote {args.out_dir}/serve_{args.name}.json, .md and {plot} in {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
