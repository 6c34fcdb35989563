#!/usr/bin/env python3
"""ember vs llama.cpp on the same GGUF: greedy continuations, top-5 logprob overlap, perplexity.

llama.cpp is the PyPI package llama-cpp-python (which builds llama.cpp from its bundled source);
install it into the project virtualenv with `.venv/bin/pip install llama-cpp-python`. Both engines
get the same token ids (tokenized by llama.cpp), so this compares the model execution alone.

  .venv/bin/python scripts/compare_llamacpp.py --model all [--tokens 64] [--ppl-tokens N] [--kv-type f16|f32]

Where the greedy continuations differ, the first divergence is examined: both engines' top-2 tokens
and margins there (the prefix before it is common, so both are teacher-forced on the same tokens),
set against the margin noise between the engines on the common prefix. Perplexity runs on the text
scripts/make_ppl_text.py builds (the whole text unless --ppl-tokens; 0 skips it), chunked the way
llama-perplexity does. Prints a Markdown summary and writes the details to
<--out-dir>/<model>_kv<type>.json (bench/results/compare by default).
"""
import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = pathlib.Path(os.environ.get("EMBER_MODEL_CACHE", pathlib.Path.home() / ".cache/ember/models"))
MODELS = {
    "smollm2": CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": CACHE / "gemma-3-270m-q4_k_m.gguf",
}
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Once upon a time, in a small village by the sea, there lived",
    "Photosynthesis is the process by which plants",
    "Q: What is 17 times 23?\nA:",
    "Die Hauptstadt von Deutschland ist Berlin. Die Stadt ist bekannt für",
    "Shopping list:\n1. Milk\n2.",
    "<p>The HTTP status code 404 means",
]
# llama.cpp's KV cache element types by name (ggml_type values): f16 is llama.cpp's default, f32
# is what ember keeps.
KV_TYPES = {"f16": 1, "f32": 0}


def log_softmax(row):
    row = row.astype(np.float64)
    m = row.max()
    return row - (m + math.log(np.exp(row - m).sum()))


def llama_greedy(llm, prompt_ids, n_tokens, k=5):
    llm.reset()
    llm.eval(prompt_ids)
    tokens, tops = [], []
    for _ in range(n_tokens):
        lp = log_softmax(np.array(llm.scores[llm.n_tokens - 1]))
        tok = int(lp.argmax())
        top = np.argsort(-lp, kind="stable")[:k]
        tokens.append(tok)
        tops.append([(int(t), float(lp[t])) for t in top])
        llm.eval([tok])
    return tokens, tops


