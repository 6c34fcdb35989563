#!/usr/bin/env python3
"""Accuracy fixture for quantized routed experts: a tiny Muse Spark that behaves like a trained model.

The golden tiny models (tests/golden/muse_spark, scripts/make_muse_golden.py) are random: residual
gates N(0, 1) / 0.3 hand most channels straight to each branch, attention is near one-hot and the
lm_head is wide, so any perturbation of an expert weight grows layer by layer into unrelated logits
(mean KL ~7 nats for every format). Here the same architecture, run by transformers'
MuseSparkForConditionalGeneration, starts from a small init (projections 1/sqrt(fan_in), residual
gates 0, i.e. an even mix instead of N(0, 1) / 0.3) and is trained briefly with torch on a
synthetic language (a seeded second-order Markov source: the next token depends on the previous
two). STEPS of training (about 5 minutes on 2 CPU cores) take the loss from ln 256 = 5.55 to
~1.06 (the source's entropy is 0.84), so the logits are peaked as a trained model's are, and the
network is smooth: a small weight perturbation moves the logits a little.

Writes tests/golden/quant/accuracy/:
  model/                    config.json + model.safetensors (bf16; router, correction bias and
                            residual gates f32 as transformers saves them) + golden.json (prompt)
  bf16.logits.f32           transformers, float32 compute on the bf16 weights, [positions, vocab]
  <format>.logits.f32       the same with every routed expert weight replaced by the reference
                            library's quantize-dequantize: nvfp4 (ModelOpt, a global scale per
                            gate/up half), mxfp4 (Quark, default "even" scale mode), mxfp4_floor
                            (Quark, OCP "floor" mode), fp8 (compressed-tensors FP8_BLOCK 128x128)
  summary.json              per format: KL / top-1 vs bf16, and per layer the relative RMS error of
                            the MoE output (library-quantized experts vs bf16 experts on the same
                            inputs, those of the bf16 run)

Usage: .venv/bin/python scripts/make_quant_accuracy.py   (CPU; about 5 minutes on 2 cores)
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_muse_golden import OUTPUT_MULTIPLIER, Spec, build_config, save_bf16  # noqa: E402
from make_quant_fixtures import ct_quantize, kl_top1  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "golden" / "quant" / "accuracy"
SPEC = Spec(
    name="accuracy", seed=4242, vocab_size=256, hidden_size=64, num_layers=4, num_heads=2, num_kv_heads=2,
    head_dim=32, sliding_window=16, num_experts=8, top_k=2, moe_hidden_size=64, moe_intermediate_size=64,
    prompt_len=64, intermediate_size=128, mlp_layer_types=["sparse"] * 4,
)
SEQ, BATCH, STEPS, LR = 64, 16, 600, 1e-2
SUCCESSORS, SUCCESSOR_PROBS = 4, (0.72, 0.18, 0.07, 0.03)


class Source:
    """Next token ~ succ[prev2 % 2, prev1] with SUCCESSOR_PROBS: predictable given the last two
    tokens, so a model must use attention (the previous position) as well as the embedding."""

    def __init__(self, seed: int):
        g = torch.Generator().manual_seed(seed)
        v = SPEC.vocab_size
        self.succ = torch.stack([torch.stack([torch.randperm(v, generator=g)[:SUCCESSORS] for _ in range(v)])
                                 for _ in range(2)])  # [2, V, SUCCESSORS]
        self.probs = torch.tensor(SUCCESSOR_PROBS)

    def sample(self, batch: int, length: int, g: torch.Generator) -> torch.Tensor:
        ids = torch.empty(batch, length, dtype=torch.long)
        ids[:, :2] = torch.randint(0, SPEC.vocab_size, (batch, 2), generator=g)
        for t in range(2, length):
            pick = torch.multinomial(self.probs.expand(batch, -1), 1, generator=g)[:, 0]
            ids[:, t] = self.succ[ids[:, t - 2] % 2, ids[:, t - 1], pick]
        return ids

    def entropy(self) -> float:
        return float(-(self.probs * self.probs.log()).sum())


def init_weights(model, seed: int) -> None:
    """Small init in the spirit of transformers' own (std 0.02 for the projections), except the
    router (logits of std ~1, so expert choices are clear from the start) and the residual gates
    (0: beta = 0.5, alpha = sqrt(0.75), a balanced mix that training then moves)."""
    g = torch.Generator().manual_seed(seed)
    h = SPEC.hidden_size
    with torch.no_grad():
        for name, t in sorted(model.state_dict(keep_vars=True).items()):
            if not t.is_floating_point():
                continue
            if name.endswith("mlp.gate.weight"):
                std, mean = 1.0 / (OUTPUT_MULTIPLIER * math.sqrt(h)), 0.0
            elif name.endswith("e_score_correction_bias") or name.endswith("_residual_gate.gate") or \
                    name.endswith(("layernorm.weight", "expert_norm.weight")):
                std, mean = 0.0, 0.0
            elif name == "model.language_model.norm.weight":
                std, mean = 0.0, 1.0
            elif name.endswith("embed_tokens.weight"):
                std, mean = 0.0625, 0.0
            elif name.endswith(("experts.gate_up_proj", "experts.down_proj")) or t.dim() == 2:
                std, mean = 1.0 / math.sqrt(t.shape[-1]), 0.0
            else:
                std, mean = 0.02, 0.0
            t.copy_(torch.randn(t.shape, generator=g) * std + mean)


def train(model, source: Source) -> list[float]:
    g = torch.Generator().manual_seed(SPEC.seed + 1)
    params = [p for n, p in model.named_parameters() if n.startswith(("model.language_model.", "lm_head."))]
    opt = torch.optim.AdamW(params, lr=LR, weight_decay=0.01, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 10) * 0.5 * (1 + math.cos(math.pi * min(s, STEPS) / STEPS)))
    model.train()
    losses = []
    for step in range(STEPS):
        ids = source.sample(BATCH, SEQ + 1, g)
        out = model(input_ids=ids[:, :-1], use_cache=False)
        loss = torch.nn.functional.cross_entropy(out.logits.reshape(-1, SPEC.vocab_size), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 10 == 0 or step == STEPS - 1:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    model.eval()
    return losses


def load(path: Path):
    from transformers import MuseSparkForConditionalGeneration

    model = MuseSparkForConditionalGeneration.from_pretrained(str(path), dtype=torch.float32)
    model.set_attn_implementation("eager")
    model.set_experts_implementation("eager")
    return model.eval()


def nvfp4(w: torch.Tensor) -> torch.Tensor:
    from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor

    s2 = NVFP4QTensor.get_weights_scaling_factor_2(w)
    q, s, s2 = NVFP4QTensor.quantize(w, 16, weights_scaling_factor_2=s2)
    return q.dequantize(dtype=torch.float32, scale=s, double_scale=s2, block_sizes={-1: 16})


def mxfp4(mode: str):
    def qdq(w: torch.Tensor) -> torch.Tensor:
        # Imported when used, so importing this module (for SPEC and Source) needs no Quark.
        from quark.torch.kernel.hw_emulation.hw_emulation_interface import fake_quantize_mx

        return fake_quantize_mx(w, -1, 32, mode, mx_element_dtype="fp4")

    return qdq


QDQ = {"nvfp4": nvfp4, "mxfp4": mxfp4("even"), "mxfp4_floor": mxfp4("floor"),
       "fp8": lambda w: ct_quantize(w, "FP8_BLOCK")[1]}


@torch.no_grad()
def quantize_experts(model, fn) -> None:
    """Every routed expert weight replaced by fn's quantize-dequantize, per expert; NVFP4 with a
    global scale per gate/up half (the layout of the released Muse checkpoint and of ember)."""
    for name, p in model.named_parameters():
        if not name.endswith(("gate_up_proj", "down_proj")):  # stacked experts only (dense MLPs end in .weight)
            continue
        halves = 2 if name.endswith("gate_up_proj") and fn is nvfp4 else 1
        rows = p.shape[1] // halves
        for e in range(p.shape[0]):
            for h in range(halves):
                p[e, h * rows:(h + 1) * rows] = fn(p[e, h * rows:(h + 1) * rows].clone())


@torch.no_grad()
def run(model, ids: list[int]):
    """Logits over the prompt, and per sparse layer the experts' inputs (to replay them) and the
    router's top-k gap (biased scores, k-th minus (k+1)-th) at every position."""
    captured, gaps = [], []

    def on_experts(module, args, output):
        captured.append((module, [a.clone() for a in args], output.clone()))

    def on_router(module, args, output):
        scores = torch.sigmoid(output[0]) + module.e_score_correction_bias
        top = scores.topk(SPEC.top_k + 1, dim=-1).values
        gaps.append((top[:, -2] - top[:, -1]).min().item())

    hooks = []
    for layer in model.model.language_model.layers:
        hooks.append(layer.mlp.experts.register_forward_hook(on_experts))
        hooks.append(layer.mlp.gate.register_forward_hook(on_router))
    logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].float().numpy()
    for h in hooks:
        h.remove()
    return logits, captured, gaps


