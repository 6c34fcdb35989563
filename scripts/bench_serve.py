#!/usr/bin/env python3
"""Load generator for any OpenAI-compatible completions server (like `vllm bench serve`).

Drives POST /v1/completions with streaming, at fixed concurrency levels or a
Poisson request rate, and reports time to first token (TTFT), time per output
token (TPOT), inter-token latency (ITL), request and token throughput and
goodput under latency targets. The same client measures ember and llama.cpp's
llama-server, so their numbers are comparable.

Datasets are generated locally and deterministically from --seed:
  random  prompts of about --input-len tokens made of common English words
          (lengths drawn uniformly in [len*(1-r), len*(1+r)] with r = --range-ratio)
  prefix  agentic sessions: every session shares one long common prefix
          (--prefix-len tokens, e.g. a system prompt with tool descriptions) and
          runs --turns turns one after the other; each turn's prompt is the whole
          history so far plus a new message of about --input-len tokens
  code    like random, but the words are short Python functions

Token counts of the prompts are approximate (one word ~ one token for common
words); the reported input tokens come from the server's usage.

Output tokens are counted from the streamed chunks and checked against the
final usage.completion_tokens (requested with stream_options.include_usage);
the JSON records both, so a server that packs several tokens into one chunk
shows up as chunks != tokens.

Examples:
  .venv/bin/python scripts/bench_serve.py --base-url http://127.0.0.1:8000 \\
      --dataset random --input-len 128 --output-len 64 --concurrency 1 4 16 64 \\
      --num-prompts 64 --result-json /tmp/r.json --plot /tmp/r.png
  .venv/bin/python scripts/bench_serve.py --base-url http://127.0.0.1:8000 \\
      --dataset prefix --request-rate 2 --num-prompts 32 --goodput ttft:500 tpot:50
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from dataclasses import asdict, dataclass, field

import aiohttp
import numpy as np

# Short, frequent English words: each is a single token in the BPE vocabularies
# of the models we benchmark (with its leading space), so a prompt of N words is
# close to N tokens.
WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but "
    "have an they you were her she there one all we their has been would will more if no when what "
    "so out up who about them can said into time than only some could new other then two may do "
    "first any now such like its over also after most made world where these many very before way "
    "state through well year back much how good work day long should great even still city own "
    "same part while people know find take give next since place right small end under both high "
    "life last man old us school water never house come home left few must found early still each "
    "light hand point line name open group make room game side again story face off far run set"
).split()

CODE_NAMES = "data value item result count index total node key buf size name path line text user".split()
CODE_OPS = "+ - * //".split()


@dataclass
class Request:
    prompt: str
    output_len: int


@dataclass
class Session:
    """Requests sent one after the other (one for random/code, several turns for prefix)."""
    requests: list[Request]


@dataclass
class Result:
    ok: bool = False
    error: str = ""
    start: float = 0.0
    ttft: float = 0.0
    latency: float = 0.0
    chunk_times: list[float] = field(default_factory=list)  # arrival of each chunk with text, from start
    chunks: int = 0
    usage_prompt_tokens: int = -1
    usage_completion_tokens: int = -1

    @property
    def output_tokens(self) -> int:
        return self.usage_completion_tokens if self.usage_completion_tokens >= 0 else self.chunks


def random_words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def code_words(rng: random.Random, n: int) -> str:
    # A Python function is ~20 tokens; emit functions until ~n tokens.
    out, tokens = [], 0
    while tokens < n:
        a, b, c = rng.sample(CODE_NAMES, 3)
        op = rng.choice(CODE_OPS)
        k = rng.randint(1, 99)
        out.append(f"def {a}_{b}({a}, {b}):\n    {c} = {a} {op} {b} * {k}\n    return {c}\n")
        tokens += 24
    return "\n".join(out)


def sample_len(rng: random.Random, mean: int, ratio: float) -> int:
    lo, hi = max(1, int(mean * (1 - ratio))), max(1, int(mean * (1 + ratio)))
    return rng.randint(lo, hi)


def build_sessions(args: argparse.Namespace) -> list[Session]:
    rng = random.Random(args.seed)
    sessions: list[Session] = []
    if args.dataset in ("random", "code"):
        gen = random_words if args.dataset == "random" else code_words
        for _ in range(args.num_prompts):
            prompt = gen(rng, sample_len(rng, args.input_len, args.range_ratio))
            sessions.append(Session([Request(prompt, sample_len(rng, args.output_len, args.range_ratio))]))
    elif args.dataset == "prefix":
        prefix = "You are an agent. Tools: " + random_words(rng, args.prefix_len)
        n_sessions = max(1, args.num_prompts // args.turns)
        for s in range(n_sessions):
            history = prefix
            turns = []
            for t in range(args.turns):
                history += f"\nUser {s}.{t}: " + random_words(rng, sample_len(rng, args.input_len, args.range_ratio))
                history += "\nAssistant:"
                turns.append(Request(history, sample_len(rng, args.output_len, args.range_ratio)))
                # The next turn carries a fixed stand-in for this turn's answer, so the
                # dataset does not depend on what the server generated.
                history += " " + random_words(rng, args.output_len)
            sessions.append(Session(turns))
    else:
        raise SystemExit(f"unknown dataset {args.dataset!r}")
    return sessions


async def send(http: aiohttp.ClientSession, url: str, model: str, req: Request, extra: dict) -> Result:
    payload = {
        "model": model,
        "prompt": req.prompt,
        "max_tokens": req.output_len,
        "temperature": 0.0,
        "stream": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
        **extra,
    }
    r = Result(start=time.perf_counter())
    try:
        async with http.post(url, json=payload) as resp:
            if resp.status != 200:
                r.error = f"HTTP {resp.status}: {(await resp.text())[:200]}"
                return r
            buf = b""
            async for data in resp.content.iter_any():
                now = time.perf_counter()
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    line = line.strip()
                    if not line.startswith(b"data:"):
                        continue
                    body = line[5:].strip()
                    if body == b"[DONE]":
                        continue
                    msg = json.loads(body)
                    if msg.get("usage"):
                        r.usage_prompt_tokens = msg["usage"].get("prompt_tokens", -1)
                        r.usage_completion_tokens = msg["usage"].get("completion_tokens", -1)
                    for choice in msg.get("choices") or []:
                        if choice.get("text"):
                            if r.chunks == 0:
                                r.ttft = now - r.start
                            r.chunks += 1
                            r.chunk_times.append(now - r.start)
            r.latency = time.perf_counter() - r.start
            r.ok = r.chunks > 0
            if not r.ok:
                r.error = "no tokens streamed"
    except Exception as e:  # noqa: BLE001 - any failure is one failed request
        r.error = f"{type(e).__name__}: {e}"
        r.latency = time.perf_counter() - r.start
    return r


async def run_level(base_url: str, model: str, sessions: list[Session], concurrency: int | None,
                    request_rate: float | None, seed: int, extra: dict) -> tuple[list[Result], float]:
    url = base_url.rstrip("/") + "/v1/completions"
    limit = concurrency or 0
    # A fresh connection per request: llama-server closes idle keep-alive connections, and a
    # reused one then fails with "Server disconnected".
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=limit, force_close=True), timeout=timeout) as http:
        results: list[Result] = []

        async def run_session(s: Session) -> None:
            for req in s.requests:
                results.append(await send(http, url, model, req, extra))

        t0 = time.perf_counter()
        if concurrency:
            queue = list(reversed(sessions))

            async def worker() -> None:
                while queue:
                    await run_session(queue.pop())

            await asyncio.gather(*(worker() for _ in range(min(concurrency, len(sessions)))))
        else:
            rng = np.random.default_rng(seed)
            tasks = []
            for s in sessions:
                tasks.append(asyncio.create_task(run_session(s)))
                if request_rate and request_rate != float("inf"):
                    await asyncio.sleep(rng.exponential(1.0 / request_rate))
            await asyncio.gather(*tasks)
        return results, time.perf_counter() - t0


def pct(values: list[float], scale: float = 1000.0) -> dict:
    if not values:
        return {"mean": None, "median": None, "p90": None, "p99": None}
    a = np.asarray(values) * scale
    return {"mean": float(a.mean()), "median": float(np.median(a)),
            "p90": float(np.percentile(a, 90)), "p99": float(np.percentile(a, 99))}


def summarize(results: list[Result], duration: float, goodput: dict[str, float]) -> dict:
    ok = [r for r in results if r.ok]
    ttft = [r.ttft for r in ok]
    tpot = [(r.latency - r.ttft) / (r.output_tokens - 1) for r in ok if r.output_tokens > 1]
    itl = [b - a for r in ok for a, b in zip(r.chunk_times, r.chunk_times[1:])]
    e2e = [r.latency for r in ok]
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(max(r.usage_prompt_tokens, 0) for r in ok)

    def meets(r: Result) -> bool:
        t = (r.latency - r.ttft) / (r.output_tokens - 1) if r.output_tokens > 1 else 0.0
        return (r.ttft * 1000 <= goodput.get("ttft", float("inf")) and t * 1000 <= goodput.get("tpot", float("inf"))
                and r.latency * 1000 <= goodput.get("e2el", float("inf")))

    good = [r for r in ok if meets(r)]
    errors = sorted({r.error for r in results if not r.ok})
    return {
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "errors": errors[:5],
        "duration_s": duration,
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "total_chunks": sum(r.chunks for r in ok),
        "chunks_equal_usage_tokens": all(r.chunks == r.usage_completion_tokens for r in ok),
        "request_throughput": len(ok) / duration,
        "output_throughput": out_tokens / duration,
        "total_token_throughput": (in_tokens + out_tokens) / duration,
        "goodput_targets_ms": goodput,
        "request_goodput": len(good) / duration,
        "ttft_ms": pct(ttft),
        "tpot_ms": pct(tpot),
        "itl_ms": pct(itl),
        "e2el_ms": pct(e2e),
    }


def discover_model(base_url: str) -> str:
    import urllib.request
    with urllib.request.urlopen(base_url.rstrip("/") + "/v1/models", timeout=30) as f:
        return json.load(f)["data"][0]["id"]


def print_level(label: str, s: dict) -> None:
    print(f"[{label}] {s['completed']} ok, {s['failed']} failed in {s['duration_s']:.1f}s | "
          f"{s['request_throughput']:.2f} req/s, {s['output_throughput']:.1f} out tok/s | "
          f"TTFT med {s['ttft_ms']['median']:.1f} p99 {s['ttft_ms']['p99']:.1f} ms | "
          f"TPOT med {s['tpot_ms']['median']:.2f} ms | ITL med {s['itl_ms']['median']:.2f} p99 "
          f"{s['itl_ms']['p99']:.2f} ms | goodput {s['request_goodput']:.2f} req/s"
          + ("" if s["chunks_equal_usage_tokens"] else " | WARNING: chunks != usage tokens"), flush=True)


def parse_goodput(items: list[str]) -> dict[str, float]:
    out = {}
    for it in items or []:
        k, _, v = it.partition(":")
        if k not in ("ttft", "tpot", "e2el") or not v:
            raise SystemExit(f"--goodput takes ttft:MS, tpot:MS or e2el:MS, got {it!r}")
        out[k] = float(v)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--model", help="model name sent in requests (default: the first of /v1/models)")
    p.add_argument("--label", default="server", help="name of the server in the results and plot")
    p.add_argument("--dataset", choices=["random", "prefix", "code"], default="random")
    p.add_argument("--num-prompts", type=int, default=64, help="requests per level")
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--range-ratio", type=float, default=0.0)
    p.add_argument("--prefix-len", type=int, default=1024, help="prefix dataset: shared prefix tokens")
    p.add_argument("--turns", type=int, default=4, help="prefix dataset: turns per session")
    p.add_argument("--concurrency", type=int, nargs="*", default=[], help="fixed concurrency levels")
    p.add_argument("--request-rate", type=float, nargs="*", default=[], help="Poisson rates in req/s (inf = all at once)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=2, help="requests sent before each level, not counted")
    p.add_argument("--goodput", nargs="*", default=[], help="latency targets, e.g. ttft:500 tpot:50 e2el:5000")
    p.add_argument("--extra-body", default="{}", help="JSON merged into every request body")
    p.add_argument("--result-json", help="write the results here")
    p.add_argument("--plot", help="write a PNG of throughput and latency against concurrency")
    args = p.parse_args()
    if not args.concurrency and not args.request_rate:
        args.concurrency = [1]

    model = args.model or discover_model(args.base_url)
    sessions = build_sessions(args)
    goodput = parse_goodput(args.goodput)
    extra = json.loads(args.extra_body)
    levels = [("concurrency", c) for c in args.concurrency] + [("request_rate", r) for r in args.request_rate]
    out = {"label": args.label, "base_url": args.base_url, "model": model,
           "config": {k: v for k, v in vars(args).items() if k not in ("result_json", "plot")},
           "levels": []}
    for kind, value in levels:
        if args.warmup:
            warm = [Session([Request(random_words(random.Random(-1), 16), 4)]) for _ in range(args.warmup)]
            asyncio.run(run_level(args.base_url, model, warm, args.warmup, None, args.seed, extra))
        conc = value if kind == "concurrency" else None
        rate = value if kind == "request_rate" else None
        results, duration = asyncio.run(run_level(args.base_url, model, sessions, conc, rate, args.seed, extra))
        s = summarize(results, duration, goodput)
        s[kind] = value
        print_level(f"{args.label} {kind}={value}", s)
        out["levels"].append(s)
    if args.result_json:
        with open(args.result_json, "w") as f:
            json.dump(out, f, indent=1)
    if args.plot:
        from bench_plot import plot_runs
        plot_runs([out], args.plot)
    return 0 if all(s["failed"] == 0 for s in out["levels"]) else 1


if __name__ == "__main__":
    sys.exit(main())
