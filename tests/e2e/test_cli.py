"""The ember command line, run as a user would: real process, real files, real exit codes."""
import json
import subprocess


def run(ember_bin, *args, check=True):
    result = subprocess.run([str(ember_bin), *map(str, args)], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"ember {' '.join(map(str, args))} failed ({result.returncode}):\n{result.stderr}")
    return result


def test_generate_reproduces_reference_greedy_continuation(ember_bin, golden_dir):
    for name in ("tiny_a", "tiny_b"):
        golden = json.loads((golden_dir / name / "golden.json").read_text())
        ids = ",".join(map(str, golden["prompt_ids"]))
        # The reference ran with f32 K/V; these tiny random models amplify any KV rounding.
        out = run(ember_bin, "generate", "--model", golden_dir / name, "--prompt-ids", ids,
                  "--max-tokens", len(golden["greedy_ids"]), "--kv-cache-dtype", "f32", "--json")
        result = json.loads(out.stdout)
        assert result["token_ids"] == golden["greedy_ids"], name
        assert result["prompt_tokens"] == len(golden["prompt_ids"])
        assert result["tokens_per_second"] > 0


def test_generate_plain_output_is_comma_separated_ids(ember_bin, golden_dir):
    for kv_dtype in ("auto", "f32", "f16", "bf16", "fp8"):
        out = run(ember_bin, "generate", "--model", golden_dir / "tiny_a", "--prompt-ids", "1,2,3", "--max-tokens", 5,
                  "--kv-cache-dtype", kv_dtype)
        ids = out.stdout.strip().split(",")
        assert len(ids) == 5 and all(i.isdigit() for i in ids), kv_dtype


def test_inspect_reports_pattern_and_census(ember_bin, golden_dir):
    out = run(ember_bin, "inspect", "--model", golden_dir / "tiny_a", "--json")
    info = json.loads(out.stdout)
    config = json.loads((golden_dir / "tiny_a" / "config.json").read_text())["text_config"]
    assert info["architecture"] == "muse_spark"
    assert info["layer_pattern"] == "".join("S" if t == "sliding_attention" else "F" for t in config["layer_types"])
    assert info["num_experts"] == config["num_local_experts"]
    assert info["parameters_active_per_token"] < info["parameters_total"]
    text = run(ember_bin, "inspect", "--model", golden_dir / "tiny_a").stdout
    assert "pattern SFSSSF" in text


def test_bad_input_gets_a_clear_error_and_exit_code(ember_bin, golden_dir, tmp_path):
    cases = [
        (["generate", "--model", tmp_path, "--prompt-ids", "1"], "config.json"),
        (["generate", "--model", golden_dir / "tiny_a", "--prompt-ids", "1,abc"], "non-negative integers"),
        (["generate", "--model", golden_dir / "tiny_a", "--prompt-ids", "5,100000"], "outside the vocabulary"),
        (["generate", "--model", golden_dir / "tiny_a", "--prompt-ids", "5", "--kv-cache-dtype", "int4"],
         "unknown KV cache dtype"),
        (["inspect", "--model", tmp_path / "missing"], "config.json"),
        # A step workspace no host can hold: an error naming the flag, not std::bad_alloc.
        (["generate", "--model", golden_dir / "tiny_a", "--prompt-ids", "5", "--max-num-batched-tokens",
          "4000000000000"], "lower --max-num-batched-tokens"),
    ]
    for args, expected in cases:
        result = run(ember_bin, *args, check=False)
        assert result.returncode != 0, args
        assert expected in result.stderr, (args, result.stderr)
        assert "ember: error:" in result.stderr


def test_truncated_checkpoint_is_reported_not_crashed(ember_bin, golden_dir, tmp_path):
    source = golden_dir / "tiny_a"
    (tmp_path / "config.json").write_text((source / "config.json").read_text())
    data = (source / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 2])
    result = run(ember_bin, "generate", "--model", tmp_path, "--prompt-ids", "1", check=False)
    assert result.returncode == 1
    assert "model.safetensors" in result.stderr and "truncated" in result.stderr.lower()


def test_unknown_config_field_is_rejected(ember_bin, golden_dir, tmp_path):
    source = golden_dir / "tiny_a"
    config = json.loads((source / "config.json").read_text())
    config["text_config"]["mystery_knob"] = 3
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").symlink_to(source / "model.safetensors")
    result = run(ember_bin, "inspect", "--model", tmp_path, check=False)
    assert result.returncode == 1 and "mystery_knob" in result.stderr


def test_text_prompt_on_real_gguf_models(ember_bin):
    """Both real models tokenize a text prompt with their own tokenizer and continue it."""
    import os
    import pathlib
    import pytest
    cache = pathlib.Path(os.environ.get("EMBER_MODEL_CACHE", pathlib.Path.home() / ".cache/ember/models"))
    models = [cache / "SmolLM2-135M-Instruct.Q4_1.gguf", cache / "gemma-3-270m-q4_k_m.gguf"]
    present = [m for m in models if m.exists()]
    if not present:
        pytest.skip("real models not fetched (scripts/fetch_models.py)")
    for model in present:
        out = run(ember_bin, "generate", "--model", model, "--prompt", "The capital of France is", "--max-tokens", 8,
                  "--json")
        result = json.loads(out.stdout)
        assert len(result["token_ids"]) == 8
        assert isinstance(result["text"], str) and result["text"].strip()


