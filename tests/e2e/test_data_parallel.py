"""Data-parallel attention with expert parallelism (DEP) end to end on the tiny Muse Spark model
(tests/golden/muse_spark/tiny_a: 6 MoE layers of 8 experts): `--data-parallel-size 2
--enable-expert-parallel` starts two ranks with mpirun, each with its own scheduler, requests and KV
cache and whole attention, the experts split 4 and 4, and every MoE layer exchanging its tokens
with the other rank. Attention is whole on each rank and the expert-parallel MoE adds each token's
expert outputs in expert-index order as one process does, so greedy tokens and logprobs must be
bitwise those of one process: with one prompt (rank 1 gets no request at all and joins every
step's MoE exchanges with 0 tokens), with several prompts spread over both ranks, and served
concurrently. A rank that dies ends the job with errors within seconds, and one that hangs is named
by rank 0's --rank-timeout."""
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest

from serving import Server
from test_expert_load import tiny_dir  # noqa: F401 (a fixture: tiny_a with a byte-level tokenizer)
from test_tensor_parallel import expect_a_killed_worker_ends_the_job, start_long_request, worker_rank_pid

DEP = ["--data-parallel-size", "2", "--enable-expert-parallel"]
PROMPTS = [[1, 17, 300, 42, 7, 99, 5], [3, 8, 13, 21, 34], [200, 100, 50, 25, 12, 6, 3, 1], [9, 9, 9]]


def run(ember_bin, *args, ok=True, timeout=180):
    proc = subprocess.run([str(ember_bin), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def generate_json(ember_bin, model, *extra):
    proc = run(ember_bin, "generate", "--model", model, "--json", "--top-logprobs", "2", "--prompt-ids",
               ",".join(map(str, PROMPTS[0])), "--max-tokens", "24", "--ignore-eos", *extra)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0]), proc.stderr


@pytest.mark.parametrize("kv", ["f32", "bf16"])
def test_one_prompt_with_an_idle_rank_is_bitwise_one_process(ember_bin, golden_dir, kv):
    model = golden_dir / "tiny_a"
    one, _ = generate_json(ember_bin, model, "--kv-cache-dtype", kv)
    dep, log = generate_json(ember_bin, model, "--kv-cache-dtype", kv, *DEP)
    assert dep["token_ids"] == one["token_ids"], log
    assert dep["logprobs"] == one["logprobs"], log  # every float's printed digits, top-2 included
    assert "data-parallel rank 1 of 2" in log, log
    assert "expert parallelism (DEP): 4 of the 8 experts of every MoE layer on this rank" in log, log


def test_prompts_spread_over_both_ranks_decode_as_one_process(ember_bin, golden_dir, tmp_path):
    jobs = tmp_path / "prompts.jsonl"
    jobs.write_text("".join(json.dumps({"prompt": p, "max_tokens": 16 + 4 * i, "temperature": 0, "ignore_eos": True})
                            + "\n" for i, p in enumerate(PROMPTS)))
    model = golden_dir / "tiny_a"

    def answers(*extra):
        proc = run(ember_bin, "generate", "--model", model, "--jsonl", jobs, "--kv-cache-dtype", "f32", *extra)
        return [json.loads(line)["token_ids"] for line in proc.stdout.splitlines() if line.startswith("{")]

    one = answers()
    assert len(one) == len(PROMPTS) and all(one)
    assert answers(*DEP) == one


def test_refusals_say_what_to_change(ember_bin, golden_dir):
    model = golden_dir / "tiny_a"
    base = ["generate", "--model", model, "--prompt-ids", "1,2", "--max-tokens", "2"]
    proc = run(ember_bin, *base, "--data-parallel-size", "2", ok=False, timeout=60)
    assert proc.returncode != 0 and "add --enable-expert-parallel" in proc.stderr, proc.stderr
    proc = run(ember_bin, *base, *DEP, "--pipeline-parallel-size", "2", ok=False, timeout=60)
    assert proc.returncode != 0 and "not supported yet" in proc.stderr, proc.stderr
    proc = run(ember_bin, *base, *DEP, "--speculative-config", '{"method":"ngram","num_speculative_tokens":2}',
               ok=False, timeout=120)
    assert proc.returncode != 0 and "speculative decoding is not supported with --data-parallel-size" in proc.stderr, (
        proc.stderr)
    proc = run(ember_bin, "generate", "--model", golden_dir.parent / "hf_dense/llama", "--prompt-ids", "1,2", *DEP,
               ok=False, timeout=120)
    assert proc.returncode != 0 and "has no routed experts" in proc.stderr, proc.stderr
    # 8 experts over 3 ranks.
    proc = run(ember_bin, *base, "--data-parallel-size", "3", "--enable-expert-parallel", ok=False, timeout=120)
    assert proc.returncode != 0 and "routed experts of a layer over the data-parallel ranks" in proc.stderr, (
        proc.stderr)


