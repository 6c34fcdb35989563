"""Dense Hugging Face model directories through the ember binary: the golden tiny models of
tests/golden/hf_dense reproduce transformers' greedy continuation, an unknown architecture is
refused clearly, and the real SmolLM2 converted to a directory (scripts/gguf_to_hf_dir.py) answers
a chat prompt with the same text as the same weights in an F32 GGUF."""
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests/golden/hf_dense"
CACHE = pathlib.Path(os.environ.get("EMBER_MODEL_CACHE", pathlib.Path.home() / ".cache/ember/models"))


def run(ember_bin, *args, check=True, timeout=300):
    result = subprocess.run([str(ember_bin), *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"ember {' '.join(map(str, args))} failed ({result.returncode}):\n{result.stderr}")
    return result


@pytest.mark.parametrize("name", ["llama", "llama3_rope", "qwen3", "gemma3"])
def test_generate_reproduces_transformers_greedy(ember_bin, name):
    golden = json.loads((FIXTURES / name / "golden.json").read_text())
    out = run(ember_bin, "generate", "--model", FIXTURES / name, "--prompt-ids", ",".join(map(str, golden["prompt_ids"])),
              "--max-tokens", len(golden["greedy_ids"]), "--kv-cache-dtype", "f32", "--ignore-eos", "--json")
    assert json.loads(out.stdout)["token_ids"] == golden["greedy_ids"]
    info = json.loads(run(ember_bin, "inspect", "--model", FIXTURES / name, "--json").stdout)
    config = json.loads((FIXTURES / name / "config.json").read_text())
    assert info["architecture"] == config["model_type"]
    assert info["num_layers"] == config["num_hidden_layers"]


def test_unknown_architecture_is_refused_clearly(ember_bin, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["MambaForCausalLM"], "model_type": "mamba"}))
    result = run(ember_bin, "generate", "--model", tmp_path, "--prompt-ids", "1", check=False)
    assert result.returncode != 0
    assert "mamba" in result.stderr and "llama" in result.stderr and "gemma3_text" in result.stderr
    config = json.loads((FIXTURES / "llama" / "config.json").read_text())
    config["architectures"] = ["LlamaForSequenceClassification"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = run(ember_bin, "generate", "--model", tmp_path, "--prompt-ids", "1", check=False)
    assert result.returncode != 0 and "LlamaForSequenceClassification" in result.stderr


def test_smollm2_directory_chats_like_its_f32_gguf(ember_bin):
    gguf = CACHE / "SmolLM2-135M-Instruct.F32.gguf"
    directory = CACHE / "SmolLM2-135M-Instruct-hf-f32"
    if not gguf.exists() or not (directory / "config.json").exists():
        pytest.skip("needs scripts/make_dense_gguf.py --type f32 and scripts/gguf_to_hf_dir.py")
    texts = []
    for model in (gguf, directory):
        # --chat: the model's chat template (tokenizer_config.json's for the directory), its
        # tokenizer (tokenizer.json) and its end-of-turn stop.
        out = run(ember_bin, "generate", "--model", model, "--chat", "--prompt", "Name three colours of the sea.",
                  "--max-tokens", 48, "--kv-cache-dtype", "f32")
        texts.append(out.stdout)
    assert texts[0] == texts[1] and texts[0].strip()
    plain = [json.loads(run(ember_bin, "generate", "--model", model, "--prompt", "The capital of France is",
                            "--max-tokens", 24, "--kv-cache-dtype", "f32", "--json").stdout) for model in (gguf, directory)]
    assert plain[0]["token_ids"] == plain[1]["token_ids"] and plain[0]["text"] == plain[1]["text"]
