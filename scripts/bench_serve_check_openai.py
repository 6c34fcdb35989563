#!/usr/bin/env python3
"""Independent cross-check of bench_serve.py: sequential streaming requests with the official openai client.

Sends the same deterministic prompts as `bench_serve.py --dataset random` one at a
time, times each by hand (first streamed text, then every further chunk) and
prints the same headline numbers, so the two clients can be compared on one
server at concurrency 1:

  .venv/bin/python scripts/bench_serve.py --base-url URL --concurrency 1 --num-prompts 16
  .venv/bin/python scripts/bench_serve_check_openai.py --base-url URL --num-prompts 16
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import openai

from bench_serve import random_words


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
    # The same draws as bench_serve.py's random dataset with --range-ratio 0.
    rng = random.Random(args.seed)
    prompts = []
    for _ in range(args.num_prompts):
        prompts.append(random_words(rng, rng.randint(args.input_len, args.input_len)))
        rng.randint(args.output_len, args.output_len)

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
