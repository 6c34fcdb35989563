#!/usr/bin/env python3
"""Prefill/decode disaggregation on this machine: what moves, and what it does to latency.

  .venv/bin/python scripts/bench_disaggregation.py bytes   [--out DIR]
  .venv/bin/python scripts/bench_disaggregation.py latency [--out DIR] [--rounds 2]

`bytes`: a producer and a consumer `ember serve` per model; prompts of growing length go through the
two phases; the KV bytes the producer held (its kv_transfer_params' num_bytes, equal to what the
consumer received) against what an all-full-attention cache of the same model would send
(tokens x layers x 2 x KV heads x head_dim x element bytes), and the consumer's transfers.

`latency`: a mixed workload (long prompts with short outputs beside short prompts with long,
streamed outputs) against one colocated instance with both cores, and against `ember router` in front
of a producer and a consumer with one core each; TTFT and inter-token latency percentiles of each
class. On 2 cores the split halves what each phase can use: the numbers show what one machine can.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/e2e"))
from serving import GEMMA, SMOLLM, Server, free_port  # noqa: E402

EMBER = pathlib.Path(os.environ.get("EMBER_BIN", ROOT / "build/release/tools/ember/ember"))


def kv_config(role):
    return json.dumps({"kv_connector": "UcxConnector", "kv_role": role, "kv_port": 0})


def gguf_kv_shape(path):
    import gguf  # noqa: PLC0415
    reader = gguf.GGUFReader(str(path))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()

    def field(name):
        return int(reader.fields[f"{arch}.{name}"].parts[-1][0])
    heads = field("attention.head_count")
    kv_heads = field("attention.head_count_kv")
    key_length = f"{arch}.attention.key_length"
    head_dim = int(reader.fields[key_length].parts[-1][0]) if key_length in reader.fields else (
        field("embedding_length") // heads)
    return field("block_count"), kv_heads, head_dim


def measure_bytes(out):
    rows = []
    for name, model, lengths, max_len in [("SmolLM2-135M", SMOLLM, [128, 512, 1536], 2048),
                                          ("Gemma 3 270M (5 sliding-512 : 1 full)", GEMMA, [128, 512, 2048, 6000], 8192)]:
        layers, kv_heads, head_dim = gguf_kv_shape(model)
        producer = Server(EMBER, "--kv-transfer-config", kv_config("kv_producer"), model=model, name="m",
                          max_model_len=max_len)
        consumer = Server(EMBER, "--kv-transfer-config", kv_config("kv_consumer"), model=model, name="m",
                          max_model_len=max_len)
        try:
            for n in lengths:
                # Token ids: the length is exact; each length its own ids, so that no prompt finds an
                # earlier one's prefix in the consumer's cache (which would move less).
                prompt = [100 + (n * 7 + i) % 20000 for i in range(n)]
                body = {"model": "m", "prompt": prompt, "max_tokens": 2, "temperature": 0}
                status, answer = producer.json("POST", "/v1/completions", dict(
                    body, max_tokens=1, kv_transfer_params={"do_remote_decode": True}))
                assert status == 200, answer
                params = answer["kv_transfer_params"]
                before = consumer.metric("ember:kv_transfer_received_bytes_total")
                start = time.time()
                status, answer = consumer.json("POST", "/v1/completions", dict(body, kv_transfer_params=params))
                decode_s = time.time() - start
                assert status == 200, answer
                received = consumer.metric("ember:kv_transfer_received_bytes_total") - before
                held = params["remote_num_tokens"]
                all_full = held * layers * 2 * kv_heads * head_dim * 2  # f16 KV (GGUF models' default)
                rows.append({"model": name, "prompt_tokens": n, "bytes": received, "all_full_bytes": all_full,
                             "ratio": received / all_full, "consumer_request_s": decode_s})
                print(f"{name:40s} {n:6d} tokens: {received / 1e6:8.2f} MB moved, all-full {all_full / 1e6:8.2f} MB, "
                      f"ratio {received / all_full:.3f}, consumer request {decode_s * 1e3:.0f} ms", flush=True)
            rows.append({"model": name, "transfers": consumer.metric("ember:kv_transfer_received_total"),
                         "requests": len(lengths)})
        finally:
            producer.stop()
            consumer.stop()
    (out / "bytes.json").write_text(json.dumps(rows, indent=1))


def stream(port, body, path="/v1/completions", timeout=300):
    """One streamed request: (ttft_s, [inter-token gaps], ok)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    start = time.time()
    conn.request("POST", path, json.dumps(dict(body, stream=True)), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        return None, [], False
    times = []
    for raw in resp:
        line = raw.decode().strip()
        if line.startswith("data: ") and line != "data: [DONE]":
            chunk = json.loads(line[6:])
            if chunk.get("choices") and chunk["choices"][0].get("text"):
                times.append(time.time())
    conn.close()
    if not times:
        return None, [], False
    return times[0] - start, [b - a for a, b in zip(times, times[1:])], True


def percentile(values, q):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def mixed_load(port, seconds_budget=120):
    """4 streams of short prompts with 96 output tokens each, back to back; meanwhile long prompts
    (1,500 tokens, 4 output tokens) one after another. Bounded: 12 short, 6 long requests."""
    results = {"short": [], "long": []}
    lock = threading.Lock()

    def short_worker(k):
        for i in range(3):
            r = stream(port, {"model": "m", "prompt": f"Tell me a story about the number {k * 10 + i}.",
                              "max_tokens": 96, "temperature": 0, "ignore_eos": True})
            with lock:
                results["short"].append(r)

    def long_worker():
        for i in range(6):
            prompt = list(range(200 + i, 200 + i + 1500))
            r = stream(port, {"model": "m", "prompt": prompt, "max_tokens": 4, "temperature": 0, "ignore_eos": True})
            with lock:
                results["long"].append(r)

    threads = [threading.Thread(target=short_worker, args=(k,)) for k in range(4)] + [threading.Thread(target=long_worker)]
    start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds_budget)
    elapsed = time.time() - start
    summary = {"elapsed_s": elapsed}
    for kind, rs in results.items():
        ok = [r for r in rs if r[2]]
        ttft = [r[0] for r in ok]
        gaps = [g for r in ok for g in r[1]]
        summary[kind] = {"requests": len(rs), "ok": len(ok), "ttft_p50_ms": percentile(ttft, 0.5) * 1e3,
                         "ttft_p99_ms": percentile(ttft, 0.99) * 1e3, "itl_p50_ms": percentile(gaps, 0.5) * 1e3,
                         "itl_p99_ms": percentile(gaps, 0.99) * 1e3}
    return summary


