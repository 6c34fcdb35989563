"""Torch reference of the DSpark drafter, exactly as src/spec/dspark/checkpoint_layout.md states it.

This module is the reference the C++ drafter is tested against and the model
scripts/train_dspark.py trains, so it is written from the layout document only (no other
project's code). Parameter names are the checkpoint's tensor names, so state_dict() is the
checkpoint. The target's embedding and lm_head are never parameters here: callers pass them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

LAYOUT_VERSION = 1


@dataclass
class DSparkConfig:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    block_size: int
    target_layer_ids: list[int]
    num_target_layers: int
    mask_token_id: int
    markov_rank: int
    markov_head_type: str = "vanilla"
    enable_confidence_head: bool = True
    confidence_head_with_markov: bool = True
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1e6
    sliding_window: int | None = None
    layer_types: list[str] = field(default_factory=list)  # empty: all full_attention
    is_causal: bool | None = None  # None: vLLM's rule (sliding layers are causal)
    logit_scale: float = 1.0
    target_model: str = ""

    def layer_window(self, i: int) -> int | None:
        if self.layer_types and self.layer_types[i] == "sliding_attention":
            if self.sliding_window is None:
                raise ValueError("a sliding_attention layer needs sliding_window")
            return int(self.sliding_window)
        return None

    def layer_causal(self, i: int) -> bool:
        if self.is_causal is not None:
            return bool(self.is_causal)
        return bool(self.layer_types) and self.layer_types[i] == "sliding_attention"

    def to_json(self) -> dict:
        d = asdict(self)
        types = self.layer_types or ["full_attention"] * self.num_hidden_layers
        d.update(
            architectures=["Qwen3DSparkModel"],
            model_type="qwen3",
            hidden_act="silu",
            attention_bias=False,
            layer_types=types,
            rope_parameters={"rope_type": "default", "rope_theta": self.rope_theta},
            sample_from_anchor=True,
            dspark_layout_version=LAYOUT_VERSION,
        )
        if self.is_causal is None:
            d.pop("is_causal")
        return d

    @classmethod
    def from_json(cls, d: dict) -> "DSparkConfig":
        sub = d.get("dflash_config") or {}
        pick = lambda k, default=None: d.get(k, sub.get(k, default))  # noqa: E731
        rope = (d.get("rope_parameters") or {}).get("rope_theta", d.get("rope_theta", 1e6))
        causal = d.get("is_causal", sub.get("causal"))
        return cls(
            hidden_size=d["hidden_size"],
            num_hidden_layers=d["num_hidden_layers"],
            num_attention_heads=d["num_attention_heads"],
            num_key_value_heads=d["num_key_value_heads"],
            head_dim=d.get("head_dim") or d["hidden_size"] // d["num_attention_heads"],
            intermediate_size=d["intermediate_size"],
            vocab_size=d["vocab_size"],
            block_size=d["block_size"],
            target_layer_ids=list(pick("target_layer_ids")),
            num_target_layers=d.get("num_target_layers", 0),
            mask_token_id=pick("mask_token_id"),
            markov_rank=d.get("markov_rank", 0),
            markov_head_type=d.get("markov_head_type", "vanilla"),
            enable_confidence_head=d.get("enable_confidence_head", False),
            confidence_head_with_markov=d.get("confidence_head_with_markov", False),
            rms_norm_eps=d["rms_norm_eps"],
            rope_theta=float(rope),
            sliding_window=sub.get("swa_window_size", d.get("sliding_window")),
            layer_types=list(d.get("layer_types") or []),
            is_causal=causal,
            logit_scale=float(d.get("logit_scale", 1.0)),
            target_model=d.get("target_model", ""),
        )


class RMSNorm(nn.Module):
    """w * x / sqrt(mean(x^2) + eps), in fp32 (weight multiplies; no 1 + w)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps))


