#!/usr/bin/env python3
"""Summarise bench/results/compare/<model>_kv{f16,f32}.json (written by compare_llamacpp.py): per
prompt, where ember's greedy continuation leaves llama.cpp's with llama.cpp's KV cache in f16 and
in f32, and where llama.cpp's own two continuations (f16 vs f32 KV, nothing else changed) part.
The last column is the yardstick: a precision change inside llama.cpp alone moves its greedy path
as early as ember's differences do.

  .venv/bin/python scripts/summarise_divergence.py [--dir bench/results/compare]
"""
import argparse
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=pathlib.Path, default=ROOT / "bench/results/compare")
    args = parser.parse_args()
    for f16 in sorted(args.dir.glob("*_kvf16.json")):
        f32 = f16.with_name(f16.name.replace("_kvf16", "_kvf32"))
        if not f32.exists():
            continue
        a, b = json.loads(f16.read_text()), json.loads(f32.read_text())
        print(f"\n## {a['model']}\n")
        print("| prompt | ember vs llama.cpp (f16 KV) | ember vs llama.cpp (f32 KV) | llama.cpp f16 KV vs f32 KV |")
        print("|---|---|---|---|")
        for ra, rb in zip(a["generation"], b["generation"]):
            show = lambda d: "identical" if d is None else f"token {d}"
            print(f"| {ra['prompt'][:32]!r} | {show(ra['first_divergence'])} | {show(rb['first_divergence'])} | "
                  f"{show(first_difference(ra['llama_cpp_ids'], rb['llama_cpp_ids']))} |")


if __name__ == "__main__":
    main()
