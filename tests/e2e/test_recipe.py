"""`ember recipe` as users run it: JSON figures, refusals with rule ids and exit status 2, the
--check mode, and the emitted command started with the real `ember serve`, whose startup memory
must match the prediction within 10%."""
import json
import os
import pathlib
import queue
import re
import signal
import subprocess
import threading
import time

import pytest

CACHE = pathlib.Path(os.environ.get("EMBER_MODEL_CACHE", pathlib.Path.home() / ".cache/ember/models"))


def recipe(ember_bin, *args):
    return subprocess.run([str(ember_bin), "recipe", *map(str, args)], capture_output=True, text=True, timeout=120)


def test_preset_reproduces_the_seed_figures(ember_bin):
    sizes = {}
    for checkpoint in ("bf16", "mxfp4", "nvfp4"):
        out = recipe(ember_bin, "--hardware", "mi355x", "--checkpoint", checkpoint, "--json")
        assert out.returncode in (0, 2), out.stderr
        sizes[checkpoint] = json.loads(out.stdout)["weights"]["checkpoint_bytes"]
    assert abs(sizes["bf16"] / 1.64e12 - 1) < 0.02
    assert abs(sizes["mxfp4"] / 509e9 - 1) < 0.02
    assert abs(sizes["nvfp4"] / 533e9 - 1) < 0.02


def test_b200_throughput_recipe(ember_bin):
    out = recipe(ember_bin, "--hardware", "b200", "--goal", "throughput", "--concurrency", 64, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    r = json.loads(out.stdout)
    assert r["ok"] and r["checkpoint"] == "nvfp4"
    assert r["parallelism"] == {**r["parallelism"], "kind": "tp_ep", "tp": 8, "ep": True}
    assert r["decisions"]["parallelism"]["rule"] == "parallel.nvidia_tp_ep"
    assert 0.25 < r["kv"]["hybrid_ratio"] < 0.27
    assert "--tensor-parallel-size" in r["command"]["future_flags"]


def test_refusal_names_the_rule_and_exits_2(ember_bin):
    out = recipe(ember_bin, "--hardware", "mi355x", "--parallelism", "dp_attention_ep")
    assert out.returncode == 2
    assert "[platform.dp_disagg_nvidia_only]" in out.stdout and "REFUSED" in out.stdout


def test_check_mode_validates_a_serve_command(ember_bin):
    bad = recipe(ember_bin, "--hardware", "b200", "--check", "--", "serve", "meta-models/Muse-Spark-Open-816B-A42B-NVFP4",
                 "--tensor-parallel-size", 4, "--enable-expert-parallel", "--max-model-len", 32768)
    assert bad.returncode == 2 and "[nvidia.nvfp4_tp_equals_gpus]" in bad.stdout
    good = recipe(ember_bin, "--hardware", "b200", "--check", "--json", "--", "serve",
                  "meta-models/Muse-Spark-Open-816B-A42B-NVFP4", "--tensor-parallel-size", 8,
                  "--enable-expert-parallel", "--max-model-len", 32768)
    assert good.returncode == 0, good.stdout
    unknown = recipe(ember_bin, "--hardware", "b200", "--check", "--", "serve", "m", "--frobnicate")
    assert unknown.returncode == 1 and "--frobnicate" in unknown.stderr


def test_list_hardware_and_explain(ember_bin):
    listed = recipe(ember_bin, "--list-hardware")
    assert listed.returncode == 0
    for name in ("b200", "gb200", "b300", "h200", "mi350x", "mi355x", "tpu-v7", "cpu"):
        assert re.search(rf"^{re.escape(name)}\s", listed.stdout, re.M), name
    explained = recipe(ember_bin, "--explain", "amd.long_context_config")
    assert explained.returncode == 0 and "no more than eight sequences" in explained.stdout
    missing = recipe(ember_bin, "--explain", "no.such.rule")
    assert missing.returncode == 1 and "amd.long_context_config" in missing.stderr


def serve_startup_memory(ember_bin, argv):
    """Starts the recipe's command (plus --port 0), returns the bytes of the startup memory line:
    the checkpoint's weights and the KV cache, which is what the recipe plans (a repacked copy
    some CPU kernels make at load is printed apart and not counted here)."""
    proc = subprocess.Popen([str(ember_bin), *argv[1:], "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    # A reader thread, so a server that logs something else and then waits fails the test at the
    # deadline instead of hanging it in readline.
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in iter(proc.stderr.readline, "")] + [lines.put(None)],
                     daemon=True).start()
    try:
        deadline = time.time() + 120
        while (left := deadline - time.time()) > 0:
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"ember serve exited ({proc.wait()}) before logging its memory plan")
            match = re.search(r"memory: weights ([\d.]+) MiB(?: \(\+[\d.]+ MiB repacked [^)]*\))?, KV cache ([\d.]+) MiB",
                              line)
            if match:
                return (float(match.group(1)) + float(match.group(2))) * 1048576
        raise AssertionError("no memory line from ember serve within 120 s")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


