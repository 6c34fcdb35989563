#!/usr/bin/env python3
"""Build a mid-size Muse Spark checkpoint for benchmarks: the real architecture (3 sliding : 1 full
attention layers, latent-projected routed experts with sigmoid top-k routing, residual gates) at
about 0.75B parameters, random weights from a fixed seed, saved as a BF16 safetensors directory
the way transformers writes a real checkpoint (routers F32).

The 816B model does not fit this machine; this one is big enough that expert weights stream from
memory (1.4 GB, far beyond the last-level cache) while a step still takes milliseconds, so batching,
MoE grouping and the 4-bit formats show their effect. It has no tokenizer: drive it with token-id
prompts (`ember generate --jsonl`, `ember bench throughput`, /v1/completions with a token list).

  .venv/bin/python scripts/make_muse_bench_model.py [--out ~/.cache/ember/models/muse-spark-mid]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_muse_golden import Spec, make_model, save_bf16  # noqa: E402

MID = Spec(
    name="mid", seed=3003, vocab_size=32768, hidden_size=1024, num_layers=12, num_heads=16,
    num_kv_heads=4, head_dim=64, sliding_window=2048, num_experts=32, top_k=4, moe_hidden_size=768,
    moe_intermediate_size=768, prompt_len=0, intermediate_size=2048,
    mlp_layer_types=["sparse"] * 12,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path.home() / ".cache/ember/models/muse-spark-mid")
    args = ap.parse_args()
    if (args.out / "model.safetensors").exists() or (args.out / "model.safetensors.index.json").exists():
        print(args.out)
        return
    start = time.time()
    model = make_model(MID)
    params = sum(p.numel() for n, p in model.named_parameters() if n.startswith(("model.language_model", "lm_head")))
    args.out.mkdir(parents=True, exist_ok=True)
    save_bf16(model, args.out)
    (args.out / "bench_model.json").write_text(json.dumps({"spec": MID.__dict__, "text_parameters": params}, indent=1))
    print(f"{params / 1e9:.3f}B text parameters written to {args.out} in {time.time() - start:.0f} s", file=sys.stderr)
    print(args.out)


if __name__ == "__main__":
    main()
