#!/usr/bin/env python3
"""Independent cross-check of `ember bench serve`: sequential streaming requests with the official openai client.

Sends prompts like `ember bench serve --dataset random --range-ratio 0` does (the same
word list and word counts, so the same token counts; its own random draws) one at a
time, times each by hand (first streamed text, then every further chunk) and prints
the same headline numbers, so the two clients can be compared on one server at
concurrency 1. Use different seeds for the two runs, so neither hits the other's
prefix cache:

  build/release/tools/ember/ember bench serve --base-url URL --concurrency 1 --num-prompts 16 --seed 1
  .venv/bin/python scripts/bench_serve_check_openai.py --base-url URL --num-prompts 16 --seed 2
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import openai

# The word list of `ember bench serve` (tools/ember/bench/serve_dataset.cc): each word is one
# token with its leading space, so a prompt of N words is N tokens.
WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there one all we their has been would will more if no when what "
    "so out up who about them can said into time than only some could new other then two may do "
    "first any now such like its over also after most made world where these many very before way "
    "state through well year back much how good work day long should great even still city own "
    "same part while people know find take give next since place right small end under both high "
    "life last man old us school water never house come home left few must found early each "
    "light hand point line name open group make room game side again story face off far run set"
).split()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--model", default=None)
    p.add_argument("--num-prompts", type=int, default=16)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    client = openai.OpenAI(base_url=args.base_url.rstrip("/") + "/v1", api_key="none")
    model = args.model or client.models.list().data[0].id
    rng = random.Random(args.seed)
    prompts = [" ".join(rng.choice(WORDS) for _ in range(args.input_len)) for _ in range(args.num_prompts)]

    client.completions.create(model=model, prompt="warm up", max_tokens=4)
    ttfts, itls, tokens = [], [], 0
    t0 = time.perf_counter()
    for prompt in prompts:
        start = time.perf_counter()
        last = None
        stream = client.completions.create(model=model, prompt=prompt, max_tokens=args.output_len, temperature=0,
                                           stream=True, extra_body={"ignore_eos": True})
        for chunk in stream:
            if not chunk.choices or not chunk.choices[0].text:
                continue
            now = time.perf_counter()
            if last is None:
                ttfts.append(now - start)
            else:
                itls.append(now - last)
            last = now
            tokens += 1
    duration = time.perf_counter() - t0
    print(f"[openai client, sequential] {len(prompts)} requests in {duration:.1f}s | "
          f"{len(prompts) / duration:.2f} req/s, {tokens / duration:.1f} out tok/s | "
          f"TTFT med {statistics.median(ttfts) * 1000:.1f} ms | ITL med {statistics.median(itls) * 1000:.2f} ms, "
          f"mean {statistics.mean(itls) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