def rope(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Neox (rotate-half) RoPE over the whole head. x [..., n, heads, hd], pos [..., n]."""
    hd = x.shape[-1]
    inv = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = (pos.to(torch.float64)[..., None] * inv).to(torch.float32)  # [..., n, hd/2]
    cos = torch.cat([ang.cos(), ang.cos()], -1).unsqueeze(-2)
    sin = torch.cat([ang.sin(), ang.sin()], -1).unsqueeze(-2)
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Attention(nn.Module):
    def __init__(self, c: DSparkConfig):
        super().__init__()
        self.h, self.hkv, self.hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        d = c.hidden_size
        self.q_proj = nn.Linear(d, self.h * self.hd, bias=False)
        self.k_proj = nn.Linear(d, self.hkv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, self.hkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.h * self.hd, d, bias=False)
        self.q_norm = RMSNorm(self.hd, c.rms_norm_eps)
        self.k_norm = RMSNorm(self.hd, c.rms_norm_eps)
        self.theta = c.rope_theta

    def context_kv(self, ctx: torch.Tensor, ctx_pos: torch.Tensor):
        """K/V of context states ctx [T, d] (hidden_norm(fc(taps)); no input_layernorm)."""
        t = ctx.shape[0]
        k = rope(self.k_norm(self.k_proj(ctx).view(t, self.hkv, self.hd)), ctx_pos, self.theta)
        return k, self.v_proj(ctx).view(t, self.hkv, self.hd)

    def forward(self, y, blk_pos, ctx_k, ctx_v, mask):
        """y [N, g, d] normed block inputs; ctx_k/v [T, hkv, hd]; mask [N*g, T + N*g] bool."""
        n, g, _ = y.shape
        q = rope(self.q_norm(self.q_proj(y).view(n, g, self.h, self.hd)), blk_pos, self.theta)
        k = rope(self.k_norm(self.k_proj(y).view(n, g, self.hkv, self.hd)), blk_pos, self.theta)
        v = self.v_proj(y).view(n, g, self.hkv, self.hd)
        keys = torch.cat([ctx_k, k.reshape(n * g, self.hkv, self.hd)], 0)
        vals = torch.cat([ctx_v, v.reshape(n * g, self.hkv, self.hd)], 0)
        rep = self.h // self.hkv  # GQA: query head j reads kv head j // rep
        qh = q.reshape(n * g, self.h, self.hd).transpose(0, 1)
        kh = keys.transpose(0, 1).repeat_interleave(rep, 0)
        vh = vals.transpose(0, 1).repeat_interleave(rep, 0)
        out = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, scale=self.hd**-0.5)
        return self.o_proj(out.transpose(0, 1).reshape(n, g, self.h * self.hd))


class MLP(nn.Module):
    def __init__(self, c: DSparkConfig):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c: DSparkConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)


class MarkovHead(nn.Module):
    def __init__(self, c: DSparkConfig):
        super().__init__()
        r = c.markov_rank
        self.gated = c.markov_head_type == "gated"
        if c.markov_head_type not in ("vanilla", "gated"):
            raise ValueError(f"markov_head_type {c.markov_head_type!r} not supported")
        self.markov_w1 = nn.Embedding(c.vocab_size, r)
        self.markov_w2 = nn.Linear(r, c.vocab_size, bias=False)
        if self.gated:
            self.gate_proj = nn.Linear(c.hidden_size + r, r)

    def bias(self, prev: torch.Tensor, h: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """The Markov correction of every vocabulary entry, or of `rows` only (a draft vocabulary)."""
        e = self.markov_w1(prev)
        if self.gated:
            e = torch.sigmoid(self.gate_proj(torch.cat([h, e], -1))) * e
        w2 = self.markov_w2.weight if rows is None else self.markov_w2.weight[rows]
        return F.linear(e, w2)


class ConfidenceHead(nn.Module):
    def __init__(self, c: DSparkConfig):
        super().__init__()
        extra = c.markov_rank if c.confidence_head_with_markov else 0
        self.proj = nn.Linear(c.hidden_size + extra, 1)
        self.with_markov = c.confidence_head_with_markov


def block_mask(c: DSparkConfig, layer: int, anchor_pos: torch.Tensor, t: int) -> torch.Tensor:
    """[N*g, T + N*g] bool: slot k of block n (position s_n + k) sees context p < s_n (and within
    the layer's window: q - p < W) and its own block's slots (all, or j <= k when causal)."""
    g = c.block_size
    n = anchor_pos.shape[0]
    q_pos = (anchor_pos[:, None] + torch.arange(g)).reshape(-1)  # [N*g]
    s = anchor_pos.repeat_interleave(g)
    p = torch.arange(t)
    ctx = p[None, :] < s[:, None]
    w = c.layer_window(layer)
    if w is not None:
        ctx &= (q_pos[:, None] - p[None, :]) < w
    qb = torch.arange(n * g) // g
    qk = torch.arange(n * g) % g
    blk = qb[:, None] == qb[None, :]
    if c.layer_causal(layer):
        blk &= qk[None, :] <= qk[:, None]
    return torch.cat([ctx, blk], 1)


class DSparkDrafter(nn.Module):
    def __init__(self, c: DSparkConfig):
        super().__init__()
        self.config = c
        m = len(c.target_layer_ids)
        self.fc = nn.Linear(m * c.hidden_size, c.hidden_size, bias=False)
        self.hidden_norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.layers = nn.ModuleList(Layer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.markov_head = MarkovHead(c) if c.markov_rank > 0 else None
        self.confidence_head = ConfidenceHead(c) if c.enable_confidence_head else None
        self.draft_mask = None  # set_draft_vocab

    # --- backbone -----------------------------------------------------------------------------
    def context_states(self, taps: torch.Tensor) -> torch.Tensor:
        """taps [T, m*d]: the target's tap hidden states of positions 0..T-1, concatenated."""
        return self.hidden_norm(self.fc(taps))

    def backbone(self, ctx: torch.Tensor, block_embeds: torch.Tensor, anchor_pos: torch.Tensor):
        """ctx [T, d] context states of positions 0..T-1; block_embeds [N, g, d] the target
        embeddings of [anchor, MASK x (g-1)]; anchor_pos [N] (each <= T). Returns h [N, g, d]."""
        c = self.config
        t = ctx.shape[0]
        ctx_pos = torch.arange(t)
        blk_pos = anchor_pos[:, None] + torch.arange(c.block_size)
        x = block_embeds.float()
        for i, layer in enumerate(self.layers):
            k, v = layer.self_attn.context_kv(ctx, ctx_pos)
            mask = block_mask(c, i, anchor_pos, t)
            x = x + layer.self_attn(layer.input_layernorm(x), blk_pos, k, v, mask)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self.norm(x)

    def block_embeds(self, embed: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
        """anchors [N] -> the target embeddings of [anchor, MASK x (g-1)], [N, g, d]."""
        ids = torch.full((anchors.shape[0], self.config.block_size), self.config.mask_token_id)
        ids[:, 0] = anchors
        return embed[ids].float()

    # --- heads --------------------------------------------------------------------------------
    def set_draft_vocab(self, token_ids: list[int] | None):
        """Draft from these ids only (FR-Spec; the engine's draft_vocab.json, draft_vocab_size):
        every other id's logit is -inf, so its draft probability is 0, as in the engine."""
        self.draft_mask = None
        if token_ids is not None:
            self.draft_mask = torch.full((self.config.vocab_size,), float("-inf"))
            self.draft_mask[torch.tensor(token_ids)] = 0.0

    def base_logits(self, h: torch.Tensor, lm_head: torch.Tensor) -> torch.Tensor:
        base = self.config.logit_scale * (h @ lm_head.float().T)
        return base if self.draft_mask is None else base + self.draft_mask

    def corrected_logits(self, base, h, prev, rows: torch.Tensor | None = None):
        """base: logits of every id, or of `rows` only (training over a draft vocabulary)."""
        if self.markov_head is None:
            return base
        return base + self.config.logit_scale * self.markov_head.bias(prev, h, rows)

    def confidence_logits(self, h, prev):
        if self.confidence_head is None:
            return None
        feats = h
        if self.confidence_head.with_markov:
            feats = torch.cat([h, self.markov_head.markov_w1(prev)], -1)
        return self.confidence_head.proj(feats.float()).squeeze(-1)

    def teacher_forced(self, h, base, prev, rows: torch.Tensor | None = None):
        """Training: prev [N, g] = [anchor, true tokens[:-1]]; base over `rows` when given.
        Returns (logits, conf logits)."""
        return self.corrected_logits(base, h, prev, rows), self.confidence_logits(h, prev)

    @torch.no_grad()
    def draft(self, h, base, anchor: int, temperature: float = 0.0, forced=None, generator=None):
        """One block, left to right: h [g, d], base [g, V]. forced: tokens to use instead of
        sampling (replaying a sampled path). Returns tokens [g], corrected [g, V], conf [g]."""
        g = h.shape[0]
        prev = torch.tensor([anchor])
        toks, logits, conf = [], [], []
        for k in range(g):
            lk = self.corrected_logits(base[k : k + 1], h[k : k + 1], prev)
            zk = self.confidence_logits(h[k : k + 1], prev)
            if forced is not None:
                xk = torch.tensor([int(forced[k])])
            elif temperature <= 0:
                xk = lk.argmax(-1)
            else:
                xk = torch.multinomial(torch.softmax(lk / temperature, -1), 1, generator=generator)[0]
            toks.append(int(xk))
            logits.append(lk[0])
            conf.append(zk[0] if zk is not None else torch.tensor(float("nan")))
            prev = xk
        return torch.tensor(toks), torch.stack(logits), torch.stack(conf)

    # --- checkpoints --------------------------------------------------------------------------
    def save(self, directory: str | Path, calibration: list[float] | None = None):
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tensors = {}
        for name, p in self.state_dict().items():
            # The confidence head stays fp32 (vLLM builds it with params_dtype=float32).
            dtype = torch.float32 if name.startswith("confidence_head.") else torch.bfloat16
            tensors[name] = p.detach().to(dtype).contiguous()
        save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
        (directory / "config.json").write_text(json.dumps(self.config.to_json(), indent=2) + "\n")
        if calibration is not None:
            cal = {"confidence_temperatures": [float(t) for t in calibration]}
            (directory / "calibration.json").write_text(json.dumps(cal, indent=2) + "\n")

    @classmethod
    def load(cls, directory: str | Path) -> "DSparkDrafter":
        from safetensors.torch import load_file

        directory = Path(directory)
        c = DSparkConfig.from_json(json.loads((directory / "config.json").read_text()))
        model = cls(c)
        sd = {k: v.float() for k, v in load_file(str(directory / "model.safetensors")).items()}
        model.load_state_dict(sd, strict=True)
        return model


def load_calibration(directory: str | Path, block_size: int) -> list[float]:
    path = Path(directory) / "calibration.json"
    if not path.exists():
        return [1.0] * block_size
    return list(json.loads(path.read_text())["confidence_temperatures"])


def calibrated(conf_logits: torch.Tensor, temps) -> torch.Tensor:
    """c_k = sigmoid(z_k / T_k): Sequential Temperature Scaling's per-position temperatures."""
    t = torch.tensor(temps[: conf_logits.shape[-1]], dtype=torch.float32)
    return torch.sigmoid(conf_logits / t)


def round_to_bf16_(model: nn.Module):
    """Round parameters to what a bf16 checkpoint stores (confidence head stays fp32), so the
    module computes exactly what a loader of the saved file computes."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not name.startswith("confidence_head."):
                p.copy_(p.to(torch.bfloat16).float())


__all__ = ["DSparkConfig", "DSparkDrafter", "calibrated", "load_calibration", "round_to_bf16_",
           "LAYOUT_VERSION"]
