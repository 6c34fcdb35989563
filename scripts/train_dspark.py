#!/usr/bin/env python3
"""Trains a DSpark drafter (src/spec/dspark/checkpoint_layout.md) for a frozen target on this
machine's CPUs: SmolLM2-135M-Instruct (--target smollm2, ember's Q4_1 GGUF through transformers) or
the tiny trained Muse Spark of tests/golden/quant/accuracy (--target muse_tiny, scripts/dspark/muse_tiny.py).

  data       smollm2: prompts from text that ships here (Debian's common-licenses, Python's stdlib and
             numpy docstrings, each text under two instruction templates; for training also the
             virtualenv's packages' docstrings and every class's method docstrings, never a held-out
             or benchmark text), continued by the target
             served by ember itself (`ember generate --jsonl` on the Q4_1 GGUF; self-distillation:
             temperature 0, every 4th batch also at 1), with the target's tap hidden states captured
             by transformers from the same GGUF; held-out texts set aside. --resume adds continuations for the
             prompts an earlier run did not reach. muse_tiny: sequences of the Markov source the
             model learned, continued by it.
  extend     (smollm2) prompt-only sequences for the prompts generation did not reach
  grow       (smollm2) a shard of more training sequences (.cache/dspark/data.more.pt) from a second
             text pool (target.MORE_MODULES' docstrings, none in the first pool, held out or
             benchmarked), continued as `data` does, within --data-minutes, resuming where it
             stopped; `train` and `vocab` read the data file and its shards
  train      the three terms of DSpark's loss (CE + L1 to the target distribution + confidence BCE to
             c* = 1 - 0.5 ||p_d - p_t||_1, position weights exp(-k/4)); the target's embedding and
             lm_head shared and frozen. Weights: --ce 1.0 (DeepSpec: 0.1 over 10 epochs of a large
             corpus; one CPU hour learns the argmax far sooner with full weight), --l1 0.9, --conf 1.0.
             The CE label is the target's argmax after the prefix (--ce-target argmax, what greedy
             verification accepts) unless --ce-target data. p_t is each position's top 64 (add_targets).
             p_d is the softmax over the draft vocabulary, draft_vocab.json: the training answers'
             tokens, most frequent first (what the engine drafts from, FR-Spec), so the lm_head
             product covers those rows only (SmolLM2: 18.4k of 49k). bf16
             autocast (--fp32 to turn it off); --layers sets the drafter's depth; held-out loss and
             top-1 every --eval-every steps.
  calibrate  Sequential Temperature Scaling of the confidence head on half the held-out prompts
  eval       tokens per cycle at T=0 with greedy verification on the other half (and, for smollm2,
             live decoding at T=0 and T=1); eval_prompts.json keeps those prompts for the C++ test

Usage (the real runs; `--smoke` shrinks everything to prove the script works):
  .venv/bin/python scripts/train_dspark.py data --data-minutes 27 [--resume]
      (the committed drafter's data: that, then `data --resume --data-minutes 40`: 87 of the 120
      prompt batches, 13,788 sequences, 1.28M generated tokens, a 14 GB file)
  .venv/bin/python scripts/train_dspark.py train --minutes 45 --layers 2 --anchors 24 --init-from-target 28,29
  .venv/bin/python scripts/train_dspark.py train --minutes 45 --anchors 24 --init-from tests/golden/dspark/smollm2
      (a further run from the committed drafter, then calibrate. The committed drafter is session
      26's 45 minutes (above), then session 33's `data --data-minutes 21` (50 prompt batches, 6,774
      sequences: the first of the batches above) and `train --minutes 35 --anchors 24 --lr 5e-4
      --init-from <session 26's>` (7,623 steps on a Zen 5 EPYC, held-out first-position top-1
      0.55 -> 0.61, tokens per cycle at T=0 1.98 -> 2.11), then session 34's `data --resume
      --data-minutes 30` (all 120 batches: 15,734 sequences, 1.46M generated tokens, a 16 GB
      file) and `train --minutes 50 --anchors 24 --lr 5e-4 --init-from <session 33's>` (8,365
      steps, first-position top-1 0.61 -> 0.65, tokens per cycle at T=0 2.11 -> 2.35), then session
      40's `grow --data-minutes 45` (all 51 batches of the second pool, 6,440 prompts: 7,976
      sequences, 746k generated tokens, an 8.4 GB shard, 22 + 6 minutes) and `train --minutes 50
      --anchors 24 --lr 5e-4 --init-from <session 34's>` (8,682 steps, held-out CE 2.19 -> 2.08,
      first-position top-1 0.65 -> 0.68, tokens per cycle at T=0 2.35 -> 2.47))
  .venv/bin/python scripts/train_dspark.py grow --data-minutes 45
  .venv/bin/python scripts/train_dspark.py calibrate
  .venv/bin/python scripts/train_dspark.py all --target muse_tiny --minutes 8
  .venv/bin/python scripts/train_dspark.py vocab   (draft_vocab.json alone, from the data file)
Output: tests/golden/dspark/<target>/{config.json, model.safetensors, calibration.json, report.json,
train_log.json, eval_prompts.json, draft_vocab.json}
"""

