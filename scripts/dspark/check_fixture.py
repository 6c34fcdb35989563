"""Re-derives tests/golden/dspark/* outputs with a second, loop-per-query implementation of the
layout (no masks, no batching, no SDPA) from the saved files, and checks the fixture is not
degenerate (the window and the Markov bias change the answer). Guards the reference itself.

Usage: .venv/bin/python scripts/dspark/check_fixture.py [tests/golden/dspark/tiny ...]
"""

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dspark_model import DSparkConfig, load_calibration  # noqa: E402


def rms(x, w, eps):
    return w * x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def rot(x, p, theta):  # x [heads, hd] at position p
    hd = x.shape[-1]
    out = torch.empty_like(x)
    for i in range(hd // 2):
        a = p * theta ** (-2.0 * i / hd)
        c, s = torch.tensor(a, dtype=torch.float64).cos().float(), torch.tensor(a, dtype=torch.float64).sin().float()
        out[:, i] = x[:, i] * c - x[:, i + hd // 2] * s
        out[:, i + hd // 2] = x[:, i + hd // 2] * c + x[:, i] * s
    return out


def naive(cfg: DSparkConfig, w, embed, lm_head, feats, s, anchor, tokens_or_none, temps,
          window_off=False, markov_off=False):
    d, hd, h, hkv, g = cfg.hidden_size, cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.block_size
    eps = cfg.rms_norm_eps
    ctx = rms(feats[:s] @ w["fc.weight"].T, w["hidden_norm.weight"], eps)
    x = embed[[anchor] + [cfg.mask_token_id] * (g - 1)].clone()
    for li in range(cfg.num_hidden_layers):
        p = f"layers.{li}."
        win = None if window_off else cfg.layer_window(li)
        causal = cfg.layer_causal(li)
        y = rms(x, w[p + "input_layernorm.weight"], eps)
        kc, vc = [], []
        for t in range(s):
            k = (w[p + "self_attn.k_proj.weight"] @ ctx[t]).view(hkv, hd)
            kc.append(rot(rms(k, w[p + "self_attn.k_norm.weight"], eps), t, cfg.rope_theta))
            vc.append((w[p + "self_attn.v_proj.weight"] @ ctx[t]).view(hkv, hd))
        kb, vb, qb = [], [], []
        for k in range(g):
            kk = (w[p + "self_attn.k_proj.weight"] @ y[k]).view(hkv, hd)
            kb.append(rot(rms(kk, w[p + "self_attn.k_norm.weight"], eps), s + k, cfg.rope_theta))
            vb.append((w[p + "self_attn.v_proj.weight"] @ y[k]).view(hkv, hd))
            qq = (w[p + "self_attn.q_proj.weight"] @ y[k]).view(h, hd)
            qb.append(rot(rms(qq, w[p + "self_attn.q_norm.weight"], eps), s + k, cfg.rope_theta))
        att = torch.zeros(g, h * hd)
        for k in range(g):
            q_pos = s + k
            keys = [(kc[t], vc[t]) for t in range(s) if win is None or q_pos - t < win]
            keys += [(kb[j], vb[j]) for j in range(g) if not causal or j <= k]
            for hh in range(h):
                kv = hh // (h // hkv)
                sc = torch.stack([kk[kv] @ qb[k][hh] for kk, _ in keys]) / hd**0.5
                pr = torch.softmax(sc, 0)
                att[k, hh * hd:(hh + 1) * hd] = sum(pr[i] * keys[i][1][kv] for i in range(len(keys)))
        x = x + att @ w[p + "self_attn.o_proj.weight"].T
        z = rms(x, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = z @ w[p + "mlp.gate_proj.weight"].T, z @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    hid = rms(x, w["norm.weight"], eps)
    base = cfg.logit_scale * hid @ lm_head.T
    prev, toks, logits, confs = anchor, [], [], []
    for k in range(g):
        e = w["markov_head.markov_w1.weight"][prev]
        if cfg.markov_head_type == "gated":
            gg = torch.sigmoid(w["markov_head.gate_proj.weight"] @ torch.cat([hid[k], e]) + w["markov_head.gate_proj.bias"])
            e = gg * e
        lk = base[k] + (0 if markov_off else cfg.logit_scale * (w["markov_head.markov_w2.weight"] @ e))
        zk = w["confidence_head.proj.weight"][0] @ torch.cat([hid[k], w["markov_head.markov_w1.weight"][prev]]) + w["confidence_head.proj.bias"][0]
        xk = int(lk.argmax()) if tokens_or_none is None else int(tokens_or_none[k])
        toks.append(xk), logits.append(lk), confs.append(torch.sigmoid(zk / temps[k]))
        prev = xk
    return hid, base, torch.tensor(toks), torch.stack(logits), torch.stack(confs)


def check(directory: Path):
    cfg = DSparkConfig.from_json(json.loads((directory / "config.json").read_text()))
    w = {k: v.float() for k, v in load_file(str(directory / "model.safetensors")).items()}
    tgt = {k: v.float() for k, v in load_file(str(directory / "target.safetensors")).items()}
    feats = load_file(str(directory / "inputs.safetensors"))["context_features"]
    exp = load_file(str(directory / "expected.safetensors"))
    info = json.loads((directory / "cases.json").read_text())
    temps = load_calibration(directory, cfg.block_size)
    worst = 0.0
    for case in info["cases"]:
        ci, s, a = case["case"], case["anchor_position"], case["anchor_token"]
        for kind, forced in (("greedy", None), ("forced", case["forced_tokens"])):
            hid, base, toks, logits, conf = naive(cfg, w, tgt["embed_tokens.weight"], tgt["lm_head.weight"],
                                                  feats, s, a, forced, temps)
            for name, got in (("hidden", hid), ("base_logits", base), (f"{kind}_logits", logits),
                              (f"{kind}_confidences", conf)):
                worst = max(worst, float((got - exp[f"c{ci}.{name}"]).abs().max()))
            assert torch.equal(toks.to(torch.int32), exp[f"c{ci}.{kind}_tokens"]), (directory, ci, kind)
        # Non-degenerate: the Markov bias changes the greedy path's logits, and (on the full
        # context of a windowed drafter) the window changes the hidden states.
        _, _, _, lg_nm, _ = naive(cfg, w, tgt["embed_tokens.weight"], tgt["lm_head.weight"], feats, s, a,
                                  exp[f"c{ci}.greedy_tokens"], temps, markov_off=True)
        assert float((lg_nm - exp[f"c{ci}.greedy_logits"]).abs().max()) > 0.1
        if any(cfg.layer_window(i) for i in range(cfg.num_hidden_layers)) and s > 8:
            hid_nw, *_ = naive(cfg, w, tgt["embed_tokens.weight"], tgt["lm_head.weight"], feats, s, a, None,
                               temps, window_off=True)
            assert float((hid_nw - exp[f"c{ci}.hidden"]).abs().max()) > 1e-2
        print(f"{directory.name} case {ci}: greedy {exp[f'c{ci}.greedy_tokens'].tolist()} "
              f"conf {[round(float(v), 3) for v in exp[f'c{ci}.greedy_confidences']]}")
    print(f"{directory}: loop reference agrees, max abs diff {worst:.2e}")
    assert worst < 1e-3


if __name__ == "__main__":
    dirs = sys.argv[1:] or ["tests/golden/dspark/tiny", "tests/golden/dspark/tiny_gated"]
    for d in dirs:
        check(Path(d))
