#!/usr/bin/env python3
"""Trains a DSpark drafter (src/spec/dspark/checkpoint_layout.md) for SmolLM2-135M-Instruct with
the target frozen, on this machine's CPUs:

  data       prompts from text that ships here (Debian's common-licenses, Python's stdlib
             docstrings), continued by the target itself (self-distillation: temperature 0 and 1),
             with the target's tap hidden states captured; held-out prompts set aside
  train      the three-term loss of DSpark (0.1 CE + 0.9 L1 to the target distribution + 1.0
             confidence BCE to c* = 1 - 0.5 ||p_d - p_t||_1, position weights exp(-k/4)),
             the target's embedding and lm_head shared and frozen
  calibrate  Sequential Temperature Scaling of the confidence head on held-out prompts
  eval       tokens per cycle at T=0 with greedy verification on the other held-out prompts

Usage (the real run; `--smoke` shrinks everything to prove the script works):
  nice -n 10 .venv/bin/python scripts/train_dspark.py all --minutes 30
Output: tests/golden/dspark/smollm2/{config.json, model.safetensors, calibration.json, report.json}
"""

import argparse
import copy
import json
import math
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent / "dspark"))
import evaluate  # noqa: E402
import online  # noqa: E402
import target  # noqa: E402
from dspark_model import DSparkConfig, DSparkDrafter  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "dspark"
OUT = ROOT / "tests" / "golden" / "dspark" / "smollm2"
TAPS = [2, 10, 18, 24, 29]  # spread over the 30 layers; 29 = the final-normed hidden state
assert TAPS[-1] == 29  # training reads the target's distribution from the last tap
HELD_OUT = 32  # prompts: first half calibrates, second half measures


def drafter_config(tok) -> DSparkConfig:
    return DSparkConfig(
        hidden_size=576, num_hidden_layers=1, num_attention_heads=9, num_key_value_heads=3,
        head_dim=64, intermediate_size=1536, vocab_size=49152, block_size=7,
        target_layer_ids=TAPS, num_target_layers=30,
        # <empty_output>: a special token the chat model never emits; its frozen embedding row is
        # the mask embedding.
        mask_token_id=tok.convert_tokens_to_ids("<empty_output>"),
        markov_rank=32, markov_head_type="vanilla", rms_norm_eps=1e-5, rope_theta=100000.0,
        is_causal=False, target_model="HuggingFaceTB/SmolLM2-135M-Instruct (ember's "
        + target.GGUF + ")",
    )


# --- data -----------------------------------------------------------------------------------------

def make_data(a):
    torch.set_num_threads(a.threads)
    tok, model = target.load_target()
    # Continuations come from a bf16 copy (3x the fp32 matmul speed on this CPU's avx512_bf16),
    # and so do the training taps (a little feature noise for the drafter). Held-out taps are the
    # fp32 model's, the target the live measurement (online.py) decodes with.
    fast = copy.deepcopy(model).to(torch.bfloat16)
    texts = target.prompts()
    held, train = texts[:HELD_OUT], texts[HELD_OUT:]
    if a.smoke:
        held, train = held[:4], train[:8]
        a.gen_batch = 4
    t0 = time.time()
    data = {"train": [], "held_out": []}

    def add(split, m, temp, group):
        pairs = target.generate(tok, fast, group, a.max_new, temp, a.gen_batch, seed=len(data[split]))
        for prompt, cont in pairs:
            ids = torch.tensor(prompt + cont)
            tap = target.taps(m, ids[None], TAPS)[0].to(torch.bfloat16)
            data[split].append({"ids": ids, "prompt_len": len(prompt), "taps": tap, "temperature": temp})
        print(f"data: {split} T={temp}: {len(data[split])} sequences, "
              f"{sum(len(d['ids']) - d['prompt_len'] for d in data[split])} generated tokens, "
              f"{time.time() - t0:.0f}s", flush=True)

    add("held_out", model, 0.0, held)
    # Training prompts in batches of similar length, batch order shuffled, every 4th batch
    # sampled at T=1; generation stops at the --data-minutes deadline.
    train = sorted(train, key=len)
    batches = [train[i : i + a.gen_batch] for i in range(0, len(train), a.gen_batch)]
    random.Random(0).shuffle(batches)
    for i, group in enumerate(batches):
        if time.time() - t0 > a.data_minutes * 60:
            break
        add("train", fast, 1.0 if i % 4 == 3 else 0.0, group)
    if not data["train"]:
        raise SystemExit("data: no training sequences within --data-minutes")
    embed, _ = target.embed_and_head(model)
    CACHE.mkdir(parents=True, exist_ok=True)
    torch.save({"data": data, "embed": embed.clone(), "final_norm": model.model.norm.weight.detach().clone(),
                "mask_token_id": drafter_config(tok).mask_token_id,
                "config": drafter_config(tok)}, CACHE / ("data_smoke.pt" if a.smoke else "data.pt"))


