"""Speculative decoding with a DSpark drafter and the live target, in torch: what ember's engine
does, one request at a time, so acceptance can be measured at any temperature (the stored
continuations of evaluate.py only answer temperature 0).

Each cycle: the drafter proposes g tokens from [anchor, MASK x (g-1)] (Markov-sampled at the
request's temperature), the target scores [anchor, drafts] in one forward on its KV cache, the
standard lossless rule accepts a prefix (greedy: equal to the argmax; sampled: min(1, p_t/p_d),
then the residual max(p_t - p_d, 0) on rejection), the target adds one token, the cache is cut
back to the verified positions, and their tap hidden states extend the drafter's context.
"""

from __future__ import annotations

import torch

from dspark_model import DSparkDrafter


def _taps(hidden_states, layer_ids):
    return torch.cat([hidden_states[0 if l == -1 else l + 1] for l in layer_ids], -1)[0]


def _pick(logits: torch.Tensor, temperature: float, gen) -> int:
    if temperature <= 0:
        return int(logits.argmax())
    return int(torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen))


@torch.no_grad()
def speculate(drafter: DSparkDrafter, tgt, embed, prompt: list[int], max_new: int, temperature: float,
              eos: int, gen: torch.Generator):
    """One request. Returns (generated tokens, cycles, tried[g], accepted[g])."""
    from transformers import DynamicCache

    c = drafter.config
    g = c.block_size
    cache = DynamicCache()
    out = tgt(torch.tensor([prompt]), past_key_values=cache, use_cache=True, output_hidden_states=True)
    ctx = drafter.context_states(_taps(out.hidden_states, c.target_layer_ids))
    tokens = list(prompt)
    x = _pick(out.logits[0, -1].float(), temperature, gen)  # the prefill's token: first anchor
    tokens.append(x)
    produced, cycles = 1, 0
    tried, accepted = [0] * g, [0] * g
    while produced < max_new and x != eos:
        s = len(tokens) - 1
        h = drafter.backbone(ctx, drafter.block_embeds(embed, torch.tensor([x])), torch.tensor([s]))[0]
        drafts, dlogits, _ = drafter.draft(h, drafter.base_logits(h, embed), x, temperature=temperature,
                                           generator=gen)
        out = tgt(torch.tensor([[x] + drafts.tolist()]), past_key_values=cache, use_cache=True,
                  output_hidden_states=True)
        tl = out.logits[0].float()  # tl[k]: the target's next-token logits at position s + k
        n, stop, bonus = 0, False, None
        for k in range(g):
            d = int(drafts[k])
            tried[k] += 1
            if temperature <= 0:
                ok = d == int(tl[k].argmax())
            else:
                p_t = torch.softmax(tl[k] / temperature, -1)
                p_d = torch.softmax(dlogits[k] / temperature, -1)
                ok = float(torch.rand((), generator=gen)) < min(1.0, float(p_t[d] / p_d[d]))
                if not ok:
                    resid = (p_t - p_d).clamp(min=0)
                    resid = resid / resid.sum() if float(resid.sum()) > 1e-8 else p_t
                    bonus = int(torch.multinomial(resid, 1, generator=gen))
            if not ok:
                break
            accepted[k] += 1
            n += 1
            if d == eos:
                stop = True
                break
        if bonus is None and not stop:
            bonus = _pick(tl[n], temperature, gen)
        new = drafts[:n].tolist() + ([] if stop else [bonus])
        new = new[: max_new - produced]
        # Verified positions s .. s+n (the anchor and the accepted drafts) join the context.
        ctx = torch.cat([ctx, drafter.context_states(_taps(out.hidden_states, c.target_layer_ids)[: n + 1])])
        cache.crop(-(g - n))  # drop the rejected drafts' K/V (transformers 5: a negative count)
        assert cache.get_seq_length() == s + n + 1
        tokens += new
        produced += len(new)
        cycles += 1
        x = new[-1] if new else eos
        if stop:
            break
    return tokens[len(prompt):], cycles, tried, accepted
