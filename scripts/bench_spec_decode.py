#!/usr/bin/env python3
"""Speculative decoding, faster where it should be and never slower: for each dataset,
concurrency C and speculation config, a fresh server (ember serve or llama-server, C sequences,
the same --threads) gets the same `ember bench serve` load; /metrics before and after gives the
verified drafts, so tokens per verification step (1 + accepted / drafts) and acceptance per
draft position. Configs alternate in rounds (A B C, then B C A, ...) so a slow phase of a shared
machine does not always hit the same one; tables show the median over rounds.

  --suite smollm2        SmolLM2-135M Q4_1 on edit, quote, prefix (lookup pays) and random (it
                         cannot): none, ngram/suffix adaptive, ngram fixed, llama.cpp none/ngram
  --suite smollm2_draft  target SmolLM2 bf16 (scripts/make_dense_gguf.py), drafter its Q4_1:
                         none, draft_model adaptive/fixed, llama.cpp none/draft
  --suite smollm2_dspark  SmolLM2-135M Q4_1 with the DSpark drafter trained for it
                         (tests/golden/dspark/smollm2) on held-out chat prompts (`chat`:
                         bench/datasets/dspark_chat.jsonl, scripts/dspark/make_bench_prompts.py;
                         each request as long as the target's own greedy answer): none, dspark
                         fixed (all 7 verified), dspark adaptive (Algorithm 1 on its confidences;
                         the drafter's matmuls in Q8_0, the default), the same on the drafter's
                         own weights ("quantization": "none")
  --suite muse_mid       the mid Muse Spark (scripts/make_muse_bench_model.py; random weights, no
                         tokenizer, so `ember bench throughput` on random ids, offline): the
                         never-slower check for MoE, where a verify batch reads more experts;
                         dspark with a random drafter (scripts/dspark/make_random_drafter.py
                         ~/.cache/ember/models/muse-spark-mid --out ~/.cache/ember/models/
                         muse-spark-mid-dspark-random): drafts that are never right

  scripts/build_llama_server.sh; ninja -C build/release ember
  .venv/bin/python scripts/bench_spec_decode.py --suite smollm2 [--quick]

Writes bench/results/spec_decode_<suite>.json (every run) and .md (the table), or under --out-dir.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import re
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = pathlib.Path(os.environ.get("EMBER_CACHE", pathlib.Path.home() / ".cache/ember"))
MODELS = CACHE / "models"
sys.path.insert(0, str(ROOT / "scripts"))
from bench_servers import free_port, stop, wait_ready  # noqa: E402

K = 5  # draft tokens per step (vLLM's usual ngram setting), the same for every method and engine
K_DSPARK = 7  # DSpark drafts a whole block: the Muse drafter's 7

# Per dataset: `ember bench serve` options. edit/quote answers copy the prompt, so their output
# is about as long as it; prefix re-sends a growing multi-turn context.
DATASETS = {
    "edit": ["--input-len", "256", "--output-len", "192"],
    "quote": ["--input-len", "256", "--output-len", "192"],
    "prefix": ["--prefix-len", "512", "--input-len", "64", "--output-len", "64", "--turns", "4"],
    "random": ["--input-len", "128", "--output-len", "128"],
    "chat": ["--dataset-path", str(ROOT / "bench/datasets/dspark_chat.jsonl"), "--output-len", "128"],
}
QUICK_DATASETS = {
    "edit": ["--input-len", "96", "--output-len", "48"],
    "quote": ["--input-len", "96", "--output-len", "48"],
    "prefix": ["--prefix-len", "128", "--input-len", "32", "--output-len", "24", "--turns", "2"],
    "random": ["--input-len", "64", "--output-len", "48"],
    "chat": ["--dataset-path", str(ROOT / "bench/datasets/dspark_chat.jsonl"), "--output-len", "48"],
}
DATASET_KIND = {"chat": "jsonl"}  # the `ember bench serve --dataset` of a dataset, when not its name


def ember_spec(method: str, adaptive: bool, k: int = K, **extra) -> str:
    return json.dumps({"method": method, "num_speculative_tokens": k, "adaptive": adaptive, **extra})


def suite_configs(suite: str) -> tuple[pathlib.Path, list[dict]]:
    """The model and the configs: label, engine, and the engine's extra arguments."""
    if suite == "smollm2":
        model = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
        return model, [
            {"label": "none", "engine": "ember", "args": []},
            {"label": "ngram adaptive", "engine": "ember", "args": ["--speculative-config", ember_spec("ngram", True)]},
            {"label": "ngram fixed", "engine": "ember", "args": ["--speculative-config", ember_spec("ngram", False)]},
            {"label": "suffix adaptive", "engine": "ember", "args": ["--speculative-config", ember_spec("suffix", True)]},
            {"label": "llama.cpp none", "engine": "llama.cpp", "args": []},
            # ngram-simple is llama.cpp's prompt lookup: a size_n-token match drafts the next size_m.
            {"label": "llama.cpp ngram", "engine": "llama.cpp",
             "args": ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3",
                      "--spec-ngram-simple-size-m", str(K)]},
        ]
    if suite == "smollm2_draft":
        model = MODELS / "SmolLM2-135M-Instruct.BF16.gguf"
        drafter = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
        return model, [
            {"label": "none", "engine": "ember", "args": []},
            {"label": "draft_model adaptive", "engine": "ember",
             "args": ["--speculative-config", ember_spec("draft_model", True, model=str(drafter))]},
            {"label": "draft_model fixed", "engine": "ember",
             "args": ["--speculative-config", ember_spec("draft_model", False, model=str(drafter))]},
            {"label": "llama.cpp none", "engine": "llama.cpp", "args": []},
            {"label": "llama.cpp draft", "engine": "llama.cpp",
             "args": ["--spec-type", "draft-simple", "-md", str(drafter), "--spec-draft-n-max", str(K),
                      "--spec-draft-n-min", "0"]},
        ]
    if suite == "smollm2_dspark":
        model = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
        drafter = ROOT / "tests/golden/dspark/smollm2"
        return model, [
            {"label": "none", "engine": "ember", "args": []},
            {"label": "dspark fixed", "engine": "ember",
             "args": ["--speculative-config", ember_spec("dspark", False, K_DSPARK, model=str(drafter))]},
            {"label": "dspark adaptive", "engine": "ember",
             "args": ["--speculative-config", ember_spec("dspark", True, K_DSPARK, model=str(drafter),
                                                         enable_adaptive_verification=True)]},
            {"label": "dspark adaptive unquantized", "engine": "ember",
             "args": ["--speculative-config", ember_spec("dspark", True, K_DSPARK, model=str(drafter),
                                                         enable_adaptive_verification=True, quantization="none")]},
        ]
    if suite == "muse_mid":
        drafter = MODELS / "muse-spark-mid-dspark-random"
        return MODELS / "muse-spark-mid", [
            {"label": "none", "engine": "offline", "args": []},
            {"label": "dspark adaptive", "engine": "offline",
             "args": ["--speculative-config", ember_spec("dspark", True, K_DSPARK, model=str(drafter),
                                                         enable_adaptive_verification=True)]},
            {"label": "dspark fixed", "engine": "offline",
             "args": ["--speculative-config", ember_spec("dspark", False, K_DSPARK, model=str(drafter))]},
            {"label": "ngram adaptive", "engine": "offline", "args": ["--speculative-config", ember_spec("ngram", True)]},
            {"label": "ngram fixed", "engine": "offline", "args": ["--speculative-config", ember_spec("ngram", False)]},
            {"label": "suffix adaptive", "engine": "offline", "args": ["--speculative-config", ember_spec("suffix", True)]},
        ]
    raise SystemExit(f"unknown suite {suite}")