def loss_start(ids: torch.Tensor) -> int:
    """First position after the (shared, fixed) system turn: where the user's turn begins."""
    starts = (ids == 1).nonzero().flatten().tolist()  # <|im_start|>
    return starts[1] if len(starts) > 1 else 0


def extend_data(a):
    """Adds prompt-only sequences (the target's taps and distributions over the chat-formatted
    prompt text, no generation) for the training prompts that got no continuation, within
    --text-minutes; and marks every training sequence's loss start at the user turn, so prompt
    positions train too (the L1 and confidence terms use the target's own distribution there)."""
    torch.set_num_threads(a.threads)
    blob = load_data(a)
    data = blob["data"]
    tok, model = target.load_target()
    fast = model.to(torch.bfloat16)
    texts = target.prompts()[HELD_OUT:]
    train = sorted(texts, key=len)
    batches = [train[i : i + a.gen_batch] for i in range(0, len(train), a.gen_batch)]
    random.Random(0).shuffle(batches)
    done = math.ceil(len(data["train"]) / a.gen_batch)  # make_data used the first `done` batches
    rest = [t for b in batches[done:] for t in b]
    random.Random(1).shuffle(rest)
    t0 = time.time()
    added = 0
    for t in rest:
        if time.time() - t0 > a.text_minutes * 60:
            break
        enc = tok.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True,
                                      return_tensors="pt", return_dict=True)
        ids = enc["input_ids"][0]
        tap = target.taps(fast, ids[None], TAPS)[0].to(torch.bfloat16)
        data["train"].append({"ids": ids, "prompt_len": len(ids), "taps": tap, "temperature": None})
        added += 1
    for seq in data["train"]:
        seq["loss_start"] = loss_start(seq["ids"])
    n_tok = sum(len(d["ids"]) - d["loss_start"] for d in data["train"])
    print(f"extend: +{added} prompt-only sequences, {len(data['train'])} training sequences, "
          f"{n_tok} training positions, {time.time() - t0:.0f}s", flush=True)
    torch.save(blob, CACHE / ("data_smoke.pt" if a.smoke else "data.pt"))


def load_data(a):
    return torch.load(CACHE / ("data_smoke.pt" if a.smoke else "data.pt"), weights_only=False)


# --- training -------------------------------------------------------------------------------------

def init_(model: DSparkDrafter, seed: int, final_norm: torch.Tensor):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "norm.weight":
                # It feeds the target's lm_head as the target's final norm does; a tenth of that
                # scale keeps the first logits soft (the tied lm_head otherwise scores the input
                # token's own row so high that the L1 term has no gradient).
                p.copy_(0.1 * final_norm)
            elif name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name.startswith(("markov_head.markov_w2", "confidence_head")):
                p.zero_()  # start as the plain backbone, c = 0.5
            else:
                p.normal_(0.0, 0.02, generator=g)