import argparse
import copy
import dataclasses
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent / "dspark"))
import evaluate  # noqa: E402
import make_bench_prompts  # noqa: E402
import muse_tiny  # noqa: E402
import online  # noqa: E402
import target  # noqa: E402
from dspark_model import DSparkConfig, DSparkDrafter  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "dspark"
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
    held, train = training_prompts()
    if a.smoke:
        held, train = held[:4], train[:8]
        a.gen_batch = 4
    t0 = time.time()
    data = {"train": [], "held_out": []}
    done = 0
    if a.resume:  # more continuations for the prompts the last run did not reach
        blob = load_data(a)
        data, done = blob["data"], batches_done(blob, a.gen_batch)

    def add(split, m, temp, group):
        data[split] += continued_sequences(tok, m, group, temp, seed=len(data[split]), a=a)
        print(f"data: {split} T={temp}: {len(data[split])} sequences, "
              f"{sum(len(d['ids']) - d['prompt_len'] for d in data[split])} generated tokens, "
              f"{time.time() - t0:.0f}s", flush=True)

    if not a.resume:
        add("held_out", model, 0.0, held)
    # Training prompts in batches of similar length, batch order shuffled, each answered greedily
    # and every 4th batch also sampled at T=1; generation stops at the --data-minutes deadline.
    for i, group in enumerate(train_batches(train, a.gen_batch)):
        if i < done:
            continue
        if time.time() - t0 > a.data_minutes * 60:
            break
        add("train", fast, 0.0, group)
        if i % 4 == 3:
            add("train", fast, 1.0, group)
        done = i + 1
    if not data["train"]:
        raise SystemExit("data: no training sequences within --data-minutes")
    embed, _ = target.embed_and_head(model)
    CACHE.mkdir(parents=True, exist_ok=True)
    blob = {"data": data, "embed": embed.clone(), "final_norm": model.model.norm.weight.detach().clone(),
            "mask_token_id": drafter_config(tok).mask_token_id, "batches_done": done,
            "config": drafter_config(tok)}
    add_targets(blob, a.threads)  # here, so that training need not write the (large) file again
    save_data(blob, a)


def continued_sequences(tok, model, prompts: list[str], temperature: float, seed: int, a) -> list[dict]:
    """The prompts continued by ember (self-distillation), with the target's taps of every position."""
    pairs = target.generate_with_ember(tok, prompts, a.max_new, temperature, seed=seed, ember=a.ember)
    seqs = [torch.tensor(prompt + cont) for prompt, cont in pairs]
    return [{"ids": ids, "prompt_len": len(prompt), "taps": tap, "temperature": temperature,
             "loss_start": loss_start(ids)}
            for (prompt, _), ids, tap in zip(pairs, seqs, target.taps_batched(model, seqs, TAPS))]


def grow_data(a):
    """A data shard from the second text pool (target.more_prompts): its prompts in batches of
    similar length, each continued greedily and every 4th also sampled at T=1, within
    --data-minutes, resuming where the shard stops. The shard holds training sequences (with their
    target distributions) only; load_data(a, shards=True) adds them to the base file's."""
    torch.set_num_threads(a.threads)
    base = load_data(a)
    tok, model = target.load_target()
    fast = copy.deepcopy(model).to(torch.bfloat16)  # as make_data: continuations and taps in bf16
    del model
    held, _ = training_prompts()
    bench = [d.split(": ", 1)[1] for d in target.docstrings(make_bench_prompts.MODULES)]
    prompts = target.more_prompts(exclude=held + bench)
    if a.smoke:
        prompts, a.gen_batch = prompts[:8], 4
    path = shard_file(a, "more")
    shard = torch.load(path, weights_only=False, mmap=True) if path.exists() else {"train": [], "batches_done": 0}
    batches = train_batches(prompts, a.gen_batch)
    print(f"grow: {len(prompts)} prompts in {len(batches)} batches, {shard['batches_done']} done", flush=True)
    t0 = time.time()
    for i, group in enumerate(batches[shard["batches_done"]:], start=shard["batches_done"]):
        if time.time() - t0 > a.data_minutes * 60:
            break
        for temp in (0.0, 1.0) if i % 4 == 3 else (0.0,):
            shard["train"] += continued_sequences(tok, fast, group, temp, seed=len(shard["train"]), a=a)
        shard["batches_done"] = i + 1
        print(f"grow: batch {i + 1}/{len(batches)}, {len(shard['train'])} sequences, "
              f"{sum(len(d['ids']) - d['prompt_len'] for d in shard['train'])} generated tokens, "
              f"{time.time() - t0:.0f}s", flush=True)
    # Targets need the base file's embedding and config; computed here so training never rewrites a file.
    add_targets({"data": {"train": shard["train"], "held_out": []}, "embed": base["embed"],
                 "config": base["config"]}, a.threads)
    tmp = path.with_suffix(".tmp")
    torch.save(shard, tmp)
    os.replace(tmp, path)