METRIC = re.compile(r'^(?:ember|llamacpp):spec_decode_num_(drafts|draft_tokens|accepted_tokens|accepted_tokens_per_pos)'
                    r'_total(?:\{([^}]*)\})?\s+(\S+)$')


def scrape(url: str) -> dict:
    """Spec-decode counters from /metrics (ember's, or llama-server's with --metrics)."""
    out = {"drafts": 0.0, "draft_tokens": 0.0, "accepted_tokens": 0.0, "per_pos": {}}
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as f:
            text = f.read().decode()
    except Exception:  # noqa: BLE001 - a server without /metrics has no counters
        return out
    for line in text.splitlines():
        m = METRIC.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        if name == "accepted_tokens_per_pos":
            pos = int(re.search(r'position="(\d+)"', labels).group(1))
            out["per_pos"][pos] = out["per_pos"].get(pos, 0.0) + value
        else:
            out[name] += value
    return out


def spec_summary(drafts: float, draft_tokens: float, accepted: float, per_pos: dict) -> dict:
    # vLLM's reading: tokens per verification step = 1 + accepted / drafts (the mean acceptance
    # length); per position, the fraction of drafts whose position i was accepted.
    return {"num_drafts": drafts, "num_draft_tokens": draft_tokens, "num_accepted_tokens": accepted,
            "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
            "tokens_per_step": 1 + accepted / drafts if drafts else None,
            "acceptance_per_position": [per_pos[p] / drafts for p in sorted(per_pos)] if drafts else []}