def dspark_loss(model, lm_head_bf16, embed, seq, n_anchors: int, gamma_decay: float = 4.0):
    """The three-term loss on n_anchors random blocks of one sequence (DeepSpec loss.py's terms)."""
    c = model.config
    g = c.block_size
    ids, p, tap = seq["ids"], seq["prompt_len"], seq["taps"].float()
    t_len = ids.shape[0]
    # Block slot 0 predicts token s + 1: from the user turn on (prompt positions too, see
    # extend_data), else from the continuation.
    lo, hi = max(seq.get("loss_start", p - 1), 0), t_len - 2
    if hi < lo:
        return None
    cand = list(range(lo, hi + 1))
    anchors = torch.tensor(sorted(random.sample(cand, min(n_anchors, len(cand)))))
    ctx = model.context_states(tap)
    h = model.backbone(ctx, model.block_embeds(embed, ids[anchors]), anchors)  # [N, g, d]
    lab_pos = anchors[:, None] + torch.arange(1, g + 1)  # token each slot predicts
    valid = lab_pos <= t_len - 1
    lab_pos_c = lab_pos.clamp(max=t_len - 1)
    labels = ids[lab_pos_c]
    prev = torch.cat([ids[anchors][:, None], labels[:, :-1]], 1)  # teacher-forced x_{k-1}
    # The two [blocks, V] products run in bf16 (avx512_bf16: 3x the fp32 speed here); softmaxes
    # and losses stay fp32. The reference module (and evaluation) computes base logits in fp32.
    base = c.logit_scale * (h.to(torch.bfloat16) @ lm_head_bf16.T).float()
    logits, z = model.teacher_forced(h, base, prev)
    with torch.no_grad():  # the target's distribution at the position before each label
        final = seq["taps"][lab_pos_c - 1, -c.hidden_size:]  # tap 29: the final-normed hidden
        p_t = torch.softmax((final.to(torch.bfloat16) @ lm_head_bf16.T).float(), -1)
    w = valid.float() * torch.exp(-torch.arange(g).float() / gamma_decay)
    logp = torch.log_softmax(logits, -1)
    ce = -(logp.gather(-1, labels[..., None])[..., 0])
    l1 = (logp.exp() - p_t).abs().sum(-1)
    c_star = (1.0 - 0.5 * l1).clamp(0.0, 1.0).detach()
    bce = F.binary_cross_entropy_with_logits(z, c_star, reduction="none")
    den = w.sum() + 1e-6
    terms = {k: (v * w).sum() / den for k, v in (("ce", ce), ("l1", l1), ("conf", bce))}
    loss = 0.1 * terms["ce"] + 0.9 * terms["l1"] + 1.0 * terms["conf"]
    with torch.no_grad():
        acc = ((logits.argmax(-1) == labels).float() * valid).sum() / valid.sum()
    return loss, {k: float(v.detach()) for k, v in terms.items()} | {"top1": float(acc)}


def train(a):
    torch.set_num_threads(a.threads)
    random.seed(0)
    torch.manual_seed(0)
    blob = load_data(a)
    embed = blob["embed"].float()
    lm_head_bf16 = embed.to(torch.bfloat16)  # SmolLM2 ties its lm_head to the embedding
    model = DSparkDrafter(blob["config"])
    init_(model, 0, blob["final_norm"].float())
    params = [p for p in model.parameters() if p.requires_grad]
    print(f"train: {sum(p.numel() for p in params) / 1e6:.2f}M drafter parameters, "
          f"{len(blob['data']['train'])} sequences", flush=True)
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0, betas=(0.9, 0.95))
    seqs = blob["data"]["train"]
    budget = a.minutes * 60.0
    t0 = time.time()
    step, log = 0, []
    while True:
        elapsed = time.time() - t0
        if (a.steps and step >= a.steps) or (not a.steps and elapsed >= budget):
            break
        frac = elapsed / budget if not a.steps else step / a.steps
        lr = a.lr * min(1.0, (step + 1) / a.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)
        stats = []
        for seq in random.sample(seqs, min(a.seqs_per_step, len(seqs))):
            out = dspark_loss(model, lm_head_bf16, embed, seq, a.anchors)
            if out is None:
                continue
            (out[0] / a.seqs_per_step).backward()
            stats.append(out[1])
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        if stats and (step % a.log_every == 0 or step == 1):
            mean = {k: sum(s[k] for s in stats) / len(stats) for k in stats[0]}
            log.append({"step": step, "seconds": round(time.time() - t0), "lr": lr} | mean)
            print(f"step {step} {time.time() - t0:.0f}s lr {lr:.2e} " +
                  " ".join(f"{k} {v:.3f}" for k, v in mean.items()), flush=True)
    model.eval()
    out_dir = Path(a.out)
    model.save(out_dir)
    (out_dir / "train_log.json").write_text(json.dumps(
        {"steps": step, "seconds": round(time.time() - t0), "args": vars(a), "log": log}, indent=1) + "\n")
    print(f"train: {step} steps in {time.time() - t0:.0f}s -> {out_dir}", flush=True)


# --- calibration and evaluation -------------------------------------------------------------------

