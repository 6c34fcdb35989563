#!/usr/bin/env python3
"""Abuse and soak test for `ember serve`: mixed requests from many concurrent connections —
valid completions and chats (streaming and not, JSON-schema constrained, without max_tokens) beside
hostile ones (malformed and deeply nested JSON, invalid UTF-8, wrong types, 9 MiB and chunked
bombs, oversized heads, paths that are not UTF-8, wrong methods, pipelined pairs, slowloris heads,
giant prompt lists, clients that disconnect mid-stream) — then checks that the server never
crashed, answered no 5xx, returned its KV cache to zero and kept its memory flat.

  # a bounded burst (two halves, memory compared between them)
  scripts/load_test.py --ember build/release/tools/ember/ember --model ~/.cache/ember/models/SmolLM2-135M-Instruct.Q4_1.gguf
  # the soak: rounds of --round-requests until --duration seconds have passed, memory sampled each round
  scripts/load_test.py --ember ... --model ... --duration 1800 --concurrency 64 --result-json soak.json
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

# What each kind of request may be answered with. "closed": the server hung up without an answer
# (a slowloris head past --header-timeout); "reset": it hung up while we were still sending (a
# body bomb it refused early). Anything else, and any 5xx at all, fails the run.
EXPECTED = {
    "completion": {200}, "stream": {200}, "chat": {200}, "chat_stream": {200}, "chat_default_max": {200},
    "json_schema": {200}, "disconnect": {200, "reset"}, "pipelined": {"200+200"},
    "malformed": {400}, "deep_nesting": {400}, "bad_utf8": {400}, "wrong_type": {400}, "unknown_model": {404},
    "overlong": {400}, "many_prompts": {400}, "huge": {413, "reset"}, "chunked_bomb": {413, "reset"},
    "big_head": {431, "reset"}, "bad_path": {404}, "wrong_method": {405}, "slowloris": {"closed", 408, "reset"},
}
WEIGHTS = {
    "completion": 14, "stream": 10, "chat": 8, "chat_stream": 8, "chat_default_max": 3, "json_schema": 4,
    "disconnect": 10, "pipelined": 4, "malformed": 6, "deep_nesting": 3, "bad_utf8": 4, "wrong_type": 6,
    "unknown_model": 3, "overlong": 3, "many_prompts": 2, "huge": 2, "chunked_bomb": 2, "big_head": 2,
    "bad_path": 2, "wrong_method": 2, "slowloris": 2,
}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                            "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}


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


def http(method, path, body=b"", extra=b"", close=True):
    return (f"{method} ".encode() + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
            extra + f"Content-Length: {len(body)}\r\n".encode() + (b"Connection: close\r\n" if close else b"") +
            b"\r\n" + body)


class Plan:
    """One request: the bytes to send (a list of parts, sent `pause` seconds apart), how many SSE
    events to read before hanging up (None: read to the end), and how long to hold a half-sent
    head before giving up on the server."""

    def __init__(self, kind, parts, disconnect_after=None, pause=0.0, hold=0.0):
        self.kind, self.parts, self.disconnect_after, self.pause, self.hold = kind, parts, disconnect_after, pause, hold


def make_plan(rng):
    kind = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
    prompt = " ".join(rng.choice(["the", "cat", "sat", "on", "a", "mat", "and", "then", "it", "slept"])
                      for _ in range(rng.randint(1, 40)))
    n_tokens = rng.randint(1, 24)
    body = {"model": "m", "prompt": prompt, "max_tokens": n_tokens, "temperature": rng.choice([0, 0.7, 1.0])}
    chat = {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": n_tokens}
    post = lambda path, b: [http("POST", path, json.dumps(b).encode())]
    if kind == "completion":
        return Plan(kind, post(b"/v1/completions", body))
    if kind == "stream":
        return Plan(kind, post(b"/v1/completions", {**body, "stream": True}))
    if kind == "chat":
        return Plan(kind, post(b"/v1/chat/completions", chat))
    if kind == "chat_stream":
        return Plan(kind, post(b"/v1/chat/completions", {**chat, "stream": True}))
    if kind == "chat_default_max":
        return Plan(kind, post(b"/v1/chat/completions", {k: v for k, v in chat.items() if k != "max_tokens"}))
    if kind == "json_schema":
        fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
        return Plan(kind, post(b"/v1/chat/completions", {**chat, "max_tokens": 40, "response_format": fmt}))
    if kind == "disconnect":
        return Plan(kind, post(b"/v1/completions", {**body, "stream": True, "max_tokens": 200, "ignore_eos": True}),
                    disconnect_after=rng.randint(1, 5))
    if kind == "pipelined":
        first = http("POST", b"/v1/completions", json.dumps(body).encode(), close=False)
        return Plan(kind, [first + http("POST", b"/v1/chat/completions", json.dumps(chat).encode())])
    if kind == "malformed":
        return Plan(kind, [http("POST", b"/v1/completions", json.dumps(body).encode()[: rng.randint(0, 30)])])
    if kind == "deep_nesting":
        depth = rng.choice([200, 10_000, 100_000])
        return Plan(kind, [http("POST", b"/v1/completions", b'{"prompt":' + b"[" * depth + b"]" * depth + b"}")])
    if kind == "bad_utf8":
        raw = json.dumps(body).encode().replace(b"the", rng.choice([b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80"]), 1)
        if raw == json.dumps(body).encode():
            raw = raw.replace(b'"m"', b'"\xff"')
        return Plan(kind, [http("POST", b"/v1/completions", raw)])
    if kind == "wrong_type":
        field = rng.choice(["temperature", "max_tokens", "n", "stop", "top_p", "seed"])
        value = rng.choice(["x", [1], {"a": 1}, -5, 1e30])
        if field == "stop" and value == "x":
            value = 5
        if field == "seed" and value == -5:
            value = "x"
        return Plan(kind, post(b"/v1/completions", {**body, field: value}))
    if kind == "unknown_model":
        return Plan(kind, post(b"/v1/completions", {**body, "model": "nope"}))
    if kind == "overlong":
        return Plan(kind, post(b"/v1/completions", {**body, "prompt": "word " * 5000}))
    if kind == "many_prompts":
        return Plan(kind, post(b"/v1/completions", {**body, "prompt": ["a b"] * 1000}))
    if kind == "huge":
        return Plan(kind, post(b"/v1/completions", {**body, "prompt": "x" * (9 << 20)}))
    if kind == "chunked_bomb":
        head = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        chunk = b"%x\r\n" % (1 << 16) + b"x" * (1 << 16) + b"\r\n"
        return Plan(kind, [head] + [chunk * 16] * 10 + [b"0\r\n\r\n"])
    if kind == "big_head":
        return Plan(kind, [http("GET", b"/health", extra=b"X-Junk: " + b"a" * (20 << 10) + b"\r\n")])
    if kind == "bad_path":
        return Plan(kind, [http("GET", rng.choice([b"/\xff\xfe", b"/v1/\xc3(", b"/%ff%00"]))])
    if kind == "wrong_method":
        return Plan(kind, [http(rng.choice(["GET", "DELETE", "PUT"]), b"/v1/completions")])
    # slowloris: half a head, a byte now and then, never finished; the server must drop it.
    return Plan(kind, [b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"] + [b"X"] * 3, pause=0.5, hold=30.0)


def statuses_in(data):
    """The statuses of the responses in `data`, one after another (bodies sized by Content-Length;
    a response without one runs to the end)."""
    found = []
    while data.startswith(b"HTTP/1.1 "):
        head, sep, rest = data.partition(b"\r\n\r\n")
        found.append(int(head.split()[1]))
        length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
        if not sep or not length:
            break
        data = rest[length[0]:]
    return found


async def one(port, plan):
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 22)
    try:
        for i, part in enumerate(plan.parts):
            if i and plan.pause:
                await asyncio.sleep(plan.pause)
            writer.write(part)
            await writer.drain()
        if plan.disconnect_after is not None:
            status_line = await asyncio.wait_for(reader.readline(), 300)
            status = int(status_line.split()[1]) if status_line else "closed"
            events = 0
            while status == 200 and events < plan.disconnect_after:
                line = await asyncio.wait_for(reader.readline(), 300)
                if not line:
                    break
                events += line.startswith(b"data: ")
            return status
        data = await asyncio.wait_for(reader.read(), 300 if not plan.hold else plan.hold)
        if plan.kind == "pipelined":
            return "+".join(map(str, statuses_in(data))) or "closed"
        found = statuses_in(data)
        return found[0] if found else "closed"
    except (ConnectionResetError, BrokenPipeError):
        return "reset"
    except asyncio.TimeoutError:
        return "timeout"
    finally:
        writer.close()


async def run(port, total, concurrency, rng):
    plans = [make_plan(rng) for _ in range(total)]
    sem = asyncio.Semaphore(concurrency)
    results = collections.Counter()

    async def guarded(plan):
        async with sem:
            results[(plan.kind, await one(port, plan))] += 1

    await asyncio.gather(*(guarded(p) for p in plans))
    return results


def wait_idle(port, within):
    """Seconds until running and waiting are 0 and the KV cache is empty, or None."""
    start = time.time()
    while time.time() - start < within:
        if (metric(port, "ember:num_requests_running") == 0 and metric(port, "ember:num_requests_waiting") == 0
                and metric(port, "ember:kv_cache_usage_perc") == 0):
            return time.time() - start
        time.sleep(0.2)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ember", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--requests", type=int, default=2000, help="without --duration: requests in all, in two halves")
    ap.add_argument("--duration", type=float, help="soak: run rounds of --round-requests for this many seconds")
    ap.add_argument("--round-requests", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--result-json", help="also write the report here")
    args = ap.parse_args()

    port = free_port()
    # Room for every connection's request in the queue, so no 503 is expected: the run then
    # tolerates no 5xx at all.
    proc = subprocess.Popen([args.ember, "serve", args.model, "--port", str(port), "--served-model-name", "m",
                             "--max-model-len", "1024", "--kv-cache-memory", "128MiB", "--max-num-seqs", "16",
                             "--max-waiting-requests", str(2 * args.concurrency + 16), "--default-max-tokens", "64",
                             "--header-timeout", "3", "--body-timeout", "10"],
                            stderr=subprocess.PIPE, text=True)
    launched = time.time()
    for _ in range(1200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            break
        except OSError:
            time.sleep(0.05)
    ready_seconds = time.time() - launched
    rng = random.Random(args.seed)
    rounds = [] if args.duration else [args.requests // 2, args.requests - args.requests // 2]
    results = collections.Counter()
    samples = [rss_kib(proc.pid)]
    start = time.time()
    done = 0
    while rounds or (args.duration and time.time() - start < args.duration):
        n = rounds.pop(0) if rounds else args.round_requests
        results += asyncio.run(run(port, n, args.concurrency, rng))
        done += n
        samples.append(rss_kib(proc.pid))
        if args.duration:
            print(f"  {time.time() - start:7.0f} s  {done} requests  rss {samples[-1] // 1024} MiB", flush=True)
    elapsed = time.time() - start
    alive = proc.poll() is None
    idle_after = wait_idle(port, 30) if alive else None
    health = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10).status if alive else 0
    proc.terminate()
    code = proc.wait(timeout=60)

    by_status = collections.Counter()
    unexpected = collections.Counter()
    for (kind, status), n in sorted(results.items(), key=str):
        by_status[status] += n
        if status not in EXPECTED[kind]:
            unexpected[f"{kind} {status}"] += n
        print(f"  {kind:16s} {status!s:8s} {n}")
    fivexx = sum(n for (kind, s), n in results.items()
                 if any(int(x) >= 500 for x in str(s).split("+") if x.isdigit()))
    # Memory: the first sample after warm-up (the first round fills the allocator's arenas and the
    # compiler cache) against the last.
    warm, last = samples[1], samples[-1]
    flat = last <= warm * 1.2 + 20000
    report = {"requests": done, "concurrency": args.concurrency, "ready_seconds": round(ready_seconds, 2),
              "seconds": round(elapsed, 1), "requests_per_s": round(done / elapsed, 1),
              "by_status": {str(k): v for k, v in by_status.items()}, "server_alive": alive, "5xx": fivexx,
              "unexpected": dict(unexpected), "idle_after_s": idle_after, "health_after": health,
              "rss_kib": samples if len(samples) <= 200 else samples[::len(samples) // 100],
              "rss_flat": flat, "exit_code": code}
    print(json.dumps(report))
    if args.result_json:
        with open(args.result_json, "w") as f:
            json.dump(report, f, indent=1)
    ok = alive and fivexx == 0 and not unexpected and idle_after is not None and health == 200 and code == 0 and flat
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