def server_command(cfg: dict, args: argparse.Namespace, model: pathlib.Path, conc: int, port: int) -> list[str]:
    if cfg["engine"] == "ember":
        return [str(args.ember), "serve", str(model), "--port", str(port), "--threads", str(args.threads),
                "--max-num-seqs", str(conc), "--max-model-len", str(args.ctx), "--served-model-name", "model",
                *cfg["args"]]
    return [str(args.llama_server), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "--threads", str(args.threads), "--threads-batch", str(args.threads), "-np", str(conc),
            "-c", str(conc * args.ctx), "--alias", "model", "--no-warmup", "--metrics",
            "--spec-draft-threads", str(args.threads), "--spec-draft-threads-batch", str(args.threads), *cfg["args"]]


def num_prompts(args: argparse.Namespace, conc: int) -> int:
    return max(args.min_prompts, args.prompts_per_slot * conc)


def run_served(cfg: dict, args, model, dataset: str, conc: int, tag: str, log_dir: pathlib.Path) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log_dir / f"{tag}.log", "w") as log:
        proc = subprocess.Popen(server_command(cfg, args, model, conc, port), stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_ready(url, proc)
            before = scrape(url)
            out_json = log_dir / f"{tag}.json"
            cmd = [str(args.ember), "bench", "serve", "--base-url", url, "--model", "model", "--label", cfg["label"],
                   "--dataset", DATASET_KIND.get(dataset, dataset), *args.dataset_args[dataset], "--num-prompts", str(num_prompts(args, conc)),
                   "--concurrency", str(conc), "--seed", str(args.seed), "--result-json", str(out_json)]
            subprocess.run(cmd, check=False, stdout=log, stderr=subprocess.STDOUT)
            after = scrape(url)
            level = json.loads(out_json.read_text())["levels"][0]
        finally:
            stop(proc)
    pos = {p: v - before["per_pos"].get(p, 0.0) for p, v in after["per_pos"].items()}
    spec = spec_summary(*(after[k] - before[k] for k in ("drafts", "draft_tokens", "accepted_tokens")), pos)
    return {"output_throughput": level["output_throughput"], "tpot_median_ms": level["tpot_ms"]["median"],
            "ttft_median_ms": level["ttft_ms"]["median"], "completed": level["completed"],
            "failed": level["failed"], "spec": spec}


def run_offline(cfg: dict, args, model, dataset: str, conc: int, tag: str, log_dir: pathlib.Path) -> dict:
    # `ember bench throughput` on random ids: the model has no tokenizer, so no server.
    inp, outp = (64, 48) if args.quick else (128, 128)
    cmd = [str(args.ember), "bench", "throughput", str(model), "--json", "--input-len", str(inp),
           "--output-len", str(outp), "--num-prompts", str(num_prompts(args, conc)), "--max-num-seqs", str(conc),
           "--threads", str(args.threads), "--max-model-len", str(inp + outp + 16), *cfg["args"]]
    with open(log_dir / f"{tag}.log", "w") as log:
        done = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=log, text=True)
    r = json.loads(done.stdout)
    s = r.get("spec_decode", {})
    per_pos = dict(enumerate(s.get("accepted_per_position", []), start=1))
    spec = spec_summary(s.get("num_drafts", 0), s.get("num_draft_tokens", 0), s.get("num_accepted_tokens", 0), per_pos)
    return {"output_throughput": r["output_tokens_per_second"], "tpot_median_ms": None, "ttft_median_ms": None,
            "completed": r["num_requests"] - r["failed"], "failed": r["failed"], "spec": spec}