def calibrate_and_eval(a):
    torch.set_num_threads(a.threads)
    blob = load_data(a)
    embed = blob["embed"].float()
    model = DSparkDrafter.load(a.out).eval()
    held = blob["data"]["held_out"]
    calib, test = held[: len(held) // 2], held[len(held) // 2 :]
    t0 = time.time()
    z_c, y_c = evaluate.survival_samples(model, embed, embed, calib)
    temps = evaluate.sequential_temperature_scaling(z_c, y_c)
    z_t, y_t = evaluate.survival_samples(model, embed, embed, test)
    model.save(a.out, calibration=temps)
    emitted = cycles = 0
    g = model.config.block_size
    tried, accepted = [0] * g, [0] * g
    for seq in test:
        e, c, t, acc = evaluate.walk(model, embed, embed, seq)
        emitted, cycles = emitted + e, cycles + c
        tried = [x + y for x, y in zip(tried, t)]
        accepted = [x + y for x, y in zip(accepted, acc)]
    online_results = online_eval(a, model, embed, test)
    report = {
        "target": target.GGUF,
        "held_out_prompts": {"calibration": len(calib), "test": len(test)},
        "tokens_per_cycle_T0": emitted / max(cycles, 1),
        "cycles": cycles,
        "acceptance_per_position_T0": [x / y if y else None for x, y in zip(accepted, tried)],
        "online": online_results,
        "sts_temperatures": temps,
        "calibration_split": evaluate.calibration_report(z_c, y_c, temps),
        "test_split": evaluate.calibration_report(z_t, y_t, temps),
        "seconds": round(time.time() - t0),
    }
    (Path(a.out) / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: report[k] for k in ("tokens_per_cycle_T0", "acceptance_per_position_T0",
                                             "sts_temperatures")}, indent=1))
    print("ECE test before/after:", report["test_split"]["ece_before"], report["test_split"]["ece_after"])
    print(json.dumps(online_results, indent=1))


def online_eval(a, drafter, embed, test):
    """Live speculative decoding of the test prompts at T=0 and T=1 (scripts/dspark/online.py).
    At T=0 the output must be the target's own greedy continuation (lossless)."""
    tok, tgt = target.load_target()
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    g = drafter.config.block_size
    results = {}
    for temp in (0.0, 1.0):
        gen = torch.Generator().manual_seed(1)
        emitted = cycles = same = 0
        tried, accepted = [0] * g, [0] * g
        prompts = test[: a.online_prompts]
        for seq in prompts:
            prompt = seq["ids"][: seq["prompt_len"]].tolist()
            out, c, t, acc = online.speculate(drafter, tgt, embed, prompt, a.max_new, temp, eos, gen)
            emitted, cycles = emitted + len(out) - 1, cycles + c
            tried = [x + y for x, y in zip(tried, t)]
            accepted = [x + y for x, y in zip(accepted, acc)]
            same += int(out == seq["ids"][seq["prompt_len"]:].tolist())
        results[f"T{temp:g}"] = {
            "tokens_per_cycle": emitted / max(cycles, 1), "cycles": cycles,
            "acceptance_per_position": [x / y if y else None for x, y in zip(accepted, tried)],
        }
        if temp == 0:
            results["T0"]["outputs_equal_to_target_greedy"] = f"{same}/{len(prompts)}"
        results[f"T{temp:g}"]["prompts"] = len(prompts)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=["data", "extend", "train", "calibrate", "all"])
    ap.add_argument("--smoke", action="store_true", help="a few prompts and steps")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-minutes", type=float, default=8.0, help="generation budget")
    ap.add_argument("--text-minutes", type=float, default=3.0, help="prompt-only taps budget")
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--gen-batch", type=int, default=32)
    ap.add_argument("--minutes", type=float, default=30.0, help="training wall-clock budget")
    ap.add_argument("--steps", type=int, default=0, help="fixed step count instead of --minutes")
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--seqs-per-step", type=int, default=4)
    ap.add_argument("--anchors", type=int, default=16, help="blocks per sequence per step")
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--online-prompts", type=int, default=16, help="test prompts decoded live")
    a = ap.parse_args()
    if a.smoke:
        a.out = str(CACHE / "smoke_out")
        a.max_new, a.steps, a.log_every = min(a.max_new, 24), a.steps or 3, 1
    if a.stage in ("data", "all"):
        make_data(a)
    if a.stage in ("extend", "all"):
        extend_data(a)
    if a.stage in ("train", "all"):
        train(a)
    if a.stage in ("calibrate", "all"):
        calibrate_and_eval(a)


if __name__ == "__main__":
    main()
