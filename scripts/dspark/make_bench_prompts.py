#!/usr/bin/env python3
"""Chat prompts for benchmarking the SmolLM2 DSpark drafter (`ember bench serve --dataset jsonl`),
from text the drafter never trained on: docstrings of Python modules that scripts/dspark/target.py
does not read, each text checked against every training text.

Each line: {"prompt": the chat-formatted prompt text (SmolLM2's template, generation prompt
included), "output_len": the target's own greedy answer length, at most --max-new}. With
`ignore_eos` the benchmark then stops where the target's greedy answer ends, so drafts are judged
on the answer, not on text after the end-of-turn token.

  .venv/bin/python scripts/dspark/make_bench_prompts.py   # -> bench/datasets/dspark_chat.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import target  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODULES = ["email.utils", "email.header", "xml.sax.saxutils", "urllib.error", "unittest.mock", "numpy.ma",
           "numpy.char", "numpy.lib.recfunctions", "numpy.testing", "json.decoder", "asyncio.tasks",
           "concurrent.futures.thread", "logging.handlers", "http.cookiejar", "wsgiref.util", "curses.ascii",
           "encodings.idna", "importlib.metadata", "importlib.resources", "string.templatelib"]
TEMPLATES = ["Explain in plain words what this Python documentation says:\n\n{t}",
             "What is this Python feature for?\n\n{t}",
             "Summarize this in two sentences:\n\n{t}",
             "Write a short example that uses this:\n\n{t}"]


def texts(exclude: set[str]) -> list[str]:
    return [d for d in target.docstrings(MODULES) if not any(d.split(": ", 1)[1] in t for t in exclude)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num", type=int, default=160)
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--out", default=str(ROOT / "bench" / "datasets" / "dspark_chat.jsonl"))
    a = ap.parse_args()
    torch.set_num_threads(2)
    held, train = target.prompts()
    pool = texts(set(held) | set(train))
    rng = random.Random(7)
    rng.shuffle(pool)
    pool = pool[: a.num]
    if len(pool) < a.num:
        print(f"only {len(pool)} unseen texts", file=sys.stderr)
    tok, model = target.load_target()
    fast = model.to(torch.bfloat16)
    prompts = [rng.choice(TEMPLATES).format(t=t) for t in pool]
    lengths = {}
    for prompt_ids, cont in target.generate(tok, fast, prompts, a.max_new, 0.0, 32, seed=0):
        lengths[tuple(prompt_ids)] = len(cont)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as f:
        for p in prompts:
            ids = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                          return_dict=True)["input_ids"]
            text = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
            f.write(json.dumps({"prompt": text, "output_len": max(1, lengths[tuple(ids)])}) + "\n")
    print(f"{len(prompts)} prompts -> {out}")


if __name__ == "__main__":
    main()
