#!/usr/bin/env python3
"""Writes a DSpark drafter directory (src/spec/dspark/checkpoint_layout.md) in the Hugging Face
layout llama.cpp's convert_hf_to_gguf.py reads as `Qwen3DSparkModel`, for running the same drafter
in llama-server (`--spec-type draft-dspark`) beside ember (scripts/bench_spec_paired.py --peer).

The drafter shares its target's embedding and lm_head; llama.cpp's DSpark wants its own lm_head
over the draft vocabulary and a `d2t` table (draft id -> target id, stored as offsets), so this
writes the target's lm_head rows for the ids of draft_vocab.json (the first `draft_vocab_size`,
default all), the Markov head's W2 rows for the same ids, and d2t.

  .venv/bin/python scripts/gguf_to_hf_dir.py          # the target as an HF dir (tokenizer, embedding)
  .venv/bin/python scripts/dspark/export_llamacpp_drafter.py tests/golden/dspark/smollm2 \\
      ~/.cache/ember/models/SmolLM2-135M-Instruct-hf-f32 /tmp/drafter_hf
  python LLAMA_CPP/convert_hf_to_gguf.py /tmp/drafter_hf \\
      --target-model-dir ~/.cache/ember/models/SmolLM2-135M-Instruct-hf-f32 --outfile drafter.gguf --outtype q8_0

llama.cpp (llama-cpp-python 0.3.36's vendored copy) reads a tap of the final-normed state
(target layer id = the target's last layer, as SmolLM2's drafter has) only from models whose graph
records it; its Llama graph does not, see bench/results/dspark_s26/README.md.
"""

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("drafter", type=Path, help="ember's drafter directory")
    ap.add_argument("target_hf", type=Path, help="the target as an HF directory (its embedding is the lm_head)")
    ap.add_argument("out", type=Path)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    config = json.loads((a.drafter / "config.json").read_text())
    ids = json.loads((a.drafter / "draft_vocab.json").read_text())["token_ids"]
    ids = torch.tensor(ids[: config.get("draft_vocab_size") or len(ids)], dtype=torch.int64)
    tensors = load_file(str(a.drafter / "model.safetensors"))
    target = load_file(str(a.target_hf / "model.safetensors"))
    head = target.get("lm_head.weight", target["model.embed_tokens.weight"])
    tensors["lm_head.weight"] = head[ids].to(torch.bfloat16).contiguous()
    tensors["markov_head.markov_w2.weight"] = tensors["markov_head.markov_w2.weight"][ids].contiguous()
    tensors["d2t"] = (ids - torch.arange(ids.numel())).contiguous()
    config["draft_vocab_size"] = ids.numel()
    save_file(tensors, str(a.out / "model.safetensors"))
    (a.out / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    print(f"{a.out}: draft vocabulary {ids.numel()} of {config['vocab_size']}")


if __name__ == "__main__":
    main()