def start_router(prefill_port, decode_port):
    port = free_port()
    proc = subprocess.Popen([str(EMBER), "router", "--port", str(port), "--prefill", f"http://127.0.0.1:{prefill_port}",
                             "--decode", f"http://127.0.0.1:{decode_port}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return proc, port
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"ember router did not become healthy: {proc.stderr.read()}")


def measure_latency(out, rounds):
    runs = []
    common = ["--max-num-seqs", "16"]
    for r in range(rounds):
        for shape in ("colocated", "disaggregated"):
            if shape == "colocated":
                servers = [Server(EMBER, "--threads", 2, *common, name="m", max_model_len=2048)]
                port, router = servers[0].port, None
            else:
                servers = [Server(EMBER, "--threads", 1, *common, "--kv-transfer-config", kv_config(role), name="m",
                                  max_model_len=2048) for role in ("kv_producer", "kv_consumer")]
                router, port = start_router(servers[0].port, servers[1].port)
            try:
                summary = mixed_load(port)
            finally:
                if router is not None:
                    router.send_signal(signal.SIGTERM)
                    router.wait(timeout=30)
                for s in servers:
                    s.stop()
            summary.update(shape=shape, round=r)
            runs.append(summary)
            print(json.dumps(summary), flush=True)
    (out / "latency.json").write_text(json.dumps(runs, indent=1))
    for shape in ("colocated", "disaggregated"):
        rows = [x for x in runs if x["shape"] == shape]
        med = lambda kind, key: statistics.median(x[kind][key] for x in rows)  # noqa: E731
        print(f"{shape:14s} short: TTFT p50 {med('short', 'ttft_p50_ms'):7.0f} ms, ITL p50 {med('short', 'itl_p50_ms'):6.1f}"
              f" ms, p99 {med('short', 'itl_p99_ms'):7.1f} ms | long: TTFT p50 {med('long', 'ttft_p50_ms'):7.0f} ms,"
              f" p99 {med('long', 'ttft_p99_ms'):7.0f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["bytes", "latency"])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "bench/results/disagg_s19")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.what == "bytes":
        measure_bytes(args.out)
    else:
        measure_latency(args.out, args.rounds)


if __name__ == "__main__":
    main()