@torch.no_grad()
def expert_errors(captured, fn) -> list[float]:
    """Relative RMS error of each layer's expert output with quantized weights, on the bf16 run's
    inputs (so that only this layer's quantization shows)."""
    errors = []
    for module, args, reference in captured:
        saved = {n: p.clone() for n, p in module.named_parameters()}
        quantize_experts(module, fn)
        out = module(*args)
        for n, p in module.named_parameters():
            p.copy_(saved[n])
        errors.append(float((out - reference).norm() / reference.norm()))
    return errors


def main() -> None:
    from transformers import MuseSparkForConditionalGeneration

    torch.manual_seed(SPEC.seed)
    model = MuseSparkForConditionalGeneration(build_config(SPEC))
    model.set_attn_implementation("eager")
    model.set_experts_implementation("eager")
    model = model.float()
    init_weights(model, SPEC.seed)
    source = Source(SPEC.seed + 2)
    losses = train(model, source)
    with torch.no_grad():  # the checkpoint is bf16; the references compute in f32 on those values
        for name, t in model.state_dict().items():
            if t.is_floating_point():
                t.copy_(t.to(torch.bfloat16).float())

    shutil.rmtree(OUT, ignore_errors=True)
    (OUT / "model").mkdir(parents=True)
    save_bf16(model, OUT / "model")
    prompt = source.sample(1, SPEC.prompt_len, torch.Generator().manual_seed(SPEC.seed + 3))[0].tolist()
    golden = {"prompt_ids": prompt, "vocab_size": SPEC.vocab_size, "num_positions": len(prompt),
              "train": {"steps": STEPS, "batch": BATCH, "seq": SEQ, "lr": LR, "final_loss": losses[-1],
                        "source_entropy": source.entropy()}}
    (OUT / "model" / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")

    base, captured, gaps = run(load(OUT / "model"), prompt)
    base.astype("<f4").tofile(OUT / "bf16.logits.f32")
    lp = torch.log_softmax(torch.from_numpy(base).double(), -1)
    target = torch.tensor(prompt[1:])
    summary = {"positions": len(prompt), "final_train_loss": losses[-1], "source_entropy": source.entropy(),
               "bf16": {"prompt_nll": float(-lp[:-1].gather(1, target[:, None]).mean()),
                        "mean_entropy": float(-(lp.exp() * lp).sum(-1).mean()),
                        "mean_top1_prob": float(lp.exp().max(-1).values.mean()),
                        "min_router_topk_gap_per_layer": gaps}}
    for fmt, fn in QDQ.items():
        m = load(OUT / "model")
        quantize_experts(m, fn)
        logits, _, qgaps = run(m, prompt)
        logits.astype("<f4").tofile(OUT / f"{fmt}.logits.f32")
        summary[fmt] = kl_top1(base, logits)
        summary[fmt]["expert_rel_rms_error_per_layer"] = expert_errors(captured, fn)
        summary[fmt]["min_router_topk_gap_per_layer"] = qgaps
        print(fmt, summary[fmt], flush=True)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary["bf16"], indent=1))


if __name__ == "__main__":
    main()
