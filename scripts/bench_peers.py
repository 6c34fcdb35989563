#!/usr/bin/env python3
"""ember against the peer engines, side by side in one run: llama-bench's pp/tg tests on the same
GGUFs and thread counts for ember (`ember bench`), ik_llama.cpp and mainline llama.cpp (their own
`llama-bench` binaries, built natively from source outside this repository; this script only runs
them).

Both sides time the same thing: pp N = one batch of N prompt tokens into an empty KV cache, tg N =
N single-token decode steps. The engines alternate (the order rotates every round) so slow phases of
a shared machine spread over all of them; each cell reports the best and the median over
--rounds x --reps timed runs.

  .venv/bin/python scripts/bench_peers.py --ik /work/scratch/ik/build/bin/llama-bench \\
      --llama /work/scratch/llama/build/bin/llama-bench --tests pp512 tg128 pp2048 \\
      --threads 1 2 --rounds 2 --name peers_s11

Peer options: --peer-args adds flags to every llama-bench call (for example `-fa 1`), and
--ik-args to ik_llama.cpp's only (for example `-rtr 1`, its run-time repacking). The report
names the flags used, so read it with them.

Writes bench/results/<name>.json (every run) and bench/results/<name>.md (the table).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import shlex
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = pathlib.Path(os.environ.get("EMBER_MODEL_CACHE", pathlib.Path.home() / ".cache/ember/models"))
MODELS = {
    "smollm2": CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": CACHE / "gemma-3-270m-q4_k_m.gguf",
}


def parse_test(name: str) -> tuple[str, int]:
    kind, count = name[:2], name[2:]
    if kind not in ("pp", "tg") or not count.isdigit():
        sys.exit(f"--tests: '{name}' is not ppN or tgN")
    return kind, int(count)


def run_ember(binary: str, model: pathlib.Path, kind: str, n: int, threads: int, reps: int) -> list[float]:
    pp, tg = (n, 0) if kind == "pp" else (0, n)
    cmd = [binary, "bench", "--model", str(model), "--pp", str(pp), "--tg", str(tg), "--reps", str(reps),
           "--threads", str(threads), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"{shlex.join(cmd)} failed:\n{out.stderr[-2000:]}")
    result = json.loads(out.stdout)
    return [float(x) for x in result[kind]["tokens_per_second"]]


def run_llama_bench(binary: str, extra: list[str], model: pathlib.Path, kind: str, n: int, threads: int,
                    reps: int) -> list[float]:
    pp, tg = (n, 0) if kind == "pp" else (0, n)
    # -b/-ub = N: one batch for the whole prompt, as ember's pp runs it.
    cmd = [binary, "-m", str(model), "-t", str(threads), "-p", str(pp), "-n", str(tg), "-r", str(reps),
           "-o", "json"] + (["-b", str(n), "-ub", str(n)] if kind == "pp" else []) + extra
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        sys.exit(f"{shlex.join(cmd)} failed:\n{out.stderr[-2000:]}")
    rows = json.loads(out.stdout)
    samples = rows[0].get("samples_ts")
    if not samples:
        sys.exit(f"{shlex.join(cmd)}: no samples_ts in its JSON")
    return [float(x) for x in samples]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ember", default=str(ROOT / "build/release/tools/ember/ember"))
    ap.add_argument("--ember-base", help="a second ember binary (e.g. main's build) run as engine 'ember@base', "
                    "alternated with the others: an A/B of two ember builds inside the same run")
    ap.add_argument("--ik", help="ik_llama.cpp's llama-bench")
    ap.add_argument("--llama", help="mainline llama.cpp's llama-bench")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--tests", nargs="+", default=["pp512", "tg128"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--peer-args", default="", help="flags added to every llama-bench call")
    ap.add_argument("--ik-args", default="", help="flags added to ik_llama.cpp's llama-bench only")
    ap.add_argument("--name", default="peers")
    args = ap.parse_args()

    engines: list[tuple[str, object]] = [("ember", None)]
    if args.ember_base:
        engines.append(("ember@base", None))
    if args.ik:
        engines.append(("ik_llama.cpp", shlex.split(args.peer_args) + shlex.split(args.ik_args)))
    if args.llama:
        engines.append(("llama.cpp", shlex.split(args.peer_args)))
    tests = [parse_test(t) for t in args.tests]
    binaries = {"ember": args.ember, "ember@base": args.ember_base, "ik_llama.cpp": args.ik, "llama.cpp": args.llama}

    runs: dict[str, list[float]] = {}
    for rnd in range(args.rounds):
        for model_name in args.models:
            model = MODELS[model_name]
            if not model.exists():
                sys.exit(f"{model} is missing: run `make models`")
            for threads in args.threads:
                for kind, n in tests:
                    order = engines[rnd % len(engines):] + engines[:rnd % len(engines)]
                    for engine, extra in order:
                        if engine.startswith("ember"):
                            ts = run_ember(binaries[engine], model, kind, n, threads, args.reps)
                        else:
                            ts = run_llama_bench(binaries[engine], extra, model, kind, n, threads, args.reps)
                        key = f"{model_name}|{threads}|{kind}{n}|{engine}"
                        runs.setdefault(key, []).extend(ts)
                        print(f"round {rnd} {key}: {', '.join(f'{t:.1f}' for t in ts)}", flush=True)

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    names = [e for e, _ in engines]
    lines = [f"# ember vs peers ({args.name})", "",
             f"CPU: {cpu}, {os.cpu_count()} logical CPUs. {args.rounds} alternating rounds x {args.reps} reps; "
             "tokens/s, best (median).", "",
             f"Peer flags: every llama-bench `{args.peer_args or '(defaults)'}`; ik_llama.cpp also "
             f"`{args.ik_args or '(none)'}`. pp runs use -b = -ub = N (one batch).", "",
             "| model | threads | test | " + " | ".join(names) + " | " +
             " | ".join(f"ember / {n}" for n in names[1:]) + " |",
             "|---|---:|---|" + "---:|" * (2 * len(names) - 1)]
    for model_name in args.models:
        for threads in args.threads:
            for kind, n in tests:
                cells, best = [], {}
                for engine in names:
                    ts = runs[f"{model_name}|{threads}|{kind}{n}|{engine}"]
                    best[engine] = max(ts)
                    cells.append(f"{max(ts):,.0f} ({statistics.median(ts):,.0f})")
                ratios = [f"{best['ember'] / best[e]:.2f}" for e in names[1:]]
                lines.append(f"| {model_name} | {threads} | {kind}{n} | " + " | ".join(cells + ratios) + " |")
    out_dir = ROOT / "bench/results"
    (out_dir / args.name).parent.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{args.name}.json").write_text(json.dumps(
        {"cpu": cpu, "args": vars(args), "runs": runs}, indent=1) + "\n")
    (out_dir / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
