#!/usr/bin/env python3
"""Live speculative decoding (online.py, the target in torch) of the SmolLM2 drafters given, on the
held-out prompts of the data file, at one temperature over several seeds: tokens per cycle of
each drafter per seed, in the same prompts and seeds.

`train_dspark.py calibrate` measures T=1 once, on 16 prompts and one seed; sampled decoding
takes different paths per seed, so a single read moves by several percent (session 40's
drafter read -4% there and +4% / -2.5% over all 32 prompts with two other seeds). This is the
comparison to run before calling a drafter better or worse at T=1.

  .venv/bin/python scripts/dspark/compare_live.py tests/golden/dspark/smollm2 NEW_DRAFTER --seeds 11 12
"""

import argparse
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import train_dspark  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("drafters", nargs="+", help="drafter directories (train_dspark.py's output)")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[11, 12])
    ap.add_argument("--prompts", type=int, default=0, help="the first N held-out prompts (0: all)")
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    blob = train_dspark.load_data(types.SimpleNamespace(target="smollm2", smoke=False))
    embed = blob["embed"].float()
    held = blob["data"]["held_out"]
    held = held[: a.prompts] if a.prompts else held
    tok, tgt = train_dspark.target.load_target()
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    drafters = {d: train_dspark.load_drafter(d) for d in a.drafters}
    for seed in a.seeds:
        for name, drafter in drafters.items():
            r = train_dspark.live_decode(drafter, tgt, embed, held, a.temperature, seed, a.max_new, eos)
            print(f"T={a.temperature:g} seed {seed} {name}: {r['tokens_per_cycle']:.3f} tokens per cycle "
                  f"({r['cycles']} cycles, {r['prompts']} prompts)", flush=True)


if __name__ == "__main__":
    main()