def training_prompts() -> tuple[list[str], list[str]]:
    """(held_out, train): the base pool's held-out prompts, and training prompts from it plus the
    extra texts, none of which is a benchmark prompt's text (bench/datasets/dspark_chat.jsonl)."""
    bench = target.docstrings(make_bench_prompts.MODULES)
    return target.prompts(held_out=HELD_OUT, extra=True, exclude=tuple(d.split(": ", 1)[1] for d in bench))


def train_batches(train: list[str], gen_batch: int) -> list[list[str]]:
    """Training prompts in batches of similar length, in a fixed shuffled order."""
    train = sorted(train, key=len)
    batches = [train[i : i + gen_batch] for i in range(0, len(train), gen_batch)]
    random.Random(0).shuffle(batches)
    return batches


def batches_done(blob, gen_batch: int) -> int:
    """How many of train_batches' batches have continuations (older data files lack the count)."""
    if "batches_done" in blob:
        return blob["batches_done"]
    generated = sum(1 for s in blob["data"]["train"] if s.get("temperature") is not None)
    return math.ceil(generated / gen_batch)


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
    _, texts = training_prompts()
    rest = [t for b in train_batches(texts, a.gen_batch)[batches_done(blob, a.gen_batch):] for t in b]
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
    save_data(blob, a)


def data_file(a) -> Path:
    name = "data" if a.target == "smollm2" else f"{a.target}_data"
    return CACHE / (f"{name}_smoke.pt" if a.smoke else f"{name}.pt")


def shard_file(a, name: str) -> Path:
    """A shard of training sequences beside the data file (grow_data writes it)."""
    return data_file(a).with_suffix(f".{name}.pt")


def load_data(a, shards: bool = False):
    """The data file, memory-mapped (the taps of all training prompts, ~16 GB in bf16, need not fit
    in memory); with `shards`, the training sequences of its shards added (such a blob is never saved)."""
    blob = torch.load(data_file(a), weights_only=False, mmap=True)
    if shards:
        for path in sorted(data_file(a).parent.glob(data_file(a).stem + ".*.pt")):
            more = torch.load(path, weights_only=False, mmap=True)["train"]
            blob["data"]["train"] = blob["data"]["train"] + more
            blob.setdefault("shards", []).append(f"{path.name} ({len(more)} sequences)")
    return blob


def save_data(blob, a):
    """Writes beside the data file and renames over it: the blob's tensors may be mapped from the
    old file, which truncating it in place would pull out from under them."""
    if "shards" in blob:
        raise RuntimeError("save_data: this blob holds its shards' sequences too; save the data file alone")
    path = data_file(a)
    tmp = path.with_suffix(".tmp")
    torch.save(blob, tmp)
    os.replace(tmp, path)


