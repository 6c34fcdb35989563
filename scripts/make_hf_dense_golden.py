#!/usr/bin/env python3
"""Golden fixtures for the dense Hugging Face architectures ember reads from model directories:
tiny random LlamaForCausalLM, Qwen3ForCausalLM and Gemma3ForCausalLM models saved with
save_pretrained (bf16 safetensors + config.json) and transformers' float32 logits for them.

  .venv/bin/python scripts/make_hf_dense_golden.py     # writes tests/golden/hf_dense/<name>/

Per fixture directory:
  config.json, generation_config.json, model.safetensors   (save_pretrained of the bf16 model)
  golden.json        prompt_ids, greedy_ids, vocab_size, file names, versions, seed, notes
  logits.f32         little-endian float32 [len(prompt), vocab]: one forward over the prompt
  greedy_logits.f32  little-endian float32 [GREEDY, vocab]: row i is the last-position logits of
                     a full forward (no cache) over prompt + greedy[:i]; greedy[i] = argmax(row i)

Every weight is drawn from a seeded torch.Generator and rounded to bf16, then the model runs in
float32 with eager attention, so the bf16 file holds exactly the weights the logits came from.
The script fails (and writes nothing for that fixture) if reloading the saved directory with
from_pretrained(dtype=float32) does not reproduce the logits bit for bit, or if a greedy step's
top-1/top-2 margin is below MIN_MARGIN (then f32 rounding could flip it); it then tries the next
prompt seed. Running it twice gives the same files.
"""
from __future__ import annotations

import json
import math
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
import transformers
from transformers import (Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests/golden/hf_dense"
GREEDY = 8
MIN_MARGIN = 0.05


@dataclass
class Spec:
    name: str
    cls: type
    config: dict
    prompt_len: int
    seed: int
    notes: str
    # std of the embedding table and (untied) lm_head
    embed_std: float = 1.0
    head_std: float = 0.5
    zero_centred_norms: bool = False  # Gemma: RMSNorm multiplies by 1 + w
    extra: dict = field(default_factory=dict)


COMMON = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
              head_dim=16, max_position_embeddings=256, rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2,
              pad_token_id=0)

SPECS = [
    Spec("llama", LlamaForCausalLM,
         dict(COMMON, num_hidden_layers=2, rope_theta=100000.0, tie_word_embeddings=False),
         prompt_len=24, seed=100,
         notes="SmolLM2-like: GQA 4/2, rope_theta 1e5, untied lm_head, rotate-half RoPE on unpermuted q/k"),
    Spec("llama3_rope", LlamaForCausalLM,
         dict(COMMON, num_hidden_layers=1, hidden_size=32, intermediate_size=64, num_attention_heads=2,
              num_key_value_heads=1, rope_theta=10000.0, tie_word_embeddings=True,
              rope_scaling=dict(rope_type="llama3", factor=4.0, low_freq_factor=1.0, high_freq_factor=2.0,
                                original_max_position_embeddings=8)),
         prompt_len=32, seed=200, embed_std=0.5,
         notes="Llama 3 RoPE scaling with a tiny original_max_position_embeddings so that most "
               "frequencies are rescaled; tied embeddings"),
    Spec("qwen3", Qwen3ForCausalLM,
         dict(COMMON, num_hidden_layers=2, rope_theta=1000000.0, tie_word_embeddings=True),
         prompt_len=24, seed=300, embed_std=0.5,
         notes="per-head q_norm/k_norm (absolute gains) before RoPE, head_dim 16 != hidden/heads is not "
               "required but explicit, tied embeddings"),
    Spec("gemma3", Gemma3ForCausalLM,
         dict(COMMON, num_hidden_layers=3, bos_token_id=2, eos_token_id=1, query_pre_attn_scalar=24,
              sliding_window=4, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
              rope_theta=1000000.0, rope_local_base_freq=10000.0, hidden_activation="gelu_pytorch_tanh",
              final_logit_softcapping=None, attn_logit_softcapping=None),
         prompt_len=24, seed=400, embed_std=0.5, zero_centred_norms=True,
         notes="sliding window 4 on layers 0-1 (local RoPE base 1e4), full layer 2 (base 1e6), "
               "query_pre_attn_scalar 24 != head_dim 16, zero-centred (1 + w) norms incl. q/k norms, "
               "embeddings times sqrt(hidden), tied embeddings"),
]