def fmt(x, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def markdown(results: dict, datasets: list[str], concs: list[int], labels: list[str]) -> str:
    rows = ["| dataset | conc | config | out tok/s | TPOT med (ms) | vs none | accepted | tokens/step "
            "| acceptance per position |", "|---|---:|---|---:|---:|---:|---:|---:|---|"]
    worst = {}
    for d in datasets:
        for c in concs:
            med = {}
            for label in labels:
                runs = results[d][c][label]
                med[label] = {"tput": statistics.median(r["output_throughput"] for r in runs),
                              "tpot": statistics.median(r["tpot_median_ms"] for r in runs)
                              if runs[0]["tpot_median_ms"] is not None else None,
                              "spec": runs[-1]["spec_total"]}
            for label in labels:
                base = med["llama.cpp none" if label.startswith("llama.cpp") else "none"]["tput"]
                m, s = med[label], med[label]["spec"]
                ratio = m["tput"] / base if base else None
                if "adaptive" in label and ratio is not None:
                    worst[label, d] = min(worst.get((label, d), (9.0, c)), (ratio, c))
                pos = " ".join(f"{p:.2f}" for p in s["acceptance_per_position"])
                rows.append(f"| {d} | {c} | {label} | {m['tput']:.1f} | {fmt(m['tpot'], '.2f')} | {fmt(ratio, '.2f')}x "
                            f"| {fmt(s['acceptance_rate'], '.2f')} | {fmt(s['tokens_per_step'], '.2f')} | {pos} |")
    lines = ["", "Never slower (adaptive configs: the lowest ratio to none over the concurrency levels; "
             "the bar is 0.98x):", ""]
    for (label, d), (ratio, c) in sorted(worst.items()):
        lines.append(f"* {d}, {label}: {ratio:.2f}x at concurrency {c}{'' if ratio >= 0.98 else '  **below 0.98x**'}")
    return "\n".join(rows + lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", choices=["smollm2", "smollm2_draft", "smollm2_dspark", "muse_mid"], default="smollm2")
    p.add_argument("--ember", type=pathlib.Path, default=ROOT / "build/release/tools/ember/ember")
    p.add_argument("--llama-server", type=pathlib.Path, default=CACHE / "llama.cpp/bin/llama-server")
    p.add_argument("--no-llama", action="store_true", help="ember configs only")
    p.add_argument("--configs", nargs="+", help="only these config labels (default: all of the suite)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=2048, help="context per sequence")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--datasets", nargs="+", default=None, help="default: edit quote prefix random (muse_mid: random)")
    p.add_argument("--prompts-per-slot", type=int, default=2, help="requests per level = this * concurrency")
    p.add_argument("--min-prompts", type=int, default=8)
    p.add_argument("--num-prompts", type=int, default=None, help="fixed requests per level (overrides the two above)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="smoke test: tiny sizes, concurrency 1 4, one round")
    p.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "bench/results")
    args = p.parse_args()
    if args.quick:
        args.concurrency, args.rounds, args.prompts_per_slot, args.min_prompts = [1, 4], 1, 1, 2
    if args.num_prompts:
        args.prompts_per_slot, args.min_prompts = 0, args.num_prompts
    args.dataset_args = QUICK_DATASETS if args.quick else DATASETS
    model, configs = suite_configs(args.suite)
    if args.no_llama:
        configs = [c for c in configs if c["engine"] != "llama.cpp"]
    if args.configs:
        configs = [c for c in configs if c["label"] in args.configs]
    default_datasets = {"muse_mid": ["random"], "smollm2_dspark": ["chat"]}
    datasets = args.datasets or default_datasets.get(args.suite, [d for d in DATASETS if d != "chat"])
    needed = [model, args.ember] + ([args.llama_server] if any(c["engine"] == "llama.cpp" for c in configs) else [])
    for path in needed:
        if not path.exists():
            raise SystemExit(f"{path} is missing (see the usage at the top of this script)")

    log_dir = ROOT / "build/bench_spec" / args.suite
    log_dir.mkdir(parents=True, exist_ok=True)
    labels = [c["label"] for c in configs]
    results = {d: {c: {label: [] for label in labels} for c in args.concurrency} for d in datasets}
    t0 = time.time()
    for r in range(args.rounds):
        for d in datasets:
            for c in args.concurrency:
                # Rotate the order each round so no config always runs first (or last).
                for cfg in configs[r % len(configs):] + configs[:r % len(configs)]:
                    tag = f"{d}_c{c}_{cfg['label'].replace(' ', '_')}_r{r}"
                    runner = run_offline if cfg["engine"] == "offline" else run_served
                    res = runner(cfg, args, model, d, c, tag, log_dir)
                    res.update({"round": r, "load_average": os.getloadavg()[0]})
                    results[d][c][cfg["label"]].append(res)
                    s = res["spec"]
                    print(f"[{d} c={c} {cfg['label']} r{r}] {res['output_throughput']:.1f} out tok/s, TPOT med "
                          f"{fmt(res['tpot_median_ms'], '.2f')} ms, accepted {fmt(s['acceptance_rate'], '.2f')}, "
                          f"tokens/step {fmt(s['tokens_per_step'], '.2f')}", flush=True)
    # Acceptance over all rounds together (the counters add up).
    for d in datasets:
        for c in args.concurrency:
            for label in labels:
                runs = results[d][c][label]
                tot = {k: sum(x["spec"][k] for x in runs) for k in ("num_drafts", "num_draft_tokens", "num_accepted_tokens")}
                pos: dict[int, float] = {}
                for x in runs:
                    for i, a in enumerate(x["spec"]["acceptance_per_position"], start=1):
                        pos[i] = pos.get(i, 0.0) + a * x["spec"]["num_drafts"]
                runs[-1]["spec_total"] = spec_summary(tot["num_drafts"], tot["num_draft_tokens"],
                                                      tot["num_accepted_tokens"], pos)

    meta = {"suite": args.suite, "model": str(model), "threads": args.threads, "ctx_per_seq": args.ctx,
            "k": {c["label"]: (K_DSPARK if "dspark" in c["label"] else K) for c in configs}, "rounds": args.rounds, "quick": args.quick, "datasets": {d: args.dataset_args[d] for d in datasets},
            "prompts_per_slot": args.prompts_per_slot, "min_prompts": args.min_prompts, "seed": args.seed,
            "configs": configs, "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.platform()}",
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "suite_seconds": time.time() - t0,
            "example_cmds": {c["label"]: server_command(c, args, model, 1, 0) for c in configs if c["engine"] != "offline"}}
    table = markdown(results, datasets, args.concurrency, labels)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    base = args.out_dir / f"spec_decode_{args.suite}"
    results_json = {d: {str(c): v for c, v in dd.items()} for d, dd in results.items()}
    base.with_suffix(".json").write_text(json.dumps({"meta": meta, "results": results_json}, indent=1))
    base.with_suffix(".md").write_text(f"`{' '.join(sys.argv[1:])}`, {args.threads} threads, median of "
                                       f"{args.rounds} round(s)\n\n" + table)
    print(table)
    print(f"wrote {base}.json and .md in {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
