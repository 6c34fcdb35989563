#!/usr/bin/env python3
"""ember vs llama.cpp on the same GGUF: greedy continuations, top-5 logprob overlap, perplexity.

llama.cpp is the PyPI package llama-cpp-python (which builds llama.cpp from its bundled source);
install it into the project virtualenv with `.venv/bin/pip install llama-cpp-python`. Both engines
get the same token ids (tokenized by llama.cpp), so this compares the model execution alone.

  .venv/bin/python scripts/compare_llamacpp.py --model all [--tokens 64] [--ppl-tokens 20480]

Prints a Markdown summary and writes the details to build/compare/<model>.json.
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
]
# A long English text that ships with every Debian system, for perplexity.
PPL_SOURCES = ["GPL-3", "GPL-2", "LGPL-2.1", "Apache-2.0", "MPL-2.0", "GFDL-1.3", "Artistic", "LGPL-3"]


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
                     "llama_cpp": llm.detokenize(ref_tokens).decode(errors="replace"),
                     "ember": llm.detokenize(our_tokens).decode(errors="replace"),
                     "llama_cpp_ids": ref_tokens, "ember_ids": our_tokens,
                     "top5_at_divergence": None if diverge is None else {"llama_cpp": ref_tops[diverge], "ember": our_tops[diverge]}})
    return rows


def perplexity_text():
    parts = []
    for name in PPL_SOURCES:
        path = pathlib.Path("/usr/share/common-licenses") / name
        if path.exists():
            parts.append(path.read_text(errors="replace"))
    return "\n\n".join(parts)


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
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--ppl-tokens", type=int, default=20480, help="0 skips perplexity")
    parser.add_argument("--ctx", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ember", default=str(ROOT / "build/release/tools/ember/ember"))
    args = parser.parse_args()
    from llama_cpp import Llama  # noqa: the peer, imported only when needed

    out_dir = ROOT / "build/compare"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in (MODELS if args.model == "all" else [args.model]):
        path = MODELS[name]
        if not path.exists():
            sys.exit(f"{path} is missing: run scripts/fetch_models.py --model {name}")
        llm = Llama(model_path=str(path), n_ctx=max(args.ctx, 1024), n_batch=args.ctx, n_threads=args.threads,
                    logits_all=True, verbose=False)
        add_bos = bool(llm.metadata.get("tokenizer.ggml.add_bos_token", "false") == "true")
        gen = compare_generation(name, llm, args.ember, path, add_bos, args.tokens, args.threads)
        report = {"model": name, "gguf": str(path), "tokens": args.tokens, "generation": gen}
        print(f"\n## {name}: greedy {args.tokens}-token continuations\n")
        print("| prompt | identical | first divergence | min top-5 overlap | max top-1 logprob diff |")
        print("|---|---|---|---|---|")
        for row in gen:
            print(f"| {row['prompt'][:40]!r} | {row['identical']} | {row['first_divergence']} | "
                  f"{row['min_top5_overlap']:.2f} | {row['max_top1_logprob_diff']:.2e} |")
        if args.ppl_tokens > 0:
            ids = llm.tokenize(perplexity_text().encode(), add_bos=False, special=False)[: args.ppl_tokens]
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
        (out_dir / f"{name}.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