# The tiny Muse models have no tokenizer, so ember serve cannot start on them; the unit test
# tests/unit/recipe/planner_test.cc compares them with the engine directly.
@pytest.mark.parametrize("model", ["SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"])
def test_emitted_command_is_accepted_and_memory_matches(ember_bin, model):
    path = CACHE / model
    if not path.exists():
        pytest.skip(f"{model} not fetched (scripts/fetch_models.py)")
    out = recipe(ember_bin, "--model", path, "--hardware", "cpu", "--device-memory-gb", 8, "--concurrency", 4,
                 "--context-len", 2048, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    r = json.loads(out.stdout)
    assert r["command"]["future_flags"] == []
    predicted = r["weights"]["per_device_bytes"] + r["kv"]["budget_bytes_per_device"]
    actual = serve_startup_memory(ember_bin, r["command"]["argv"])
    assert abs(predicted / actual - 1) < 0.10, (predicted, actual)


def test_cpu_tensor_parallel_recipe_emits_a_flag_ember_serve_takes(ember_bin, golden_dir):
    out = recipe(ember_bin, "--hardware", "cpu", "--parallelism", "tp", "--devices-per-node", 2, "--model",
                 golden_dir / "tiny_a", "--json")
    r = json.loads(out.stdout)
    argv = r["command"]["argv"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2", argv
    assert "--tensor-parallel-size" not in r["command"]["future_flags"]
    gpu = json.loads(recipe(ember_bin, "--hardware", "b200", "--goal", "throughput", "--json").stdout)
    assert "--tensor-parallel-size" in gpu["command"]["future_flags"], "accelerator ranks are not built yet"


def test_check_refuses_tensor_parallel_sizes_the_loader_would_refuse(ember_bin, golden_dir):
    """--check asks the loaders' own rule (model/tensor_parallel.h), so it refuses what `ember serve` would."""
    def check(model, tp):
        return recipe(ember_bin, "--hardware", "cpu", "--devices-per-node", 4, "--check", "--", "serve", model,
                      "--tensor-parallel-size", tp)
    heads = check(golden_dir / "tiny_a", 3)
    assert heads.returncode == 2 and "[shape.tp_must_divide]" in heads.stdout, heads.stdout
    assert "sizes that work for this model: 1, 2, 4" in heads.stdout
    assert "[shape.tp_must_divide]" not in check(golden_dir / "tiny_a", 4).stdout
    # tiny_b: 6 heads over 3 KV heads allow 3, but its dense layers' 256 MLP features do not split in 3.
    mlp = check(golden_dir / "tiny_b", 3)
    assert mlp.returncode == 2 and "does not divide the 256 MLP intermediate features" in mlp.stdout, mlp.stdout


def test_expert_parallel_recipes_run_on_cpu_and_impossible_ones_are_refused(ember_bin, golden_dir):
    """TEP (tp + --enable-expert-parallel) is a real CPU flag; --check refuses expert counts that do
    not split over tp x dp, and data-parallel ranks without expert parallelism."""
    r = json.loads(recipe(ember_bin, "--hardware", "cpu", "--parallelism", "tp_ep", "--devices-per-node", 2, "--model",
                          golden_dir / "tiny_a", "--json").stdout)
    assert "--enable-expert-parallel" in r["command"]["argv"], r["command"]
    assert "--enable-expert-parallel" not in r["command"]["future_flags"]

    def check(*flags):
        return recipe(ember_bin, "--hardware", "cpu", "--devices-per-node", 8, "--check", "--", "serve",
                      golden_dir / "tiny_a", *flags)
    dep = check("--data-parallel-size", 8, "--enable-expert-parallel", "--max-model-len", 4096)
    assert "[shape.ep_must_divide]" not in dep.stdout, dep.stdout  # 8 experts over 8 ranks
    six = recipe(ember_bin, "--hardware", "cpu", "--devices-per-node", 6, "--check", "--", "serve",
                 golden_dir / "tiny_a", "--data-parallel-size", 6, "--enable-expert-parallel")
    assert six.returncode == 2 and "cannot split 8 experts evenly; tp x dp must divide them: 1, 2, 4, 8" in six.stdout, \
        six.stdout
    tp_dp = check("--tensor-parallel-size", 2, "--data-parallel-size", 2, "--enable-expert-parallel")
    assert tp_dp.returncode == 2 and "not built for CPU ranks yet" in tp_dp.stdout, tp_dp.stdout
    r = json.loads(recipe(ember_bin, "--hardware", "cpu", "--parallelism", "dp_attention_ep", "--devices-per-node", 2,
                          "--model", golden_dir / "tiny_a", "--json").stdout)
    assert "--data-parallel-size" in r["command"]["argv"] and not r["command"]["future_flags"], r["command"]
    no_ep = check("--data-parallel-size", 2)
    assert no_ep.returncode == 2 and "without --enable-expert-parallel" in no_ep.stdout, no_ep.stdout
