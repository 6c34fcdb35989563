"""Held-out measurements of a DSpark drafter against its target's own greedy continuations:
acceptance at temperature 0 (greedy verification: the longest draft prefix equal to the target's
argmax, plus the bonus token), and Sequential Temperature Scaling of the confidence head with the
expected calibration error of prefix survival before and after.

Sequences are self-distilled greedy continuations, so the target's argmax after position p is the
continuation's token p + 1: no target forward is needed to verify.
"""

from __future__ import annotations

import math

import torch

from dspark_model import DSparkDrafter


@torch.no_grad()
def draft_at(model: DSparkDrafter, embed, lm_head, ctx, ids, anchors):
    """Greedy blocks for anchors [N] of one sequence. Returns tokens [N, g], conf logits [N, g]."""
    h = model.backbone(ctx, model.block_embeds(embed, ids[anchors]), anchors)
    base = model.base_logits(h, lm_head)
    toks, zs = [], []
    for n in range(anchors.shape[0]):
        t, _, z = model.draft(h[n], base[n], int(ids[anchors[n]]))
        toks.append(t), zs.append(z)
    return torch.stack(toks), torch.stack(zs)


@torch.no_grad()
def walk(model, embed, lm_head, seq, chunk: int = 1):
    """Simulated decoding of one held-out sequence: the first anchor is the first generated token
    (the prefill's), each cycle accepts the matching prefix and the target adds one token.
    Returns (emitted tokens, cycles, per-position [accepted, tried] counts)."""
    g = model.config.block_size
    ids, p, tap = seq["ids"], seq["prompt_len"], seq["taps"].float()
    ctx = model.context_states(tap)
    t_len = ids.shape[0]
    s, emitted, cycles = p, 0, 0
    tried, accepted = [0] * g, [0] * g
    while s < t_len - 1:
        toks, _ = draft_at(model, embed, lm_head, ctx, ids, torch.tensor([s]))
        remaining = t_len - 1 - s  # tokens after the anchor that exist in the reference
        n = 0
        while n < min(g, remaining) and int(toks[0, n]) == int(ids[s + 1 + n]):
            tried[n] += 1
            accepted[n] += 1
            n += 1
        if n < min(g, remaining):
            tried[n] += 1
        out = min(n + 1, remaining)
        emitted += out
        cycles += 1
        s += out
    return emitted, cycles, tried, accepted


@torch.no_grad()
def survival_samples(model, embed, lm_head, seqs, max_anchors: int = 64):
    """Every (anchor, position) of held-out sequences with a full block of reference tokens:
    confidence logits z [M, g] and survival labels [M, g] (1 while the greedy draft's prefix
    through k equals the target's argmax tokens)."""
    g = model.config.block_size
    zs, labels = [], []
    for seq in seqs:
        ids, p = seq["ids"], seq["prompt_len"]
        last = ids.shape[0] - 1 - g
        if last < p:
            continue
        anchors = torch.arange(p, last + 1)
        if anchors.numel() > max_anchors:
            anchors = anchors[torch.linspace(0, anchors.numel() - 1, max_anchors).long()]
        ctx = model.context_states(seq["taps"].float())
        toks, z = draft_at(model, embed, lm_head, ctx, ids, anchors)
        ref = torch.stack([ids[a + 1 : a + 1 + g] for a in anchors.tolist()])
        labels.append((toks == ref).int().cumprod(-1).float())
        zs.append(z)
    return torch.cat(zs), torch.cat(labels)


def ece(pred: torch.Tensor, label: torch.Tensor, bins: int = 10) -> float:
    """Expected calibration error with equal-width bins: sum_b n_b/N |mean pred - mean label|."""
    pred, label = pred.reshape(-1), label.reshape(-1)
    idx = (pred * bins).long().clamp(max=bins - 1)
    total = 0.0
    for b in range(bins):
        m = idx == b
        if m.any():
            total += float(m.sum()) / pred.numel() * abs(float(pred[m].mean() - label[m].mean()))
    return total


def prefix_survival(z: torch.Tensor, temps) -> torch.Tensor:
    t = torch.tensor(temps, dtype=torch.float32)
    return torch.sigmoid(z / t).cumprod(-1)


def sequential_temperature_scaling(z, labels, grid=None):
    """Left to right, choose T_k (earlier ones fixed) minimizing the ECE of position k's prefix
    survival prod_{i<=k} sigmoid(z_i / T_i) against the observed survival."""
    g = z.shape[1]
    grid = grid if grid is not None else [math.exp(x / 20) for x in range(-40, 61)]  # e^-2 .. e^3
    temps = [1.0] * g
    for k in range(g):
        best = (float("inf"), 1.0)
        for t in grid:
            temps[k] = t
            e = ece(prefix_survival(z, temps)[:, k], labels[:, k])
            best = min(best, (e, t))
        temps[k] = best[1]
    return temps


def calibration_report(z, labels, temps):
    before = prefix_survival(z, [1.0] * z.shape[1])
    after = prefix_survival(z, temps)
    return {
        "ece_before": ece(before, labels),
        "ece_after": ece(after, labels),
        "ece_before_per_position": [ece(before[:, k], labels[:, k]) for k in range(z.shape[1])],
        "ece_after_per_position": [ece(after[:, k], labels[:, k]) for k in range(z.shape[1])],
        "observed_survival": labels.mean(0).tolist(),
        "samples": int(z.shape[0]),
    }
