#!/usr/bin/env python3
"""Convert a Llama-family GGUF (SmolLM2-135M-Instruct by default) into a Hugging Face model
directory, as transformers' LlamaForCausalLM and vLLM load one:

  config.json, generation_config.json   from the GGUF's llama.* and tokenizer.ggml.* metadata
  model.safetensors                      every tensor dequantized (f32 by default, or bf16), under
                                         the HF names, q_proj / k_proj rows un-permuted
  tokenizer.json, tokenizer_config.json  the byte-level BPE vocabulary, merges and special tokens,
                                         the chat template, bos/eos (Gemma: see below)

  .venv/bin/python scripts/gguf_to_hf_dir.py                      # -> ~/.cache/ember/models/SmolLM2-135M-Instruct-hf-f32
  .venv/bin/python scripts/gguf_to_hf_dir.py --dtype bf16 --src M.gguf --out DIR
  .venv/bin/python scripts/gguf_to_hf_dir.py --src ~/.cache/ember/models/gemma-3-270m-q4_k_m.gguf

Gemma 3 GGUFs convert too (norm gains back from llama.cpp's 1 + w to w, no q/k permutation, the
sliding pattern / local RoPE base / query_pre_attn_scalar the GGUF leaves out filled in as
llama.cpp assumes them). Gemma's tokenizer.json is its SentencePiece model rebuilt from the GGUF
vocabulary (scripts/make_sentencepiece_fixtures.py: pieces, scores, types, BPE with byte
fallback, no dummy prefix) and converted by transformers' GemmaTokenizer, BOS added, as a
Gemma 3 checkpoint's fast tokenizer has it; that needs sentencepiece, protobuf and transformers.
Its chat template is the GGUF's, or (the 270M GGUF has none) Gemma 3's published template,
tests/unit/tokenizer/testdata/templates/gemma3.jinja.

Why the un-permutation: llama.cpp's converter reorders each head's q/k rows from the HF
rotate-half layout (pairs j, j + d/2) into interleaved pairs (2j, 2j + 1), the layout its "norm"
RoPE rotates: GGUF row 2j + i of a head is HF row i * d/2 + j. Undoing it gives back the
checkpoint's own rows, which rotate-half RoPE then rotates exactly as the GGUF's interleaved RoPE
rotates the permuted ones. The weights are the GGUF's dequantized values, so the directory is the
GGUF's model (not the original bf16 checkpoint): `tests/unit/model/hf_dir_real_model_test.cc`
checks that it gives the same logits and greedy text as the same weights in an F32 GGUF
(scripts/make_dense_gguf.py --type f32).

Needs gguf (llama.cpp's gguf-py) and numpy; `tokenizers`, if installed, is used to check that the
tokenizer.json loads.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import struct

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader
from gguf.quants import dequantize

ROOT = pathlib.Path(__file__).resolve().parent.parent
GEMMA3_TEMPLATE = ROOT / "tests/unit/tokenizer/testdata/templates/gemma3.jinja"
CACHE = pathlib.Path(os.environ.get("EMBER_MODEL_CACHE", pathlib.Path.home() / ".cache/ember/models"))
SRC = CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf"

# GGUF tensor name -> HF name (per layer: blk.N. -> model.layers.N.).
LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
# Gemma 3's sandwich norms and q/k norms (its q/k rows are not permuted: llama.cpp rotates
# Gemma in the NEOX layout, which is HF's rotate-half).
GEMMA3_LAYER_NAMES = dict(LAYER_NAMES, ffn_norm="pre_feedforward_layernorm",
                          post_attention_norm="post_attention_layernorm",
                          post_ffw_norm="post_feedforward_layernorm", attn_q_norm="self_attn.q_norm",
                          attn_k_norm="self_attn.k_norm")
GLOBAL_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
# tokenizer.ggml.pre -> the pre_tokenizer SmolLM2's (and GPT-2's) tokenizer.json carries.
PRE_TOKENIZERS = {
    "smollm": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
    "gpt2": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
}
CONTROL = 3  # llama.cpp's LLAMA_TOKEN_TYPE_CONTROL


def field(reader: GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    rows, cols = w.shape
    d = rows // heads
    return w.reshape(heads, d // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def hf_tensors(reader: GGUFReader, arch: str, heads: int, kv_heads: int) -> dict[str, np.ndarray]:
    names = GEMMA3_LAYER_NAMES if arch == "gemma3" else LAYER_NAMES
    out = {}
    for t in reader.tensors:
        parts = t.name.split(".")
        if parts[0] == "blk":
            base = f"model.layers.{parts[1]}.{names[parts[2]]}"
            kind = parts[2]
        else:
            base, kind = GLOBAL_NAMES[parts[0]], parts[0]
        if parts[-1] != "weight":
            raise SystemExit(f"unexpected tensor {t.name}")
        shape = [int(x) for x in reversed(t.shape)]  # ggml dims are innermost first
        values = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
        if arch == "llama" and kind == "attn_q":
            values = unpermute(values, heads)
        elif arch == "llama" and kind == "attn_k":
            values = unpermute(values, kv_heads)
        elif arch == "gemma3" and kind.endswith("norm"):
            # llama.cpp stores Gemma's RMSNorm gains as 1 + w; Gemma3RMSNorm multiplies by 1 + w.
            values = values - np.float32(1.0)
        out[base + ".weight"] = values
    return out


def write_safetensors(path: pathlib.Path, tensors: dict[str, np.ndarray], dtype: str) -> None:
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        if dtype == "bf16":
            bits = a.view(np.uint32)
            # round to nearest even, as torch's .to(bfloat16) does (values here are finite)
            data = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2").tobytes()
        else:
            data = a.astype("<f4").tobytes()
        header[name] = {"dtype": "BF16" if dtype == "bf16" else "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def tokenizer_files(reader: GGUFReader) -> tuple[dict, dict]:
    model = field(reader, "tokenizer.ggml.model")
    pre = field(reader, "tokenizer.ggml.pre", "gpt2")
    if model != "gpt2" or pre not in PRE_TOKENIZERS:
        raise SystemExit(f"tokenizer {model}/{pre}: only byte-level BPE ({', '.join(PRE_TOKENIZERS)}) is converted")
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = field(reader, "tokenizer.ggml.merges")
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, (t, ty) in enumerate(zip(tokens, types)) if ty == CONTROL]
    bos = field(reader, "tokenizer.ggml.bos_token_id")
    eos = field(reader, "tokenizer.ggml.eos_token_id")
    add_bos = bool(field(reader, "tokenizer.ggml.add_bos_token", False))
    post = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
    if add_bos and bos is not None:
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": tokens[bos], "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": tokens[bos], "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": tokens[bos], "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {tokens[bos]: {"id": tokens[bos], "ids": [bos], "tokens": [tokens[bos]]}}}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": PRE_TOKENIZERS[pre], "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": list(merges)},
    }
    config = {"add_bos_token": add_bos, "add_eos_token": False, "clean_up_tokenization_spaces": False,
              "model_max_length": int(field(reader, "llama.context_length", 2048)),
              "tokenizer_class": "GPT2Tokenizer",
              "bos_token": tokens[bos] if bos is not None else None,
              "eos_token": tokens[eos] if eos is not None else None}
    pad = field(reader, "tokenizer.ggml.padding_token_id")
    if pad is not None:
        config["pad_token"] = tokens[pad]
    template = field(reader, "tokenizer.chat_template")
    if template is not None:
        config["chat_template"] = template
    return tokenizer, config


def gemma_tokenizer_files(reader: GGUFReader) -> tuple[str, dict]:
    """tokenizer.json text and tokenizer_config.json for a Gemma 3 GGUF (SentencePiece vocabulary)."""
    import make_sentencepiece_fixtures as spf  # beside this script; needs sentencepiece, protobuf
    if field(reader, "tokenizer.ggml.model") != "llama":
        raise SystemExit("gemma3 GGUF without a SentencePiece (\"llama\") vocabulary")
    tokens = field(reader, "tokenizer.ggml.tokens")
    scores = field(reader, "tokenizer.ggml.scores")
    types = field(reader, "tokenizer.ggml.token_type")
    ids = {k: field(reader, f"tokenizer.ggml.{k}_token_id") for k in ("bos", "eos", "unknown", "padding")}
    flags = 4 if field(reader, "tokenizer.ggml.add_space_prefix", False) else 0
    vocab = {"model": 1, "flags": flags, "tokens": list(zip(tokens, map(float, scores), map(int, types))),
             "bos": ids["bos"], "eos": ids["eos"], "unk": ids["unknown"], "pad": ids["padding"]}
    tok = spf.hf_tokenizer(spf.build_proto(vocab))
    name = lambda i: None if i is None else tok.convert_ids_to_tokens(int(i))
    config = {"add_bos_token": True, "add_eos_token": False, "clean_up_tokenization_spaces": False,
              "model_max_length": int(field(reader, "gemma3.context_length", 32768)),
              "tokenizer_class": "GemmaTokenizer", "bos_token": name(ids["bos"]), "eos_token": name(ids["eos"]),
              "unk_token": name(ids["unknown"]), "pad_token": name(ids["padding"])}
    template = field(reader, "tokenizer.chat_template")
    if template is None:
        # The 270M GGUF is the base model and carries no template; Gemma 3's published one (as the
        # Hub's tokenizer_config.json ships it) is a committed test file.
        template = GEMMA3_TEMPLATE.read_text(encoding="utf-8")
        print(f"note: the GGUF has no tokenizer.chat_template; using {GEMMA3_TEMPLATE.relative_to(ROOT)}")
    config["chat_template"] = template
    return tok.backend_tokenizer.to_str(), config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=pathlib.Path, default=SRC)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--out", type=pathlib.Path, default=None,
                    help="default: next to --src, <name>-hf-<dtype>")
    ap.add_argument("--check-transformers", action="store_true",
                    help="load the directory with transformers (needs torch) and print its greedy reply to a chat "
                         "prompt, to compare with `ember generate --model DIR --chat --prompt ...`")
    args = ap.parse_args()
    stem = args.src.name.removesuffix(".gguf").rsplit(".", 1)[0]
    out = args.out or args.src.with_name(f"{stem}-hf-{args.dtype}")

    reader = GGUFReader(args.src)
    arch = field(reader, "general.architecture")
    if arch not in ("llama", "gemma3"):
        raise SystemExit(f"{args.src}: architecture {arch}; llama and gemma3 GGUFs are converted")
    g = lambda key, default=None: field(reader, f"{arch}.{key}", default)
    heads = int(g("attention.head_count"))
    kv_heads = int(g("attention.head_count_kv", heads))
    if reader.fields.get(f"{arch}.rope.scaling.type") is not None:
        raise SystemExit("RoPE scaling is not converted")
    tensors = hf_tensors(reader, arch, heads, kv_heads)
    vocab, hidden = tensors["model.embed_tokens.weight"].shape
    tied = "lm_head.weight" not in tensors
    head_dim = int(g("attention.key_length", hidden // heads))
    bos = field(reader, "tokenizer.ggml.bos_token_id")
    eos = field(reader, "tokenizer.ggml.eos_token_id")
    config = {
        "vocab_size": int(vocab), "hidden_size": int(hidden), "intermediate_size": int(g("feed_forward_length")),
        "num_hidden_layers": int(g("block_count")), "num_attention_heads": heads, "num_key_value_heads": kv_heads,
        "head_dim": head_dim, "max_position_embeddings": int(g("context_length", 2048)),
        "rms_norm_eps": float(f"{g('attention.layer_norm_rms_epsilon', 1e-6):.6g}"),
        "rope_theta": float(g("rope.freq_base", 10000.0)), "rope_scaling": None, "attention_bias": False,
        "tie_word_embeddings": tied, "bos_token_id": bos, "eos_token_id": eos,
        "torch_dtype": "float32" if args.dtype == "f32" else "bfloat16",
    }
    if arch == "llama":
        config.update(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu", mlp_bias=False)
    else:
        # What the Gemma 3 GGUF leaves out comes from the architecture, as llama.cpp (and ember's
        # GGUF loader) take it: every 6th layer global, local RoPE base 1e4, and
        # query_pre_attn_scalar = head_dim (true of the 270M/1B models).
        layers = config["num_hidden_layers"]
        config.update(architectures=["Gemma3ForCausalLM"], model_type="gemma3_text",
                      hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=head_dim,
                      sliding_window=int(g("attention.sliding_window", 512)), rope_local_base_freq=10000.0,
                      layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention"
                                   for i in range(layers)],
                      final_logit_softcapping=None, attn_logit_softcapping=None)
    out.mkdir(parents=True, exist_ok=True)
    write_safetensors(out / "model.safetensors", tensors, args.dtype)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    generation = {"bos_token_id": bos, "eos_token_id": eos}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    if arch == "llama":
        tokenizer, tokenizer_config = tokenizer_files(reader)
        tokenizer_text = json.dumps(tokenizer, ensure_ascii=False)
    else:
        tokenizer_text, tokenizer_config = gemma_tokenizer_files(reader)
    (out / "tokenizer.json").write_text(tokenizer_text + "\n", encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2, ensure_ascii=False) + "\n",
                                               encoding="utf-8")
    try:
        from tokenizers import Tokenizer
        Tokenizer.from_file(str(out / "tokenizer.json"))
    except ImportError:
        pass
    print(out)
    if args.check_transformers:
        check_transformers(out)


def check_transformers(out: pathlib.Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager").eval()
    if (out / "tokenizer.json").exists():
        tok = AutoTokenizer.from_pretrained(out)
        ids = tok.apply_chat_template([{"role": "user", "content": "Name three colours of the sea."}],
                                      add_generation_prompt=True, tokenize=True, return_dict=False)
    else:
        tok, ids = None, CHECK_IDS
    with torch.no_grad():
        reply = model.generate(torch.tensor([ids]), max_new_tokens=48, do_sample=False)[0][len(ids):]
    if tok is not None:
        print(f"transformers greedy reply: {tok.decode(reply, skip_special_tokens=True)!r}")
    print(f"transformers greedy ids for prompt ids {','.join(map(str, ids))}: {','.join(map(str, reply.tolist()))}")


# A fixed prompt (as ids) for models without a converted tokenizer: BOS 2 and five ordinary tokens.
CHECK_IDS = [2, 818, 5279, 529, 7001, 563]


if __name__ == "__main__":
    main()
