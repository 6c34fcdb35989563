"""`ember bench serve | throughput | roofline` end to end: the load generator against a live
`ember serve` (SmolLM2), offline throughput on a tiny model, a roofline smoke run, and the paired
A/B script (scripts/bench_spec_paired.py). No timing assertions: the numbers depend on the
machine; the tests check the counts and the JSON shape."""
import json
import pathlib
import subprocess
import sys

import pytest

from test_server import SMOLLM, Server


def run(ember_bin, *args, check=True):
    return subprocess.run([str(ember_bin), *map(str, args)], capture_output=True, text=True, timeout=600, check=check)


@pytest.fixture(scope="module")
def server(ember_bin):
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    s = Server(ember_bin, "--max-num-seqs", "4", "--threads", "1")
    yield s
    assert s.stop() == 0, s.log()


LEVEL_KEYS = {"completed", "failed", "errors", "duration_s", "total_input_tokens", "total_output_tokens",
              "total_chunks", "chunks_equal_usage_tokens", "request_throughput", "input_throughput",
              "output_throughput", "total_token_throughput", "goodput_targets_ms", "request_goodput", "ttft_ms",
              "tpot_ms", "itl_ms", "e2el_ms"}


def test_bench_serve_counts_what_the_server_generated(server, ember_bin, tmp_path):
    result = tmp_path / "serve.json"
    before = server.metric("ember:generation_tokens_total")
    out = run(ember_bin, "bench", "serve", "--base-url", f"http://127.0.0.1:{server.port}", "--label", "ember",
              "--dataset", "random", "--input-len", 16, "--output-len", 6, "--num-prompts", 4, "--concurrency", "1,2",
              "--warmup", 0, "--goodput", "ttft:60000", "tpot:60000", "--result-json", result)
    after = server.metric("ember:generation_tokens_total")
    data = json.loads(result.read_text())
    assert data["label"] == "ember" and data["model"] == "smollm"  # discovered from /v1/models
    assert [level["concurrency"] for level in data["levels"]] == [1, 2]
    for level in data["levels"]:
        assert LEVEL_KEYS <= level.keys()
        assert level["completed"] == 4 and level["failed"] == 0, level["errors"]
        # ignore_eos: every request generates exactly --output-len tokens, one per streamed chunk.
        assert level["total_output_tokens"] == 4 * 6
        assert level["chunks_equal_usage_tokens"] and level["total_chunks"] == 4 * 6
        # The word-list prompts are one token per word (plus BOS, if the tokenizer adds one).
        assert 4 * 16 <= level["total_input_tokens"] <= 4 * 17
        for metric in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
            d = level[metric]
            assert 0 < d["median"] <= d["p90"] <= d["p99"]
        assert level["request_goodput"] == pytest.approx(level["request_throughput"])
    # The server counted the same tokens the client did.
    assert after - before == sum(level["total_output_tokens"] for level in data["levels"])
    assert "[ember concurrency=1] 4 ok, 0 failed" in out.stdout


def test_bench_serve_poisson_prefix_and_failures(server, ember_bin, tmp_path):
    result = tmp_path / "prefix.json"
    run(ember_bin, "bench", "serve", "--base-url", f"http://127.0.0.1:{server.port}", "--model", "smollm",
        "--dataset", "prefix", "--prefix-len", 32, "--turns", 2, "--input-len", 8, "--output-len", 3,
        "--num-prompts", 4, "--request-rate", "50", "--warmup", 1, "--result-json", result)
    level = json.loads(result.read_text())["levels"][0]
    assert level["request_rate"] == 50 and level["completed"] == 4 and level["total_output_tokens"] == 12
    # An unknown model fails every request and the exit status says so.
    bad = run(ember_bin, "bench", "serve", "--base-url", f"http://127.0.0.1:{server.port}", "--model", "nope",
              "--num-prompts", 2, "--input-len", 4, "--output-len", 2, "--warmup", 0, check=False)
    assert bad.returncode == 1 and "HTTP 404" in bad.stdout
    dead = run(ember_bin, "bench", "serve", "--base-url", "http://127.0.0.1:9", "--num-prompts", 1, check=False)
    assert dead.returncode == 1 and "is the server up" in dead.stderr


def test_bench_throughput_on_a_tiny_model(ember_bin, golden_dir):
    out = run(ember_bin, "bench", "throughput", golden_dir / "tiny_a", "--input-len", 12, "--output-len", 5,
              "--num-prompts", 6, "--range-ratio", 0.5, "--json", "--kv-cache-dtype", "f32")
    data = json.loads(out.stdout)
    assert data["num_requests"] == 6 and data["failed"] == 0
    # ignore_eos and --range-ratio 0.5: output lengths are drawn in [2, 7].
    assert 6 * 2 <= data["total_output_tokens"] <= 6 * 7
    assert 6 * 6 <= data["total_input_tokens"] <= 6 * 18
    for key in ("requests_per_second", "input_tokens_per_second", "output_tokens_per_second",
                "total_tokens_per_second", "elapsed_s"):
        assert data[key] > 0