def make_muse_tiny_data(a):
    """Data for the tiny Muse target: source prompts continued by the target (every 4th batch at
    T=1), taps from the same fp32 model (it is tiny), the whole sequence trainable (the prompts
    are the target's own language)."""
    torch.set_num_threads(a.threads)
    _, model = muse_tiny.load_target()
    n_train = 16 if a.smoke else a.muse_sequences
    held, train = muse_tiny.prompts(HELD_OUT, n_train)
    t0 = time.time()
    data = {"train": [], "held_out": []}
    for split, group_prompts in (("held_out", held), ("train", train)):
        for i in range(0, len(group_prompts), a.gen_batch):
            temp = 1.0 if split == "train" and (i // a.gen_batch) % 4 == 3 else 0.0
            pairs = muse_tiny.generate(model, group_prompts[i : i + a.gen_batch], a.max_new, temp, seed=i)
            ids = torch.tensor([p + c for p, c in pairs])
            tap = muse_tiny.taps(model, ids, muse_tiny.TAPS).to(torch.bfloat16)
            for r, (p, _) in enumerate(pairs):
                data[split].append({"ids": ids[r], "prompt_len": len(p), "taps": tap[r], "temperature": temp,
                                    "loss_start": 0})
        print(f"data: {split}: {len(data[split])} sequences, {time.time() - t0:.0f}s", flush=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    save_data({"data": data, "config": muse_tiny.drafter_config(), **muse_tiny.weights(model)}, a)


# --- training -------------------------------------------------------------------------------------

def init_(model: DSparkDrafter, seed: int, final_norm: torch.Tensor):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "norm.weight":
                # It feeds the target's lm_head as the target's final norm does. At this scale the
                # tied lm_head first scores the block's input token highest, so the L1 term starts
                # with little gradient; the CE term (weight --ce) carries the first steps.
                p.copy_(final_norm)
            elif name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name.startswith(("markov_head.markov_w2", "confidence_head")):
                p.zero_()  # start as the plain backbone, c = 0.5
            else:
                p.normal_(0.0, 0.02, generator=g)


def init_from_target(model: DSparkDrafter, layer_ids: list[int]):
    """Starts drafter layer i as the target's layer layer_ids[i] (attention, MLP and both norms;
    the drafter's q_norm / k_norm, which a Llama layer lacks, stay 1). SmolLM2's drafter has its
    target's layer shape, so a trained layer replaces a random one: the backbone starts from
    attention and MLP weights that already read and write the target's residual stream. The
    weights come from the target as transformers loads it (GGUF q/k rows already in HF order)."""
    _, target_model = target.load_target()
    names = ("input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight",
             "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
             "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")
    drafter = dict(model.named_parameters())
    with torch.no_grad():
        for i, src in enumerate(layer_ids):
            theirs = target_model.model.layers[src].state_dict()
            for n in names:
                drafter[f"layers.{i}.{n}"].copy_(theirs[n])
    del target_model


def init_from_checkpoint(model: DSparkDrafter, directory: Path, scale: torch.Tensor):
    """Continues an earlier run: its weights (bf16 in the checkpoint, the confidence head fp32), with
    the tap scale that run folded into fc taken back out (training feeds fc scaled taps). The
    optimizer's moments and the learning-rate schedule start afresh (warm-up, then the anneal)."""
    saved = DSparkDrafter.load(directory)
    want, got = model.config.to_json(), saved.config.to_json()
    differ = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    if differ:
        raise SystemExit(f"--init-from {directory}: its config differs from this run's in {', '.join(differ)}")
    with torch.no_grad():
        model.load_state_dict(saved.state_dict(), strict=True)
        model.fc.weight.div_(scale[None, :])
    print(f"train: starting from {directory}", flush=True)


def sample_anchors(seq, n_anchors: int) -> torch.Tensor | None:
    """Block anchors s (slot 0 predicts token s + 1) from the user turn on. In a sequence with a
    continuation, three quarters come from the answer, where the drafter will draft; the rest
    from the prompt text, which only adds variety of context (prompt-only sequences: all)."""
    ids, p = seq["ids"], seq["prompt_len"]
    lo, hi = max(seq.get("loss_start", p - 1), 0), ids.shape[0] - 2
    if hi < lo:
        return None
    answer = list(range(max(p - 1, lo), hi + 1))
    prompt = list(range(lo, max(p - 1, lo)))
    n_answer = min(len(answer), n_anchors if not prompt else (3 * n_anchors + 3) // 4)
    picked = random.sample(answer, n_answer) if answer else []
    picked += random.sample(prompt, min(len(prompt), n_anchors - len(picked)))
    return torch.tensor(sorted(picked))


class DraftVocab:
    """The ids the drafter drafts from (draft_vocab.json, the engine's default draft vocabulary),
    for training over them only: p_d is the softmax over these ids, as the engine computes it, and
    the lm_head product costs len(ids) / vocab of the full one."""

    def __init__(self, ids: list[int], vocab_size: int):
        self.ids = torch.tensor(sorted(ids))
        self.index = torch.full((vocab_size,), -1, dtype=torch.long)  # token id -> row, -1 outside
        self.index[self.ids] = torch.arange(self.ids.numel())


def dspark_loss(model, lm_head_bf16, embed, seq, n_anchors: int, weights, tap_scale, ce_argmax: bool,
                vocab: DraftVocab, gamma_decay: float = 4.0):
    """The three-term loss on n_anchors random blocks of one sequence (DeepSpec loss.py's terms),
    with p_d over the draft vocabulary (lm_head_bf16 holds its rows). The target's distribution
    comes from the sequence's precomputed top-k (add_targets): the L1 term sums |p_d - p_t| over
    those k tokens (p_d = 0 outside the draft vocabulary) plus the difference of the two tails'
    masses, a lower bound of the full L1 that is exact up to how each tail spreads (the top 64
    hold nearly all of a 135M model's mass). A CE label outside the draft vocabulary cannot be
    drafted and does not count."""
    c = model.config
    g = c.block_size
    ids = seq["ids"]
    t_len = ids.shape[0]
    anchors = sample_anchors(seq, n_anchors)
    if anchors is None:
        return None
    ctx = model.context_states(seq["taps"].float() * tap_scale)
    h = model.backbone(ctx, model.block_embeds(embed, ids[anchors]), anchors)  # [N, g, d]
    lab_pos = anchors[:, None] + torch.arange(1, g + 1)  # token each slot predicts
    valid = lab_pos <= t_len - 1
    lab_pos_c = lab_pos.clamp(max=t_len - 1)
    labels = ids[lab_pos_c]
    prev = torch.cat([ids[anchors][:, None], labels[:, :-1]], 1)  # teacher-forced x_{k-1}
    # The [blocks, V] product runs in bf16 (avx512_bf16: 3x the fp32 speed here); softmax and
    # losses stay fp32. The reference module (and evaluation) computes base logits in fp32.
    base = c.logit_scale * (h.to(torch.bfloat16) @ lm_head_bf16.T).float()
    logits, z = model.teacher_forced(h, base, prev, vocab.ids)
    top_idx = seq["p_top_idx"][lab_pos_c - 1].long()  # the target's distribution before each label
    top_p = seq["p_top"][lab_pos_c - 1].float()
    w = valid.float() * torch.exp(-torch.arange(g).float() / gamma_decay)
    logp = torch.log_softmax(logits, -1)
    # x*: the data's token, or (ce_argmax) the target's own greedy choice after the same prefix,
    # which is what greedy verification accepts; on greedy continuations the two agree.
    x_star = top_idx[..., 0] if ce_argmax else labels
    x_row = vocab.index[x_star]
    draftable = x_row >= 0
    ce = -(logp.gather(-1, x_row.clamp(min=0)[..., None])[..., 0]) * draftable
    top_row = vocab.index[top_idx]
    pd_top = logp.gather(-1, top_row.clamp(min=0)).exp() * (top_row >= 0)
    l1 = (pd_top - top_p).abs().sum(-1) + ((1 - pd_top.sum(-1)) - (1 - top_p.sum(-1))).abs()
    c_star = (1.0 - 0.5 * l1).clamp(0.0, 1.0).detach()
    bce = F.binary_cross_entropy_with_logits(z, c_star, reduction="none")
    den = w.sum() + 1e-6
    terms = {k: (v * w).sum() / den for k, v in (("ce", ce), ("l1", l1), ("conf", bce))}
    loss = weights[0] * terms["ce"] + weights[1] * terms["l1"] + weights[2] * terms["conf"]
    with torch.no_grad():
        hit = vocab.ids[logits.argmax(-1)] == x_star
        acc = (hit.float() * valid).sum() / valid.sum()
        acc0 = hit[:, 0].float().mean()
    return loss, {k: float(v.detach()) for k, v in terms.items()} | {"top1": float(acc), "top1_0": float(acc0)}


TOP_K = 64


@torch.no_grad()
def add_targets(blob, threads: int):
    """The target's next-token distribution at every position of every sequence, as its top
    TOP_K (ids and probabilities), from tap 29 (the final-normed state) and the tied lm_head:
    computed once here instead of per block in every step."""
    torch.set_num_threads(threads)
    lm = blob.get("lm_head", blob["embed"]).to(torch.bfloat16)
    mult, cap = blob.get("logit_multiplier", 1.0), blob.get("softcap")
    d = blob["config"].hidden_size
    t0 = time.time()
    added = 0
    for split in ("train", "held_out"):
        for seq in blob["data"][split]:
            if "p_top" in seq:
                continue
            added += 1
            final = seq["taps"][:, -d:].to(torch.bfloat16)
            logits = mult * (final @ lm.T).float()
            if cap:
                logits = cap * torch.tanh(logits / cap)
            probs = torch.softmax(logits, -1)
            top = probs.topk(TOP_K, -1)
            seq["p_top"], seq["p_top_idx"] = top.values.to(torch.float16), top.indices.to(torch.int32)
    if added:
        print(f"targets: top-{TOP_K} target distributions of {added} sequences in {time.time() - t0:.0f}s", flush=True)
    return added


def tap_scale(seqs, n: int = 400) -> torch.Tensor:
    """Per-feature 1/RMS of the concatenated taps over a sample of training positions. Mid-depth
    taps carry massive activations (|x| ~300 on two dimensions at layer 24 against an RMS of
    ~19, while the final-normed tap's RMS is ~2); scaling every feature to unit RMS lets fc learn
    from all of them at one learning rate. Folded into fc.weight at save time, so the checkpoint
    takes the raw taps."""
    sample = torch.cat([s["taps"].float() for s in random.Random(0).sample(seqs, min(n, len(seqs)))])
    return sample.pow(2).mean(0).sqrt().clamp(min=1e-3).reciprocal()


def train(a):
    torch.set_num_threads(a.threads)
    random.seed(0)
    torch.manual_seed(0)
    blob = load_data(a)
    if add_targets(blob, a.threads):
        save_data(blob, a)
    blob = load_data(a, shards=True)
    if blob.get("shards"):
        print(f"train: with the shards {', '.join(blob['shards'])}", flush=True)
    embed = blob["embed"].float()
    config = blob["config"]
    if a.init_from and not a.layers:  # the depth of the run it continues
        a.layers = json.loads((Path(a.init_from) / "config.json").read_text())["num_hidden_layers"]
    if a.layers:
        config = dataclasses.replace(config, num_hidden_layers=a.layers, layer_types=[])
    ranked, counts = answer_token_ranking(blob)
    vocab = DraftVocab(ranked, config.vocab_size)
    # SmolLM2 ties its lm_head to the embedding; the tiny Muse ships its own.
    lm_head_bf16 = blob.get("lm_head", blob["embed"])[vocab.ids].to(torch.bfloat16)
    model = DSparkDrafter(config)
    scale = tap_scale(blob["data"]["train"])
    weights = (a.ce, a.l1, a.conf)
    init_(model, 0, blob["final_norm"].float())
    if a.init_from:
        init_from_checkpoint(model, Path(a.init_from), scale)
    elif a.init_from_target:
        if a.target != "smollm2":
            raise SystemExit("--init-from-target reads SmolLM2's layers (--target smollm2)")
        layer_ids = [int(x) for x in a.init_from_target.split(",")]
        if len(layer_ids) != config.num_hidden_layers:
            raise SystemExit(f"--init-from-target names {len(layer_ids)} layers; the drafter has {config.num_hidden_layers}")
        init_from_target(model, layer_ids)
    params = [p for p in model.parameters() if p.requires_grad]
    print(f"train: {sum(p.numel() for p in params) / 1e6:.2f}M drafter parameters, {config.num_hidden_layers} "
          f"layers, {len(blob['data']['train'])} sequences, draft vocabulary {vocab.ids.numel()}", flush=True)
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0, betas=(0.9, 0.95))
    seqs = blob["data"]["train"]
    for seq in seqs:  # anchors from the user turn on (extend sets it too)
        seq.setdefault("loss_start", loss_start(seq["ids"]))
    budget = a.minutes * 60.0
    t0 = time.time()
    step, log = 0, []
    while True:
        elapsed = time.time() - t0
        if (a.steps and step >= a.steps) or (not a.steps and elapsed >= budget):
            break
        # Warm-up, then constant; the last --decay fraction of the budget anneals to a tenth.
        frac = elapsed / budget if not a.steps else step / a.steps
        tail = min(max((frac - (1 - a.decay)) / a.decay, 0.0), 1.0)
        lr = a.lr * min(1.0, (step + 1) / a.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * tail)))
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)
        stats = []
        for seq in random.sample(seqs, min(a.seqs_per_step, len(seqs))):
            # bf16 matmuls (avx512_bf16/AMX; softmax and losses stay fp32 under autocast): 1.3x the
            # steps per minute of fp32 here, the weights kept in fp32.
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=not a.fp32):
                out = dspark_loss(model, lm_head_bf16, embed, seq, a.anchors, weights, scale,
                                  a.ce_target == "argmax", vocab)
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
        if a.eval_every and step % a.eval_every == 0:
            held = held_out_stats(model, lm_head_bf16, embed, blob["data"]["held_out"], weights, scale,
                                  a.ce_target == "argmax", vocab)
            log.append({"step": step, "seconds": round(time.time() - t0), "held_out": held})
            print(f"held-out step {step}: " + " ".join(f"{k} {v:.3f}" for k, v in held.items()), flush=True)
    model.eval()
    with torch.no_grad():
        model.fc.weight.mul_(scale[None, :])  # the checkpoint takes raw taps
    out_dir = Path(a.out)
    model.save(out_dir)
    (out_dir / "train_log.json").write_text(json.dumps(
        {"steps": step, "seconds": round(time.time() - t0), "args": vars(a), "log": log}, indent=1, default=str) + "\n")
    print(f"train: {step} steps in {time.time() - t0:.0f}s -> {out_dir}", flush=True)
    write_draft_vocab(blob, out_dir, (ranked, counts))


