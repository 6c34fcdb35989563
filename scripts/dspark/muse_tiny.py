"""The tiny trained Muse Spark as a DSpark target (scripts/train_dspark.py --target muse_tiny): the
quantized-accuracy fixture's model (tests/golden/quant/accuracy/model, scripts/make_quant_accuracy.py:
4 layers, three sliding-window (16) and one full, MoE, softcapped logits, trained on a seeded
second-order Markov source over 256 tokens), run by transformers' MuseSparkForConditionalGeneration.

Prompts are the source's own sequences (the language the target learned); continuations are the
target's, greedy or sampled. No tokenizer: token ids throughout.

What a Muse drafter reads (checkpoint_layout.md): taps are transformers' hidden_states[l + 1] (the
last entry final-normed); the block's rows are the raw embedding table rows, *without* Muse's
weightless embedding norm (transformers' DFlash candidate generator sets it aside); base logits are
logit_scale * lm_head(h), no softcap, with logit_scale = the target's output multiplier so the
drafter's logits start on the target's scale.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

MODEL_DIR = ROOT / "tests" / "golden" / "quant" / "accuracy" / "model"
NAME = "muse_tiny"
TAPS = [0, 2, 3]  # a sliding layer, another, and the last (final-normed) one
PROMPT_LEN = 24
MASK_TOKEN_ID = 255  # every id is a source token; the mask row is just the fixed input of slots 1..6


def load_target():
    from transformers import MuseSparkForConditionalGeneration

    model = MuseSparkForConditionalGeneration.from_pretrained(str(MODEL_DIR), dtype=torch.float32)
    model.set_attn_implementation("eager")
    model.set_experts_implementation("eager")
    model.requires_grad_(False)
    return None, model.eval()


def text_model(model):
    return model.model.language_model


def source():
    from make_quant_accuracy import SPEC, Source

    return Source(SPEC.seed + 2)  # the source the fixture's model was trained on


def prompts(held_out: int, n_train: int, seed: int = 11) -> tuple[list[list[int]], list[list[int]]]:
    g = torch.Generator().manual_seed(seed)
    ids = source().sample(held_out + n_train, PROMPT_LEN, g).tolist()
    return ids[:held_out], ids[held_out:]


@torch.no_grad()
def generate(model, prompts_: list[list[int]], max_new: int, temperature: float, seed: int):
    """(prompt, continuation) pairs: the target continues each prompt (all the same length), on
    its KV cache."""
    from transformers import DynamicCache

    g = torch.Generator().manual_seed(seed)
    ids = torch.tensor(prompts_)
    cache = DynamicCache(config=model.config.text_config)
    step_input = ids
    for _ in range(max_new):
        logits = model(input_ids=step_input, past_key_values=cache, use_cache=True).logits[:, -1].float()
        if temperature <= 0:
            nxt = logits.argmax(-1)
        else:
            nxt = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=g)[:, 0]
        ids = torch.cat([ids, nxt[:, None]], 1)
        step_input = nxt[:, None]
    return [(p, ids[i, len(p):].tolist()) for i, p in enumerate(prompts_)]


@torch.no_grad()
def taps(model, ids: torch.Tensor, layer_ids: list[int]) -> torch.Tensor:
    out = text_model(model)(input_ids=ids, output_hidden_states=True, use_cache=False)
    hs = out.hidden_states
    return torch.cat([hs[l + 1] for l in layer_ids], -1).float()


def weights(model) -> dict:
    """What the drafter shares: raw embedding rows, the lm_head, the final norm, the logit map."""
    tm = text_model(model)
    return {"embed": tm.embed_tokens.weight.detach().clone(),
            "lm_head": model.lm_head.weight.detach().clone(),
            "final_norm": tm.norm.weight.detach().clone(),
            "logit_multiplier": output_multiplier(),
            "softcap": model.config.text_config.final_logit_softcapping}


def drafter_config():
    from dspark_model import DSparkConfig
    from make_quant_accuracy import SPEC

    return DSparkConfig(
        hidden_size=SPEC.hidden_size, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
        head_dim=32, intermediate_size=128, vocab_size=SPEC.vocab_size, block_size=7, target_layer_ids=TAPS,
        num_target_layers=SPEC.num_layers, mask_token_id=MASK_TOKEN_ID, markov_rank=16,
        markov_head_type="vanilla", rms_norm_eps=1e-6, rope_theta=500000.0, sliding_window=16,
        layer_types=["sliding_attention", "full_attention"], is_causal=False,
        logit_scale=output_multiplier(),
        target_model="tests/golden/quant/accuracy/model (ember's tiny trained Muse Spark)",
    )


def output_multiplier() -> float:
    import json

    return float(json.loads((MODEL_DIR / "config.json").read_text())["text_config"]["output_multiplier"])
