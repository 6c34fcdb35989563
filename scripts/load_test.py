#!/usr/bin/env python3
"""Abuse test for `ember serve`: thousands of mixed requests from many concurrent connections —
valid completions and chats (streaming and not), malformed JSON, wrong types, oversized bodies,
unknown models, clients that disconnect mid-stream — then checks that the server never crashed,
answered no 5xx except intended 503s, returned its KV cache to zero and kept its memory flat.

  scripts/load_test.py --ember build/release/tools/ember/ember --model ~/.cache/ember/models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import asyncio
import collections
import json
import random
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)


def make_request(rng):
    """(kind, raw HTTP body, path, disconnect_after_events)"""
    kind = rng.choices(["completion", "stream", "chat", "chat_stream", "malformed", "wrong_type", "unknown_model",
                        "huge", "disconnect", "overlong"],
                       weights=[20, 15, 10, 10, 10, 10, 5, 3, 12, 5])[0]
    prompt = " ".join(rng.choice(["the", "cat", "sat", "on", "a", "mat", "and", "then", "it", "slept"])
                      for _ in range(rng.randint(1, 40)))
    n_tokens = rng.randint(1, 24)
    body = {"model": "m", "prompt": prompt, "max_tokens": n_tokens, "temperature": rng.choice([0, 0.7, 1.0])}
    chat = {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": n_tokens}
    if kind == "completion":
        return kind, json.dumps(body), "/v1/completions", None
    if kind == "stream":
        return kind, json.dumps({**body, "stream": True}), "/v1/completions", None
    if kind == "chat":
        return kind, json.dumps(chat), "/v1/chat/completions", None
    if kind == "chat_stream":
        return kind, json.dumps({**chat, "stream": True}), "/v1/chat/completions", None
    if kind == "malformed":
        return kind, json.dumps(body)[: rng.randint(0, 30)], "/v1/completions", None
    if kind == "wrong_type":
        field = rng.choice(["temperature", "max_tokens", "n", "stop", "top_p", "seed"])
        return kind, json.dumps({**body, field: rng.choice(["x", [1], {"a": 1}, -5, 1e30])}), "/v1/completions", None
    if kind == "unknown_model":
        return kind, json.dumps({**body, "model": "nope"}), "/v1/completions", None
    if kind == "huge":
        return kind, json.dumps({**body, "prompt": "x" * (9 << 20)}), "/v1/completions", None
    if kind == "overlong":
        return kind, json.dumps({**body, "prompt": "word " * 5000}), "/v1/completions", None
    return kind, json.dumps({**body, "stream": True, "max_tokens": 200, "ignore_eos": True}), "/v1/completions", \
        rng.randint(1, 5)


async def one(port, kind, body, path, disconnect_after):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = body.encode()
    writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
    try:
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 300)
        status = int(status_line.split()[1]) if status_line else 0
        if disconnect_after is not None and status == 200:
            events = 0
            while events < disconnect_after:
                line = await asyncio.wait_for(reader.readline(), 300)
                if not line:
                    break
                events += line.startswith(b"data: ")
            return kind, status
        await asyncio.wait_for(reader.read(), 300)
        return kind, status
    except (ConnectionResetError, BrokenPipeError):
        return kind, "reset"
    finally:
        writer.close()


async def run(port, total, concurrency, seed):
    rng = random.Random(seed)
    requests = [make_request(rng) for _ in range(total)]
    sem = asyncio.Semaphore(concurrency)
    results = collections.Counter()

    async def guarded(r):
        async with sem:
            kind, status = await one(port, *r)
            results[(kind, status)] += 1

    await asyncio.gather(*(guarded(r) for r in requests))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ember", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--result-json", help="also write the report here")
    args = ap.parse_args()

    port = free_port()
    proc = subprocess.Popen([args.ember, "serve", args.model, "--port", str(port), "--served-model-name", "m",
                             "--max-model-len", "1024", "--kv-cache-memory", "128MiB", "--max-num-seqs", "16",
                             "--max-waiting-requests", "30"], stderr=subprocess.PIPE, text=True)
    launched = time.time()
    for _ in range(1200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            break
        except OSError:
            time.sleep(0.05)
    ready_seconds = time.time() - launched
    rss_start = rss_kib(proc.pid)
    start = time.time()
    half = asyncio.run(run(port, args.requests // 2, args.concurrency, args.seed))
    rss_mid = rss_kib(proc.pid)
    rest = asyncio.run(run(port, args.requests - args.requests // 2, args.concurrency, args.seed + 1))
    elapsed = time.time() - start
    results = half + rest
    time.sleep(1.0)
    alive = proc.poll() is None
    running = metric(port, "ember:num_requests_running") if alive else -1
    kv = metric(port, "ember:kv_cache_usage_perc") if alive else -1
    rss_end = rss_kib(proc.pid) if alive else 0
    proc.terminate()
    code = proc.wait(timeout=60)

    by_status = collections.Counter()
    for (kind, status), n in sorted(results.items(), key=str):
        by_status[status] += n
        print(f"  {kind:14s} {status!s:6s} {n}")
    bad = {s: n for s, n in by_status.items() if isinstance(s, int) and s >= 500 and s != 503}
    report = {"requests": args.requests, "concurrency": args.concurrency, "ready_seconds": round(ready_seconds, 2),
              "seconds": round(elapsed, 1), "requests_per_s": round(args.requests / elapsed, 1), "by_status": {str(k): v for k, v in by_status.items()},
              "server_alive": alive, "unexpected_5xx": bad, "running_after": running, "kv_usage_after": kv,
              "rss_kib": [rss_start, rss_mid, rss_end], "exit_code": code}
    print(json.dumps(report))
    if args.result_json:
        with open(args.result_json, "w") as f:
            json.dump(report, f, indent=1)
    ok = alive and not bad and running == 0 and kv == 0 and code == 0 and rss_end < rss_mid * 1.2 + 20000
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