def ember_greedy(ember, model, prompt_ids, n_tokens, threads, k=5):
    out = subprocess.run([str(ember), "generate", "--model", str(model), "--prompt-ids", ",".join(map(str, prompt_ids)),
                          "--max-tokens", str(n_tokens), "--json", "--top-logprobs", str(k), "--ignore-eos",
                          "--threads", str(threads)], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    return result["token_ids"], [[(int(t), float(l)) for t, l in step["top"]] for step in result["logprobs"]]


def pair_margin(top, a, b):
    """logprob(a) - logprob(b) in one engine's top-k list, or None when either is outside it. Both
    share the softmax normaliser, so this is also the logit margin."""
    lp = dict(top)
    return lp[a] - lp[b] if a in lp and b in lp else None


def margin_noise(ref_tops, our_tops):
    """How much the engines disagree on the same logit margin where they agree on the token: at
    each common-prefix position, llama.cpp's top-1 minus top-2 margin measured in both engines.
    Both engines round activations to 8 bits (at different points), so this is the noise a greedy
    choice is exposed to; a divergence at a margin below it is a coin toss, not a bug."""
    noise = []
    for r, o in zip(ref_tops, our_tops):
        a, b = r[0][0], r[1][0]
        ours = pair_margin(o, a, b)
        if ours is not None:
            noise.append(abs(ours - (r[0][1] - r[1][1])))
    return noise


def divergence_detail(ref_tops, our_tops, ref_tok, our_tok):
    """Both engines' view of the position where their greedy choices first differ. The common
    prefix up to it is identical, so these logits are teacher-forced on the same tokens."""
    ref_gap = pair_margin(ref_tops, ref_tok, our_tok)  # >= 0: how far llama.cpp prefers its token
    our_gap = pair_margin(our_tops, our_tok, ref_tok)  # >= 0: how far ember prefers its token
    return {"llama_cpp_top2": ref_tops[:2], "ember_top2": our_tops[:2],
            "llama_cpp_margin": ref_tops[0][1] - ref_tops[1][1], "ember_margin": our_tops[0][1] - our_tops[1][1],
            "llama_cpp_prefers_its_token_by": ref_gap, "ember_prefers_its_token_by": our_gap,
            "disagreement": None if ref_gap is None or our_gap is None else ref_gap + our_gap}


def compare_generation(name, llm, ember, model, add_bos, n_tokens, threads):
    rows = []
    for text in PROMPTS:
        ids = llm.tokenize(text.encode(), add_bos=add_bos, special=True)
        ref_tokens, ref_tops = llama_greedy(llm, ids, n_tokens)
        our_tokens, our_tops = ember_greedy(ember, model, ids, n_tokens, threads)
        diverge = next((i for i, (a, b) in enumerate(zip(ref_tokens, our_tokens)) if a != b), None)
        upto = diverge if diverge is not None else n_tokens
        overlaps = [len({t for t, _ in r} & {t for t, _ in o}) / len(r) for r, o in zip(ref_tops[:upto], our_tops[:upto])]
        lp_diff = [abs(r[0][1] - o[0][1]) for r, o in zip(ref_tops[:upto], our_tops[:upto])]
        rows.append({"prompt": text, "prompt_tokens": len(ids), "identical": diverge is None, "first_divergence": diverge,
                     "min_top5_overlap": min(overlaps) if overlaps else None,
                     "mean_top5_overlap": sum(overlaps) / len(overlaps) if overlaps else None,
                     "max_top1_logprob_diff": max(lp_diff) if lp_diff else None,
                     "margin_noise": margin_noise(ref_tops[:upto], our_tops[:upto]),
                     "llama_cpp": llm.detokenize(ref_tokens).decode(errors="replace"),
                     "ember": llm.detokenize(our_tokens).decode(errors="replace"),
                     "llama_cpp_ids": ref_tokens, "ember_ids": our_tokens,
                     "top5_at_divergence": None if diverge is None else {"llama_cpp": ref_tops[diverge], "ember": our_tops[diverge]},
                     "divergence": None if diverge is None else divergence_detail(
                         ref_tops[diverge], our_tops[diverge], ref_tokens[diverge], our_tokens[diverge])})
    return rows


def summarise_divergences(gen):
    """The margin at each divergence against the margin noise pooled over every prompt's common
    prefix (the positions where both engines chose the same token)."""
    noise = np.array(sorted(x for row in gen for x in row["margin_noise"]))
    if noise.size == 0:
        return None
    out = {"noise_positions": int(noise.size), "noise_median": float(np.median(noise)),
           "noise_p95": float(np.quantile(noise, 0.95)), "noise_max": float(noise[-1]), "divergences": []}
    for row in gen:
        d = row["divergence"]
        if d is None:
            continue
        gap = max(d["llama_cpp_prefers_its_token_by"] or 0.0, d["ember_prefers_its_token_by"] or 0.0)
        out["divergences"].append({"prompt": row["prompt"], "position": row["first_divergence"],
                                   "larger_preference": gap, "disagreement": d["disagreement"],
                                   "noise_percentile_of_disagreement": None if d["disagreement"] is None
                                   else float((noise < d["disagreement"]).mean() * 100)})
    return out


def perplexity_text():
    sys.path.insert(0, str(ROOT / "scripts"))
    from make_ppl_text import build_text  # noqa: the committed recipe for the text
    return build_text()[0]


def llama_perplexity(llm, ids, ctx, bos_first, bos):
    nll, count = 0.0, 0
    for c in range(len(ids) // ctx):
        chunk = list(ids[c * ctx:(c + 1) * ctx])
        if bos_first:
            chunk[0] = bos
        llm.reset()
        llm.eval(chunk)
        scores = np.array(llm.scores[:ctx])
        for i in range(ctx // 2, ctx - 1):
            nll -= log_softmax(scores[i])[chunk[i + 1]]
            count += 1
    return math.exp(nll / count), count


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=[*MODELS, "all"], default="all")
    parser.add_argument("--tokens", type=int, default=64, help="greedy tokens per prompt (0: perplexity only)")
    parser.add_argument("--ppl-tokens", type=int, default=-1, help="tokens of the text to use (-1: all; 0: skip)")
    parser.add_argument("--kv-type", choices=KV_TYPES, default="f16", help="llama.cpp's KV cache type")
    parser.add_argument("--out-dir", type=pathlib.Path, default=ROOT / "bench/results/compare")
    parser.add_argument("--ctx", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ember", default=str(ROOT / "build/release/tools/ember/ember"))
    args = parser.parse_args()
    from llama_cpp import Llama  # noqa: the peer, imported only when needed

    out_dir = args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in (MODELS if args.model == "all" else [args.model]):
        path = MODELS[name]
        if not path.exists():
            sys.exit(f"{path} is missing: run scripts/fetch_models.py --model {name}")
        llm = Llama(model_path=str(path), n_ctx=max(args.ctx, 1024), n_batch=args.ctx, n_threads=args.threads,
                    n_threads_batch=args.threads, logits_all=True, verbose=False,
                    type_k=KV_TYPES[args.kv_type], type_v=KV_TYPES[args.kv_type])
        add_bos = bool(llm.metadata.get("tokenizer.ggml.add_bos_token", "false") == "true")
        gen = compare_generation(name, llm, args.ember, path, add_bos, args.tokens, args.threads) if args.tokens else []
        report = {"model": name, "gguf": str(path), "llama_cpp_kv_type": args.kv_type, "tokens": args.tokens,
                  "generation": gen, "divergence_summary": summarise_divergences(gen)}
        print(f"\n## {name}: greedy {args.tokens}-token continuations (llama.cpp KV {args.kv_type})\n")
        print("| prompt | identical | first divergence | min top-5 overlap | max top-1 logprob diff |")
        print("|---|---|---|---|---|")
        for row in gen:
            print(f"| {row['prompt'][:40]!r} | {row['identical']} | {row['first_divergence']} | "
                  f"{row['min_top5_overlap']:.2f} | {row['max_top1_logprob_diff']:.2e} |")
        summary = report["divergence_summary"]
        if summary and summary["divergences"]:
            print(f"\nmargin noise on the common prefix ({summary['noise_positions']} positions): median "
                  f"{summary['noise_median']:.4f}, p95 {summary['noise_p95']:.4f}, max {summary['noise_max']:.4f}\n")
            print("| prompt | position | llama.cpp top-2 (logprob) | ember top-2 (logprob) | "
                  "llama.cpp prefers its token by | ember prefers its token by | noise percentile |")
            print("|---|---|---|---|---|---|---|")
            for row, d in ((r, r["divergence"]) for r in gen if r["divergence"]):
                show = lambda top: ", ".join(f"{llm.detokenize([t]).decode(errors='replace')!r} {lp:.4f}" for t, lp in top)
                pct = next(x["noise_percentile_of_disagreement"] for x in summary["divergences"] if x["prompt"] == row["prompt"])
                fmt = lambda v: "n/a" if v is None else f"{v:.4f}"
                print(f"| {row['prompt'][:30]!r} | {row['first_divergence']} | {show(d['llama_cpp_top2'])} | "
                      f"{show(d['ember_top2'])} | {fmt(d['llama_cpp_prefers_its_token_by'])} | "
                      f"{fmt(d['ember_prefers_its_token_by'])} | {fmt(pct)} |")
        if args.ppl_tokens != 0:
            ids = llm.tokenize(perplexity_text().encode(), add_bos=False, special=False)
            ids = ids[: args.ppl_tokens] if args.ppl_tokens > 0 else ids
            ref_ppl, scored = llama_perplexity(llm, ids, args.ctx, add_bos, llm.token_bos())
            with tempfile.NamedTemporaryFile("w", suffix=".ids", delete=False) as f:
                f.write(",".join(map(str, ids)))
            cmd = [args.ember, "perplexity", "--model", str(path), "--ids-file", f.name, "--ctx", str(args.ctx),
                   "--json", "--threads", str(args.threads)] + (["--bos-first"] if add_bos else [])
            ours = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
            report["perplexity"] = {"tokens": len(ids), "scored": scored, "llama_cpp": ref_ppl,
                                    "ember": ours["perplexity"], "relative_difference": ours["perplexity"] / ref_ppl - 1}
            print(f"\nperplexity over {len(ids)} tokens ({scored} scored, ctx {args.ctx}): llama.cpp {ref_ppl:.4f}, "
                  f"ember {ours['perplexity']:.4f} ({100 * (ours['perplexity'] / ref_ppl - 1):+.3f}%)")
        stem = f"{name}_kv{args.kv_type}" + ("" if args.tokens else "_ppl")  # --tokens 0: perplexity alone
        (out_dir / f"{stem}.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