def serve(ember_bin, tiny_dir, *args, max_model_len=512):
    return Server(ember_bin, "--threads", "1", "--kv-cache-dtype", "f32", *args, model=tiny_dir, name="m",
                  max_model_len=max_model_len)


def complete_with_logprobs(server, prompt, max_tokens):
    status, body = server.json("POST", "/v1/completions", {"model": "m", "prompt": prompt, "temperature": 0,
                                                            "max_tokens": max_tokens, "ignore_eos": True,
                                                            "logprobs": 2})
    assert status == 200, body
    choice = body["choices"][0]
    return choice["text"], choice["logprobs"]["token_logprobs"]


def dp_series(server, name):
    _, text = server.request("GET", "/metrics")
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(rf'^{re.escape(name)}\{{model_name="m",dp_rank="(\d+)"\}} (\S+)$', text, re.M)}


def expert_tokens_per_layer(server):
    _, text = server.request("GET", "/metrics")
    sums = {}
    for m in re.finditer(r'^ember:expert_tokens_total\{model_name="m",layer="(\d+)",expert="\d+"\} (\S+)$', text, re.M):
        sums[int(m.group(1))] = sums.get(int(m.group(1)), 0) + float(m.group(2))
    return sums


def concurrent_answers(server, busy=None):
    """Every prompt at once (a thread each); `busy`, if given, collects the most requests each
    data-parallel rank ran at any time while they were in flight."""
    results = [None] * len(PROMPTS)
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, complete_with_logprobs(server, PROMPTS[i], 256)))
               for i in range(len(PROMPTS))]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        if busy is not None:
            for rank, running in dp_series(server, "ember:dp_rank_num_requests_running").items():
                busy[rank] = max(busy.get(rank, 0), running)
        time.sleep(0.005)
    for t in threads:
        t.join()
    return results


def test_concurrent_requests_are_spread_and_answer_as_one_process(ember_bin, tiny_dir):
    server = serve(ember_bin, tiny_dir)
    try:
        one = concurrent_answers(server)
    finally:
        server.stop()
    server = serve(ember_bin, tiny_dir, *DEP)
    busy = {}
    try:
        dep = concurrent_answers(server, busy)
        kv = dp_series(server, "ember:dp_rank_kv_cache_usage_perc")
        waiting = dp_series(server, "ember:dp_rank_num_requests_waiting")
        expert_tokens = expert_tokens_per_layer(server)
    finally:
        code = server.stop()
        log = server.log()
    assert dep == one, log
    assert busy.get(0, 0) >= 1 and busy.get(1, 0) >= 1, (busy, log)  # both ranks ran requests
    assert set(kv) == {0, 1} and set(waiting) == {0, 1}, (kv, waiting)
    # Rank 0's expert load is both ranks' (the MoE exchanges share the counts, idle steps included):
    # every computed token (a prompt, and every output token but the last) top_k = 2 times per layer.
    computed = sum(len(p) + 256 - 1 for p in PROMPTS)
    assert expert_tokens == {layer: computed * 2 for layer in range(6)}, expert_tokens
    assert code == 1 and "server stopped" in log, log  # SIGTERM through mpirun, as under TP


def test_a_dying_rank_ends_the_job_with_errors_not_a_hang(ember_bin, tiny_dir):
    # A request far longer than the second before the kill (tiny_a decodes about a token per millisecond).
    expect_a_killed_worker_ends_the_job(serve(ember_bin, tiny_dir, *DEP, max_model_len=16384), max_tokens=16000)


def test_a_hung_rank_is_named_and_requests_end_with_errors(ember_bin, tiny_dir):
    """SIGSTOP leaves rank 1 alive but silent: rank 0's --rank-timeout on the MoE exchange names it."""
    server = serve(ember_bin, tiny_dir, *DEP, "--rank-timeout", 2, max_model_len=16384)
    worker = worker_rank_pid(server)
    thread, result = start_long_request(server, 16000)
    time.sleep(1.0)
    os.kill(worker, signal.SIGSTOP)
    start = time.time()
    thread.join(timeout=60)
    code = server.proc.wait(timeout=60)
    elapsed = time.time() - start
    stderr = server.log()
    assert not thread.is_alive() and code != 0 and elapsed < 20, (elapsed, code)
    assert "rank 1 did not answer" in stderr, stderr
    status, body = result["response"]
    assert status == 503 and "rank 1 did not answer" in json.dumps(body), result
