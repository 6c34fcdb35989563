#!/usr/bin/env python3
"""Same-run A/B of two ember builds: alternates OLD and NEW on pp512/tg128 (SmolLM2, Gemma 3)
and `ember bench decode` (mid-size Muse, bf16 and nvfp4 experts), 2 threads, and prints each
pair's tok/s ratio NEW/OLD and their median. The second figure is tokens per CPU-second for
pp/tg and the fraction of the roofline for decode.

Usage: scripts/bench_ab_builds.py OLD_EMBER NEW_EMBER ROUNDS   (ONLY=gemma3 to run a subset)
"""
import json, subprocess, statistics, sys, os
old, new, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
home = os.environ["HOME"] + "/.cache/ember/models/"
cases = [
    ("smollm2 pp512", ["--model", home + "SmolLM2-135M-Instruct.Q4_1.gguf", "--pp", "512", "--tg", "0"]),
    ("smollm2 tg128", ["--model", home + "SmolLM2-135M-Instruct.Q4_1.gguf", "--pp", "0", "--tg", "128"]),
    ("gemma3 pp512", ["--model", home + "gemma-3-270m-q4_k_m.gguf", "--pp", "512", "--tg", "0"]),
    ("gemma3 tg128", ["--model", home + "gemma-3-270m-q4_k_m.gguf", "--pp", "0", "--tg", "128"]),
    ("muse-mid bench decode bf16", ["decode"]),
    ("muse-mid bench decode nvfp4", ["decode", "--quantization", "nvfp4"]),
]
only = os.environ.get("ONLY")
if only: cases = [c for c in cases if only in c[0]]
def run(binary, args):
    if args[0] == "decode":
        out = subprocess.run([binary, "bench", *args, "--threads", "2", "--json"], capture_output=True, text=True, check=True).stdout
        j = json.loads(out)
        return (j["decode_tokens_per_second_median"], j["fraction_of_roofline"]), out
    out = subprocess.run([binary, "bench", *args, "--reps", "2", "--threads", "2", "--json"], capture_output=True, text=True, check=True).stdout
    j = json.loads(out)
    part = j["pp"] if "pp" in j else j["tg"]
    return (part["best"], part["cpu_best"]), out
results = {}
for name, args in cases:
    ratios, cpu_ratios = [], []
    for r in range(rounds):
        (a, ac), _ = run(old, args); (b, bc), raw = run(new, args)
        ratios.append(b / a); cpu_ratios.append(bc / ac)
        print(f"{name} round {r}: old {a:.1f} new {b:.1f} tok/s ({b/a:.3f}); 2nd old {ac:.1f} new {bc:.1f} ({bc/ac:.3f})", flush=True)
    print(f"{name}: median new/old {statistics.median(ratios):.3f} (min {min(ratios):.3f} max {max(ratios):.3f}); "
          f"2nd {statistics.median(cpu_ratios):.3f} (min {min(cpu_ratios):.3f} max {max(cpu_ratios):.3f})", flush=True)
