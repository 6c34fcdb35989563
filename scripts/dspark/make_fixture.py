"""Writes tests/golden/dspark/{tiny,tiny_gated}: tiny random DSpark drafters for a made-up target
(hidden 64, vocab 512, 6 layers), their inputs, and what the torch reference computes from them.

The C++ drafter test loads a directory, feeds `context_features` and the anchors, and compares.
Each directory holds:
  config.json, model.safetensors, calibration.json  the drafter, in the checkpoint layout
  target.safetensors   the made-up target's embed_tokens.weight and lm_head.weight [V, d] (bf16):
                       what a real drafter takes from its target
  inputs.safetensors   context_features [T, m*d] f32: the target's tap hidden states of positions
                       0..T-1 concatenated in target_layer_ids order (the last-layer tap already
                       final-normed, as the layout says)
  expected.safetensors per case c (see cases.json): c{c}.context_states [s, d],
                       c{c}.hidden [g, d] (final-normed h_k), c{c}.base_logits [g, V],
                       c{c}.{greedy,forced}_{tokens [g] i32, logits [g, V], confidence_logits [g],
                       confidences [g] (calibrated)}
  cases.json           anchor position s, anchor token, forced tokens, tolerances

Usage: .venv/bin/python scripts/dspark/make_fixture.py [--out tests/golden/dspark]
"""

import argparse
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dspark_model import DSparkConfig, DSparkDrafter, calibrated, round_to_bf16_  # noqa: E402

D, V, TARGET_LAYERS, T = 64, 512, 6, 24


def tiny_config(gated: bool) -> DSparkConfig:
    return DSparkConfig(
        hidden_size=D, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, intermediate_size=128, vocab_size=V, block_size=7,
        target_layer_ids=[0, 2, TARGET_LAYERS - 1], num_target_layers=TARGET_LAYERS,
        mask_token_id=V - 1, markov_rank=16, markov_head_type="gated" if gated else "vanilla",
        rms_norm_eps=1e-6, rope_theta=10000.0,
        # vanilla: layer 0 windowed (8) and bidirectional in the block, exercising the window on a
        # 24-position context; gated: full layers, causal in the block (the other mask branch).
        sliding_window=None if gated else 8,
        layer_types=["full_attention"] * 2 if gated else ["sliding_attention", "full_attention"],
        is_causal=gated, target_model="made-up tiny target (hidden 64, vocab 512, 6 layers)",
    )


def randomize_(model: DSparkDrafter, g: torch.Generator):
    # Larger than training inits so logits, the Markov bias and the window all move the outputs.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif "markov_w1" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5 * 1.5)


def write(out: Path, gated: bool, seed: int):
    g = torch.Generator().manual_seed(seed)
    c = tiny_config(gated)
    model = DSparkDrafter(c)
    randomize_(model, g)
    round_to_bf16_(model)
    temps = [1.0, 1.25, 0.8, 1.5, 0.9, 1.1, 2.0]
    model.save(out, calibration=temps)

    embed = (torch.randn(V, D, generator=g)).to(torch.bfloat16)
    lm_head = (torch.randn(V, D, generator=g) * 0.25).to(torch.bfloat16)
    m = len(c.target_layer_ids)
    feats = torch.randn(T, m * D, generator=g) * 2.0
    # s = 3: short context, no window effect; s = T: the full context, window cuts layer 0.
    write_cases(out, model, temps, embed, lm_head, feats, [3, T], None, g)


def write_trained(out: Path, target_name: str):
    """Cases for a drafter trained by scripts/train_dspark.py, on its real target's embedding,
    lm_head and tap features of a held-out sequence (the last tap final-normed, as transformers
    gives it), anchored before and well past the drafter's sliding window, with the sequence's own
    anchor tokens: the C++ drafter must compute what the module the training script trained does."""
    import muse_tiny

    assert target_name == "muse_tiny", "only the tiny Muse target's weights load without a GGUF reader here"
    model = DSparkDrafter.load(out).eval()
    from dspark_model import load_calibration

    temps = load_calibration(out, model.config.block_size)
    _, tgt = muse_tiny.load_target()
    w = muse_tiny.weights(tgt)
    embed, lm_head = w["embed"].to(torch.bfloat16), w["lm_head"].to(torch.bfloat16)
    held, _ = muse_tiny.prompts(1, 0)
    prompt, cont = muse_tiny.generate(tgt, held, 104, 0.0, seed=0)[0]
    ids = torch.tensor(prompt + cont)
    feats = muse_tiny.taps(tgt, ids[None], muse_tiny.TAPS)[0]
    write_cases(out, model, temps, embed, lm_head, feats, [12, 100], ids, torch.Generator().manual_seed(5))


def write_cases(out: Path, model: DSparkDrafter, temps, embed, lm_head, feats, anchors, ids, g):
    """target.safetensors, inputs.safetensors, expected.safetensors and cases.json for `model` at
    the anchor positions (anchor tokens from `ids`, or random)."""
    c = model.config
    V = c.vocab_size
    save_file({"embed_tokens.weight": embed, "lm_head.weight": lm_head}, str(out / "target.safetensors"))
    save_file({"context_features": feats.contiguous()}, str(out / "inputs.safetensors"))
    cases, expected = [], {}
    model.eval()
    with torch.no_grad():
        for ci, s in enumerate(anchors):
            anchor = int(ids[s]) if ids is not None else int(torch.randint(0, V - 1, (1,), generator=g))
            forced = torch.randint(0, V - 1, (c.block_size,), generator=g)
            ctx = model.context_states(feats[:s])
            h = model.backbone(ctx, model.block_embeds(embed.float(), torch.tensor([anchor])),
                               torch.tensor([s]))[0]
            base = model.base_logits(h, lm_head)
            expected[f"c{ci}.context_states"] = ctx
            expected[f"c{ci}.hidden"] = h
            expected[f"c{ci}.base_logits"] = base
            for kind, f in (("greedy", None), ("forced", forced)):
                toks, logits, z = model.draft(h, base, anchor, forced=f)
                expected[f"c{ci}.{kind}_tokens"] = toks.to(torch.int32)
                expected[f"c{ci}.{kind}_logits"] = logits
                expected[f"c{ci}.{kind}_confidence_logits"] = z
                expected[f"c{ci}.{kind}_confidences"] = calibrated(z, temps)
            cases.append({"case": ci, "anchor_position": s, "anchor_token": anchor,
                          "context_rows": s, "forced_tokens": forced.tolist()})
    save_file({k: v.contiguous() for k, v in expected.items()}, str(out / "expected.safetensors"))
    info = {
        "what": "tiny DSpark drafter: inputs and the torch reference's outputs "
                "(scripts/dspark/make_fixture.py; layout src/spec/dspark/checkpoint_layout.md)",
        "context_features": "inputs.safetensors; rows 0..anchor_position-1 are the context of a case",
        "cases": cases,
        # fp32 reference on bf16-rounded weights; an fp32 C++ path differs by summation order only.
        "tolerance": {"logits_abs": 1e-3, "hidden_abs": 1e-4, "confidence_abs": 1e-5},
    }
    (out / "cases.json").write_text(json.dumps(info, indent=2) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/golden/dspark")
    ap.add_argument("--trained", choices=["muse_tiny"], help="cases for this trained drafter only")
    a = ap.parse_args()
    torch.set_num_threads(1)  # deterministic summation order
    if a.trained:
        write_trained(Path(a.out) / a.trained, a.trained)
        return
    write(Path(a.out) / "tiny", gated=False, seed=16)
    write(Path(a.out) / "tiny_gated", gated=True, seed=17)


if __name__ == "__main__":
    main()
