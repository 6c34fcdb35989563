#!/usr/bin/env python3
"""A random (untrained) DSpark drafter shaped for a Hugging Face target directory, for benchmarks
that must show speculation is never slower where drafts are never right (bench_spec_decode.py
--suite muse_mid): hidden size, vocabulary and taps from the target's config.json (a Muse Spark
config's text_config), one layer, block 7, weights N(0, 0.02) from a fixed seed, calibration absent.

  .venv/bin/python scripts/dspark/make_random_drafter.py ~/.cache/ember/models/muse-spark-mid \\
      --out ~/.cache/ember/models/muse-spark-mid-dspark-random
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dspark_model import DSparkConfig, DSparkDrafter  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", type=Path, help="the target's directory (config.json)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    cfg = json.loads((a.target / "config.json").read_text())
    text = cfg.get("text_config", cfg)
    layers = text["num_hidden_layers"]
    c = DSparkConfig(
        hidden_size=text["hidden_size"], num_hidden_layers=1, num_attention_heads=8, num_key_value_heads=2,
        head_dim=64, intermediate_size=2 * text["hidden_size"], vocab_size=text["vocab_size"], block_size=7,
        target_layer_ids=[1, layers // 2, layers - 1], num_target_layers=layers, mask_token_id=text["vocab_size"] - 1,
        markov_rank=32, rms_norm_eps=1e-6, rope_theta=1e6, is_causal=False,
        target_model=f"{a.target.name} (random drafter: benchmarks only)",
    )
    model = DSparkDrafter(c)
    g = torch.Generator().manual_seed(a.seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
    model.save(a.out)
    print(f"random drafter for {a.target} -> {a.out}")


if __name__ == "__main__":
    main()