def answer_token_ranking(blob) -> tuple[list[int], list[int]]:
    """Every token of the training answers, most frequent first (ties by id), with its count."""
    counts = {}
    for seq in blob["data"]["train"]:
        for t in seq["ids"][seq["prompt_len"]:].tolist():
            counts[t] = counts.get(t, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [t for t, _ in ranked], [c for _, c in ranked]


@torch.no_grad()
def held_out_stats(model, lm_head_bf16, embed, seqs, weights, scale, ce_argmax: bool, vocab: DraftVocab) -> dict:
    """The loss terms and teacher-forced top-1 on the held-out sequences (the same 16 anchors of
    each every time): the learning curve on text the drafter never trains on."""
    state = random.getstate()
    random.seed(1234)
    stats = [out[1] for seq in seqs
             if (out := dspark_loss(model, lm_head_bf16, embed, seq, 16, weights, scale, ce_argmax, vocab))]
    random.setstate(state)
    return {k: sum(s[k] for s in stats) / len(stats) for k in stats[0]}


def write_draft_vocab(blob, out_dir: Path, ranking: tuple[list[int], list[int]] | None = None):
    """draft_vocab.json: answer_token_ranking's ids and counts (`ranking` when already computed).

    The engine drafts from these ids (or the first draft_vocab_size of them: FR-Spec's
    frequency-ranked draft vocabulary), so the drafter's lm_head costs N / vocab of the full one;
    training computes p_d over the same ids. A token the drafter never saw as an answer is one it
    has hardly learnt to predict, so little acceptance is lost."""
    ids, counts = ranking or answer_token_ranking(blob)
    (out_dir / "draft_vocab.json").write_text(json.dumps({
        "source": f"answer tokens of the {len(blob['data']['train'])} training sequences ({sum(counts)} tokens)",
        "token_ids": ids, "counts": counts}) + "\n")
    print(f"draft vocabulary: {len(ids)} distinct answer tokens -> {out_dir / 'draft_vocab.json'}", flush=True)


# --- calibration and evaluation -------------------------------------------------------------------

def load_drafter(directory) -> DSparkDrafter:
    """A trained drafter, drafting from its draft_vocab.json where it has one (the vocabulary the
    engine drafts from by default)."""
    model = DSparkDrafter.load(directory).eval()
    vocab_file = Path(directory) / "draft_vocab.json"
    if vocab_file.exists():
        model.set_draft_vocab(json.loads(vocab_file.read_text())["token_ids"])
    return model


def calibrate_and_eval(a):
    torch.set_num_threads(a.threads)
    blob = load_data(a)
    embed = blob["embed"].float()
    model = load_drafter(a.out)
    held = blob["data"]["held_out"]
    calib, test = held[: len(held) // 2], held[len(held) // 2 :]
    t0 = time.time()
    lm_head = blob.get("lm_head", blob["embed"]).float()
    z_c, y_c = evaluate.survival_samples(model, embed, lm_head, calib)
    temps = evaluate.sequential_temperature_scaling(z_c, y_c)
    z_t, y_t = evaluate.survival_samples(model, embed, lm_head, test)
    model.save(a.out, calibration=temps)
    emitted = cycles = 0
    g = model.config.block_size
    tried, accepted = [0] * g, [0] * g
    for seq in test:
        e, c, t, acc = evaluate.walk(model, embed, lm_head, seq)
        emitted, cycles = emitted + e, cycles + c
        tried = [x + y for x, y in zip(tried, t)]
        accepted = [x + y for x, y in zip(accepted, acc)]
    # Live decoding with the target in torch (online.py) is SmolLM2's; the tiny Muse's held-out
    # sequences are its greedy continuations, which the walk above already verifies against.
    online_results = online_eval(a, model, embed, test) if a.target == "smollm2" else {}
    report = {
        "target": target.GGUF if a.target == "smollm2" else str(muse_tiny.MODEL_DIR.relative_to(ROOT)),
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
    # The test split's prompts and greedy answer lengths, with the tokens per cycle measured on
    # them: the C++ end-to-end test decodes exactly these through the engine and compares. The
    # reference is live decoding (online.py, the target verifying as the engine does) where there
    # is one: the walk compares drafts with the stored continuation, and a target whose numerics
    # differ (ember's Q4_1 kernels, transformers' cached multi-token verify) takes another greedy
    # path at near-ties.
    live = online_results.get("T0", {}).get("tokens_per_cycle")
    (Path(a.out) / "eval_prompts.json").write_text(json.dumps({
        "prompts": [seq["ids"][: seq["prompt_len"]].tolist() for seq in test],
        "max_tokens": [len(seq["ids"]) - seq["prompt_len"] for seq in test],
        "tokens_per_cycle_T0": live if live is not None else report["tokens_per_cycle_T0"],
        "reference": "online.py live decoding at T=0" if live is not None else "evaluate.walk at T=0",
    }) + "\n")
    print(json.dumps({k: report[k] for k in ("tokens_per_cycle_T0", "acceptance_per_position_T0",
                                             "sts_temperatures")}, indent=1))
    print("ECE test before/after:", report["test_split"]["ece_before"], report["test_split"]["ece_after"])
    print(json.dumps(online_results, indent=1))


def online_eval(a, drafter, embed, test):
    """Live speculative decoding of the test prompts at T=0 and T=1 (scripts/dspark/online.py).
    At T=0 the output must be the target's own greedy continuation (lossless)."""
    tok, tgt = target.load_target()
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    prompts = test[: a.online_prompts]
    results = {}
    for temp in (0.0, 1.0):
        r = live_decode(drafter, tgt, embed, prompts, temp, seed=1, max_new=a.max_new, eos=eos)
        same = r.pop("same_as_data")
        if temp == 0:
            r["outputs_equal_to_target_greedy"] = f"{same}/{len(prompts)}"
        results[f"T{temp:g}"] = r
    return results


def live_decode(drafter, tgt, embed, seqs, temperature: float, seed: int, max_new: int, eos: int) -> dict:
    """online.speculate over the prompts of `seqs` (one generator seeded `seed`): tokens per cycle,
    cycles, acceptance per position, prompts, and how many outputs equal the sequence's own
    continuation (same_as_data)."""
    g = drafter.config.block_size
    gen = torch.Generator().manual_seed(seed)
    emitted = cycles = same = 0
    tried, accepted = [0] * g, [0] * g
    for seq in seqs:
        prompt = seq["ids"][: seq["prompt_len"]].tolist()
        out, c, t, acc = online.speculate(drafter, tgt, embed, prompt, max_new, temperature, eos, gen)
        emitted, cycles = emitted + len(out) - 1, cycles + c
        tried = [x + y for x, y in zip(tried, t)]
        accepted = [x + y for x, y in zip(accepted, acc)]
        same += int(out == seq["ids"][seq["prompt_len"]:].tolist())
    return {"tokens_per_cycle": emitted / max(cycles, 1), "cycles": cycles,
            "acceptance_per_position": [x / y if y else None for x, y in zip(accepted, tried)],
            "prompts": len(seqs), "same_as_data": same}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=["data", "extend", "grow", "train", "calibrate", "vocab", "all"])
    ap.add_argument("--smoke", action="store_true", help="a few prompts and steps")
    ap.add_argument("--resume", action="store_true", help="data: add continuations to the existing data file")
    ap.add_argument("--target", choices=["smollm2", "muse_tiny"], default="smollm2")
    ap.add_argument("--out", default=None, help="default: tests/golden/dspark/<target>")
    ap.add_argument("--muse-sequences", type=int, default=2048, help="muse_tiny: training sequences")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-minutes", type=float, default=8.0, help="generation budget")
    ap.add_argument("--text-minutes", type=float, default=3.0, help="prompt-only taps budget")
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--gen-batch", type=int, default=128, help="prompts per `ember generate` call")
    ap.add_argument("--ember", type=Path, default=ROOT / "build/release/tools/ember/ember",
                    help="the engine that generates the training answers (self-distillation)")
    ap.add_argument("--minutes", type=float, default=30.0, help="training wall-clock budget")
    ap.add_argument("--steps", type=int, default=0, help="fixed step count instead of --minutes")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--decay", type=float, default=0.25, help="final fraction of the budget that anneals")
    # DeepSpec weighs CE 0.1, L1 0.9, confidence 1.0 (muse_spark.md §4.2) over 10 epochs of a large
    # corpus; with well under one hour of CPU, a full-weight CE term learns the argmax much sooner.
    ap.add_argument("--ce", type=float, default=1.0, help="weight of the cross-entropy term")
    ap.add_argument("--l1", type=float, default=0.9, help="weight of the L1 term")
    ap.add_argument("--conf", type=float, default=1.0, help="weight of the confidence term")
    ap.add_argument("--ce-target", choices=["argmax", "data"], default="argmax",
                    help="CE label: the target's argmax after the prefix (what greedy verification "
                         "accepts) or the data's next token")
    ap.add_argument("--layers", type=int, default=0,
                    help="drafter layers (0: --init-from's, else the data file's config)")
    ap.add_argument("--init-from-target", default="",
                    help="comma-separated target layers to start the drafter's layers from (smollm2); "
                         "28,29 against random at 1000 steps: held-out CE 3.87 vs 4.19, top-1 0.270 vs 0.265")
    ap.add_argument("--init-from", default="",
                    help="a drafter directory (this script's output) to continue training from: same config; "
                         "fresh optimizer and schedule (instead of --init-from-target)")
    ap.add_argument("--fp32", action="store_true", help="train in fp32 (default: bf16 autocast)")
    ap.add_argument("--seqs-per-step", type=int, default=4)
    ap.add_argument("--anchors", type=int, default=16, help="blocks per sequence per step")
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--eval-every", type=int, default=500, help="held-out loss and top-1 every N steps (0: never)")
    ap.add_argument("--online-prompts", type=int, default=16, help="test prompts decoded live")
    a = ap.parse_args()
    a.out = a.out or str(ROOT / "tests" / "golden" / "dspark" / a.target)
    if a.smoke:
        a.out = str(CACHE / f"smoke_out_{a.target}")
        a.max_new, a.steps, a.log_every = min(a.max_new, 24), a.steps or 3, 1
    if a.stage in ("data", "all"):
        make_data(a) if a.target == "smollm2" else make_muse_tiny_data(a)
    if a.stage in ("extend", "all") and a.target == "smollm2":
        extend_data(a)
    if a.stage == "grow":
        grow_data(a)
    if a.stage in ("train", "all"):
        train(a)
    if a.stage in ("calibrate", "all"):
        calibrate_and_eval(a)
    if a.stage == "vocab":  # train writes it too; this rewrites it for a drafter already trained
        write_draft_vocab(load_data(a, shards=True), Path(a.out))


if __name__ == "__main__":
    main()