def test_chat_uses_the_models_template_and_stops_at_end_of_turn(ember_bin):
    import os
    import pathlib
    import pytest
    cache = pathlib.Path(os.environ.get("EMBER_MODEL_CACHE", pathlib.Path.home() / ".cache/ember/models"))
    smollm = cache / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not smollm.exists():
        pytest.skip("SmolLM2 not fetched (scripts/fetch_models.py)")
    result = subprocess.run([str(ember_bin), "chat", "--model", str(smollm), "--max-tokens", "64"],
                            input="What is 2+2?\n/exit\n", capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "4" in result.stdout
    assert "<|im_end|>" not in result.stdout  # the end-of-turn token ends the reply, it is not printed
    gemma = cache / "gemma-3-270m-q4_k_m.gguf"
    if gemma.exists():  # the base Gemma GGUF carries no template: a clear error, not a crash
        bad = run(ember_bin, "generate", "--model", gemma, "--chat", "--prompt", "Hi", check=False)
        assert bad.returncode == 1 and "no chat template" in bad.stderr


def test_perplexity_scores_and_rejects_bad_input(ember_bin, golden_dir, tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text(" ".join(str(i % 500) for i in range(64)))
    out = run(ember_bin, "perplexity", "--model", golden_dir / "tiny_a", "--ids-file", ids, "--ctx", 32, "--json")
    result = json.loads(out.stdout)
    assert result["chunks"] == 2 and result["scored_tokens"] == 2 * 15 and result["perplexity"] > 1
    cases = [
        (["--ids-file", tmp_path / "missing.txt"], "cannot open --ids-file"),
        (["--ids-file", ids, "--ctx", 1000], "need at least --ctx"),
    ]
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2 x")
    cases.append((["--ids-file", bad], "non-negative integers"))
    for extra, expected in cases:
        result = run(ember_bin, "perplexity", "--model", golden_dir / "tiny_a", *extra, check=False)
        assert result.returncode == 1 and expected in result.stderr, (extra, result.stderr)


def test_generate_jsonl_runs_many_prompts_through_the_engine(ember_bin, golden_dir, tmp_path):
    golden = json.loads((golden_dir / "tiny_a" / "golden.json").read_text())
    n = len(golden["greedy_ids"])
    lines = [{"prompt": golden["prompt_ids"], "max_tokens": n, "temperature": 0, "ignore_eos": True}]
    lines += [{"prompt": [5 + i, 6, 7], "max_tokens": 3 + i, "temperature": 0.8, "seed": i} for i in range(5)]
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    out = run(ember_bin, "generate", "--model", golden_dir / "tiny_a", "--jsonl", path, "--kv-cache-dtype", "f32",
              "--max-model-len", "256", "--kv-cache-memory", "16MiB")
    results = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["index"] for r in results] == list(range(6))
    assert results[0]["token_ids"] == golden["greedy_ids"]  # batched with 5 others, same as alone
    assert all(r["completion_tokens"] == 3 + i for i, r in enumerate(results[1:]))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": [1], "temperature": "hot"}\n')
    result = run(ember_bin, "generate", "--model", golden_dir / "tiny_a", "--jsonl", bad, check=False)
    assert result.returncode != 0 and "bad.jsonl:1" in result.stderr and "temperature" in result.stderr


def test_generate_jsonl_reports_a_token_id_outside_the_vocabulary_on_its_line(ember_bin, golden_dir, tmp_path):
    vocab = json.loads((golden_dir / "tiny_a" / "golden.json").read_text())["vocab_size"]
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps({"prompt": [1, 999999], "max_tokens": 2}) + "\n"
                    + json.dumps({"prompt": [1, 2], "max_tokens": 2}) + "\n")
    result = run(ember_bin, "generate", "--model", golden_dir / "tiny_a", "--jsonl", path, "--max-model-len", "256",
                 "--kv-cache-memory", "16MiB", check=False)
    assert result.returncode == 0, (result.returncode, result.stderr)  # negative: killed by a signal
    bad, good = [json.loads(line) for line in result.stdout.splitlines()]
    assert bad["index"] == 0 and bad["finish_reason"] == "error" and bad["token_ids"] == []
    assert "999999" in bad["error"] and str(vocab) in bad["error"], bad
    assert good["index"] == 1 and good["finish_reason"] == "length" and len(good["token_ids"]) == 2
    assert "error" not in good


def test_empty_quantization_is_an_error_listing_the_choices(ember_bin, golden_dir, tmp_path):
    # Leaving the flag out keeps the stored formats; giving it empty is a mistake, not the same thing.
    jsonl = tmp_path / "prompts.jsonl"
    jsonl.write_text(json.dumps({"prompt": [1, 2], "max_tokens": 1}) + "\n")
    ids = tmp_path / "ids.txt"
    ids.write_text("1 2 3 4 5 6 7 8")
    model = ["--model", golden_dir / "tiny_a"]
    for args in (["generate", *model, "--prompt-ids", "1,2", "--max-tokens", 1],
                 ["generate", *model, "--jsonl", jsonl, "--max-model-len", 64, "--kv-cache-memory", "16MiB"],
                 ["perplexity", *model, "--ids-file", ids, "--ctx", 4]):
        result = run(ember_bin, *args, "--quantization", "", check=False)
        assert result.returncode == 1, (args, result.returncode, result.stderr)
        assert "ember: error:" in result.stderr, (args, result.stderr)
        for choice in ("nvfp4", "mxfp4", "mxfp4-floor", "fp8"):
            assert choice in result.stderr, (args, choice, result.stderr)
        assert result.stdout == "", args


def test_serve_help_lists_every_registered_output_parser(ember_bin):
    # The list is the parsers' self-registrations: a link that dropped one (ember_server not
    # linked whole-archive) would shrink it.
    out = run(ember_bin, "serve", "--help").stdout
    assert "auto, hermes, muse_spark or plain" in out
