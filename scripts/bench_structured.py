#!/usr/bin/env python3
"""Structured outputs' cost in one run of `ember serve`: output tokens/s of chat requests with a JSON
schema vs the same requests without one, at each concurrency (interleaved rounds, so drift on a
shared machine hits both alike), and the compile time of each schema in a suite (the server's own
measurement, logged at debug level, plus the first-request overhead it causes).

Every request generates exactly --max-tokens tokens: the unconstrained ones ignore EOS, the
constrained ones follow a schema (an array of at least 1000 short strings) that cannot close
sooner. Standard library only; the server runs on loopback.

  scripts/bench_structured.py --model ~/.cache/ember/models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      --concurrency 1,16 --max-tokens 128 --rounds 3 --out bench/results/structured_smollm2.json
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LONG_SCHEMA = {"type": "array", "items": {"type": "string", "maxLength": 12}, "minItems": 1000}
SUITE = {
    "object": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
               "required": ["name", "age"], "additionalProperties": False},
    "nested_refs": {"$defs": {"a": {"type": "object", "properties": {"city": {"type": "string"}},
                                    "required": ["city"]}},
                    "type": "object", "properties": {"home": {"$ref": "#/$defs/a"},
                                                     "work": {"$ref": "#/$defs/a"}}},
    "enums_formats": {"type": "object", "properties": {"c": {"enum": ["red", "green"]},
                                                       "d": {"type": "string", "format": "date-time"},
                                                       "e": {"type": "string", "format": "email"}}},
    "bounded_numbers": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -50, "maximum": 12345},
                                                         "y": {"type": "number", "minimum": 0, "maximum": 1}}},
    "tool_like": {"type": "object", "properties": {
        "path": {"type": "string"}, "line": {"type": "integer", "minimum": 1},
        "edits": {"type": "array", "items": {"type": "object", "properties": {
            "old": {"type": "string"}, "new": {"type": "string"}}, "required": ["old", "new"]}}},
        "required": ["path", "edits"], "additionalProperties": False},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port: int, body: dict) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    out = json.loads(resp.read())
    conn.close()
    if resp.status != 200:
        raise RuntimeError(out)
    return out


def run_level(port: int, model: str, concurrency: int, max_tokens: int, constrained: bool) -> float:
    """Output tokens/s of 2 x concurrency requests sent `concurrency` at a time."""
    def one(i: int) -> int:
        body = {"model": model, "messages": [{"role": "user", "content": f"List {i + 3} fruits."}],
                "max_tokens": max_tokens, "temperature": 0}
        if constrained:
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "long", "schema": LONG_SCHEMA}}
        else:
            body["ignore_eos"] = True
        out = post(port, body)
        return out["usage"]["completion_tokens"]

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        tokens = sum(pool.map(one, range(2 * concurrency)))
    return tokens / (time.perf_counter() - start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ember", default=str(ROOT / "build/release/tools/ember/ember"))
    ap.add_argument("--concurrency", default="1,16")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()

    port = free_port()
    log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_structured_{port}.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([args.ember, "serve", args.model, "--port", str(port), "--served-model-name", "m",
                             "--max-model-len", "1024", "--max-num-seqs", "16", "--no-enable-prefix-caching"],
                            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "EMBER_LOG_LEVEL": "debug"})
    try:
        deadline = time.time() + 120
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError(f"server did not start; see {log_path}")
            time.sleep(0.3)

        # Compile time: each suite schema's first request (compiles) against its second (cached).
        compile_rows = []
        for name, schema in SUITE.items():
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1,
                    "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}}
            times = []
            for _ in range(2):
                t = time.perf_counter()
                post(port, body)
                times.append(time.perf_counter() - t)
            compile_rows.append({"schema": name, "first_request_s": times[0], "cached_request_s": times[1]})
        log.flush()
        logged = [float(m) for m in re.findall(r"compiled a json_schema constraint in ([0-9.]+) ms", log_path.read_text())]
        for row, ms in zip(compile_rows, logged):
            row["compile_ms"] = ms

        run_level(port, "m", 2, 16, True)  # warm-up (compiles LONG_SCHEMA)
        results = []
        for c in [int(x) for x in args.concurrency.split(",")]:
            plain, schema = [], []
            for _ in range(args.rounds):
                plain.append(run_level(port, "m", c, args.max_tokens, False))
                schema.append(run_level(port, "m", c, args.max_tokens, True))
            row = {"concurrency": c, "plain_tok_s": statistics.median(plain), "schema_tok_s": statistics.median(schema),
                   "plain_rounds": plain, "schema_rounds": schema}
            row["ratio"] = row["schema_tok_s"] / row["plain_tok_s"]
            results.append(row)
            print(f"concurrency {c}: plain {row['plain_tok_s']:.1f} tok/s, json schema {row['schema_tok_s']:.1f} tok/s, "
                  f"ratio {row['ratio']:.3f}", flush=True)
        for row in compile_rows:
            print(f"compile {row['schema']}: {row.get('compile_ms', float('nan')):.2f} ms (first request "
                  f"{row['first_request_s'] * 1e3:.1f} ms, cached {row['cached_request_s'] * 1e3:.1f} ms)")
        report = {"model": args.model, "max_tokens": args.max_tokens, "rounds": args.rounds, "throughput": results,
                  "compile": compile_rows, "command": " ".join(sys.argv)}
        if args.out:
            Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