def test_bench_throughput_reads_a_dataset_file(ember_bin, golden_dir, tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": [1, 2, 3], "output_len": 4}\n{"prompt": [5, 6], "max_tokens": 2}\n')
    data = json.loads(run(ember_bin, "bench", "throughput", golden_dir / "tiny_a", "--dataset", path, "--json").stdout)
    assert data["num_requests"] == 2 and data["total_input_tokens"] == 5 and data["total_output_tokens"] == 6
    path.write_text('{"prompt": [1, 2, 3]}\n')
    bad = run(ember_bin, "bench", "throughput", golden_dir / "tiny_a", "--dataset", path, check=False)
    assert bad.returncode == 1 and "prompts.jsonl:1" in bad.stderr and "output_len" in bad.stderr


def test_bench_roofline_quick_smoke(ember_bin):
    data = json.loads(run(ember_bin, "bench", "roofline", "--quick", "--threads", "1,2", "--json").stdout)
    assert [level["threads"] for level in data["threads"]] == [1, 2]
    for level in data["threads"]:
        assert level["stream_triad_gbps"] > 0 and level["stream_copy_gbps"] > 0 and level["peak_f32_gflops"] > 0
        names = [k["name"] for k in level["kernels"]]
        for name in ("gemv f32", "gemm bf16", "gemv q4_1", "gemm q8_0", "gemv q4_K", "attention prefill f16",
                     "attention decode f16"):
            assert name in names
        assert level["peak_int8_isa"] in ("avx512-vnni", "avx2", "none")
        assert (level["peak_int8_gops"] > 0) == (level["peak_int8_isa"] != "none")
        for k in level["kernels"]:
            assert k["bound"] in ("memory", "compute", "compute-int8") and k["achieved"] > 0
            assert k["fraction"] == pytest.approx(k["achieved"] / k["ceiling"])
            expected = {"memory": level["stream_triad_gbps"], "compute": level["peak_f32_gflops"],
                        "compute-int8": level["peak_int8_gops"]}[k["bound"]]
            assert k["ceiling"] == pytest.approx(expected)
        # The quantized GEMMs are measured against the int8 peak wherever the host has one.
        gemm_q8 = next(k for k in level["kernels"] if k["name"] == "gemm q8_0")
        assert gemm_q8["bound"] == ("compute-int8" if level["peak_int8_gops"] > 0 else "compute")
    text = run(ember_bin, "bench", "roofline", "--quick", "--threads", "1").stdout
    assert "STREAM triad" in text and "gemv q4_1" in text


def greedy_placement(tokens, ep_size):
    """The documented balancer (exec/expert_balancer.h), written again: experts by falling load
    (ties: lower index), each to the least-loaded rank with a free slot (ties: lower rank)."""
    slots = len(tokens) // ep_size
    load, held, ranks = [0] * ep_size, [0] * ep_size, [None] * len(tokens)
    for e in sorted(range(len(tokens)), key=lambda e: (-tokens[e], e)):
        r = min((r for r in range(ep_size) if held[r] < slots), key=lambda r: (load[r], r))
        ranks[e], load[r], held[r] = r, load[r] + tokens[e], held[r] + 1
    return ranks


def max_over_mean(values):
    return max(values) * len(values) / sum(values) if sum(values) else 0.0


def test_bench_expert_load_report_counts_and_placement(ember_bin, golden_dir, tmp_path):
    tiny = golden_dir / "tiny_a"  # 6 MoE layers, 8 experts, top-2
    counts_file, placement_file = tmp_path / "counts.json", tmp_path / "placement.json"
    args = ["bench", "throughput", tiny, "--input-len", 12, "--output-len", 5, "--num-prompts", 6, "--range-ratio", 0.5,
            "--no-enable-prefix-caching", "--kv-cache-dtype", "f32", "--json"]
    data = json.loads(run(ember_bin, *args, "--expert-parallel-size", 2, "--expert-load-out", counts_file).stdout)
    # Every request computes its prompt and its outputs but the last.
    computed = data["total_input_tokens"] + data["total_output_tokens"] - data["num_requests"]
    report = data["expert_load"]
    assert (report["num_experts"], report["top_k"], report["tokens"]) == (8, 2, computed)
    assert report["expert_parallel_size"] == 2 and report["placement"] == "contiguous"
    counts = json.loads(counts_file.read_text())
    assert (counts["num_experts"], counts["top_k"], counts["num_layers"]) == (8, 2, 6)
    assert [layer["layer"] for layer in report["layers"]] == list(range(6)) and sorted(map(int, counts["layers"])) == list(range(6))
    for layer in report["layers"]:
        row = counts["layers"][str(layer["layer"])]
        assert sum(row) == layer["routed"] == 2 * computed
        assert layer["max_over_mean"] == pytest.approx(max_over_mean(row))
        assert layer["rank_tokens"] == [sum(row[:4]), sum(row[4:])]
        assert layer["rank_max_over_mean"] == pytest.approx(max_over_mean(layer["rank_tokens"]))
        hottest = sorted(range(8), key=lambda e: (-row[e], e))[:4]
        assert [h["expert"] for h in layer["hottest"]] == hottest and [h["tokens"] for h in layer["hottest"]] == [row[e] for e in hottest]

    # ember placement balances each layer; the bench run again under that map faces the balanced ranks.
    summary = json.loads(run(ember_bin, "placement", "--counts", counts_file, "--expert-parallel-size", 2,
                             "--out", placement_file, "--json").stdout)
    placement = json.loads(placement_file.read_text())
    assert (placement["num_experts"], placement["ep_size"], placement["num_layers"]) == (8, 2, 6)
    for layer, row in counts["layers"].items():
        assert placement["layers"][layer] == greedy_placement(row, 2)
    again = json.loads(run(ember_bin, *args, "--expert-placement", placement_file).stdout)["expert_load"]
    assert again["placement"] == "map" and again["expert_parallel_size"] == 2
    for layer, entry in zip(again["layers"], summary["layers"]):
        row, ranks = counts["layers"][str(layer["layer"])], placement["layers"][str(layer["layer"])]
        assert layer["rank_tokens"] == [sum(t for t, r in zip(row, ranks) if r == k) for k in range(2)]
        assert layer["rank_max_over_mean"] == pytest.approx(entry["balanced"])

    # The text report, and ember bench --model: the timed runs only (pp 8 + tg 4 tokens per rep).
    text = run(ember_bin, *args[:-1], "--expert-parallel-size", 4).stdout
    assert "expert load:" in text and "expert parallel 4 (contiguous)" in text
    model = json.loads(run(ember_bin, "bench", "--model", tiny, "--pp", 8, "--tg", 4, "--reps", 2, "--json").stdout)
    assert [layer["routed"] for layer in model["expert_load"]["layers"]] == [2 * 2 * (8 + 4)] * 6


def test_bench_expert_load_refusals(ember_bin, golden_dir, tmp_path):
    tiny = golden_dir / "tiny_a"
    bad = run(ember_bin, "bench", "throughput", tiny, "--num-prompts", 1, "--expert-parallel-size", 3, check=False)
    assert bad.returncode == 1 and "8 experts do not split evenly over 3" in bad.stderr
    dense = golden_dir.parent / "hf_dense" / "llama"
    bad = run(ember_bin, "bench", "throughput", dense, "--num-prompts", 1, "--expert-parallel-size", 2, check=False)
    assert bad.returncode == 1 and "need a mixture-of-experts model" in bad.stderr
    placement = tmp_path / "p.json"
    placement.write_text(json.dumps({"num_experts": 8, "ep_size": 2}))
    bad = run(ember_bin, "bench", "throughput", dense, "--num-prompts", 1, "--expert-placement", placement, check=False)
    assert bad.returncode == 1 and "has no routed experts" in bad.stderr
    bad = run(ember_bin, "bench", "throughput", tiny, "--num-prompts", 1, "--expert-placement", placement,
              "--expert-parallel-size", 4, check=False)
    assert bad.returncode == 1 and "differs from the --expert-placement map's ep_size 2" in bad.stderr
    counts = tmp_path / "c.json"
    counts.write_text(json.dumps({"num_experts": 8, "layers": {"0": [1] * 7}}))
    bad = run(ember_bin, "placement", "--counts", counts, "--expert-parallel-size", 2, "--out", placement, check=False)
    assert bad.returncode == 1 and "layers.0 has 7 counts, num_experts is 8" in bad.stderr


def test_bench_spec_paired_instances(ember_bin, tmp_path):
    """scripts/bench_spec_paired.py --instances: fresh servers per instance, one ratio per instance
    behind the interval, every round's rate kept; impossible counts are refused."""
    script = pathlib.Path(__file__).resolve().parents[2] / "scripts/bench_spec_paired.py"
    bad = subprocess.run([sys.executable, str(script), "--instances", "0", "none="], capture_output=True, text=True)
    assert bad.returncode != 0 and "--instances, --rounds and --prompts must be at least 1" in bad.stderr
    if not SMOLLM.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    out = tmp_path / "paired"
    subprocess.run([sys.executable, str(script), "--ember", str(ember_bin), "--model", str(SMOLLM), "--threads", "1",
                    "--instances", "2", "--rounds", "1", "--prompts", "1", "--output-len", "4", "--out", str(out),
                    "none=", "none_b="], check=True, capture_output=True, text=True, timeout=600)
    summary = json.loads((out / "results.json").read_text())
    assert summary["instances"] == 2 and [len(v) for v in summary["rates"].values()] == [2, 2]
    ratio = summary["ratios"]["none_b"]
    assert len(ratio["per_instance"]) == 2 and ratio["low"] <= ratio["geomean"] <= ratio["high"]
    assert {p.name for p in out.glob("server_*.log")} == {"server_none_0.log", "server_none_1.log",
                                                          "server_none_b_0.log", "server_none_b_1.log"}