def fail(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


def build_config(spec: Spec):
    config_cls = {LlamaForCausalLM: LlamaConfig, Qwen3ForCausalLM: Qwen3Config, Gemma3ForCausalLM: Gemma3TextConfig}
    return config_cls[spec.cls](**spec.config)


@torch.no_grad()
def init_and_round(model, spec: Spec) -> None:
    gen = torch.Generator().manual_seed(spec.seed)
    params = dict(model.named_parameters())
    for name in sorted(params):
        p = params[name]
        if name.endswith("norm.weight"):
            base = 0.0 if spec.zero_centred_norms else 1.0
            value = base + 0.1 * torch.randn(p.shape, generator=gen)
        elif name.endswith("embed_tokens.weight"):
            value = spec.embed_std * torch.randn(p.shape, generator=gen)
        elif name == "lm_head.weight":
            value = spec.head_std * torch.randn(p.shape, generator=gen)
        elif p.dim() == 2:
            value = torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[1])
        else:
            fail(f"no init rule for {name} {tuple(p.shape)}")
        p.copy_(value.to(torch.bfloat16).to(torch.float32))


def make_model(spec: Spec):
    torch.manual_seed(spec.seed)
    model = spec.cls(build_config(spec)).to(torch.float32)
    model.set_attn_implementation("eager")
    model.eval()
    init_and_round(model, spec)
    return model


@torch.no_grad()
def run_logits(model, ids: list[int]) -> torch.Tensor:
    logits = model(torch.tensor([ids])).logits[0]
    if logits.dtype != torch.float32:
        fail(f"logits are {logits.dtype}")
    return logits.clone()


@torch.no_grad()
def run_greedy(model, prompt: list[int]) -> tuple[list[int], torch.Tensor, float]:
    seq, ids, rows, margin = list(prompt), [], [], float("inf")
    for _ in range(GREEDY):
        last = run_logits(model, seq)[-1]
        top = torch.topk(last, 2).values
        margin = min(margin, float(top[0] - top[1]))
        nxt = int(last.argmax())
        ids.append(nxt)
        rows.append(last)
        seq.append(nxt)
    return ids, torch.stack(rows), margin


def save_bf16(model, spec: Spec, out_dir: Path) -> None:
    if out_dir.exists():
        shutil.rmtree(out_dir)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        bf16 = spec.cls.from_pretrained(tmp, dtype=torch.bfloat16)
        bf16.save_pretrained(out_dir, safe_serialization=True)


def make_fixture(spec: Spec) -> dict:
    model = make_model(spec)
    vocab = spec.config["vocab_size"]
    for attempt in range(50):
        prompt_seed = spec.seed + 1 + attempt
        prompt = torch.randint(3, vocab, (spec.prompt_len,), generator=torch.Generator().manual_seed(prompt_seed))
        prompt = prompt.tolist()
        greedy_ids, greedy_logits, margin = run_greedy(model, prompt)
        if margin >= MIN_MARGIN:
            break
        print(f"  {spec.name}: prompt seed {prompt_seed} has greedy margin {margin:.3g}; next")
    else:
        fail(f"{spec.name}: no prompt with greedy margins >= {MIN_MARGIN}")
    logits = run_logits(model, prompt)
    out_dir = OUT / spec.name
    save_bf16(model, spec, out_dir)
    reloaded = spec.cls.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager").eval()
    if not torch.equal(run_logits(reloaded, prompt), logits):
        fail(f"{spec.name}: the reloaded checkpoint gives different logits")
    (out_dir / "logits.f32").write_bytes(logits.numpy().astype("<f4").tobytes())
    (out_dir / "greedy_logits.f32").write_bytes(greedy_logits.numpy().astype("<f4").tobytes())
    golden = dict(name=spec.name, architecture=spec.cls.__name__, prompt_ids=prompt, greedy_ids=greedy_ids,
                  vocab_size=vocab, logits_file="logits.f32", greedy_logits_file="greedy_logits.f32",
                  reference=f"transformers {transformers.__version__} {spec.cls.__name__}, float32, eager attention",
                  torch_version=torch.__version__, seed=spec.seed, prompt_seed=prompt_seed,
                  min_greedy_margin=margin, logit_range=[float(logits.min()), float(logits.max())],
                  notes=spec.notes)
    (out_dir / "golden.json").write_text(json.dumps(golden, indent=2) + "\n")
    size = sum(f.stat().st_size for f in out_dir.iterdir())
    print(f"{spec.name}: {size / 1024:.0f} KiB, prompt {len(prompt)}, greedy {greedy_ids}, margin {margin:.3f}, "
          f"logits [{float(logits.min()):.2f}, {float(logits.max()):.2f}]")
    return golden


def main() -> None:
    torch.use_deterministic_algorithms(True)
    OUT.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[1:])
    for spec in SPECS:
        if not only or spec.name in only:
            make_fixture(spec)


if __name__ == "__main__":
    main()
