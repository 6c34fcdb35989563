#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz (corpus/<target>/seed-*): small valid inputs of each
format plus the hostile shapes the parsers must refuse cleanly. Crashes found by `make fuzz` are
added next to them by hand (crash-<what>), never regenerated. Run from anywhere; idempotent."""
import json
import pathlib
import struct

HERE = pathlib.Path(__file__).resolve().parent / "corpus"

REQUESTS = {
    "completion": {"model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "stop": ["\n"], "n": 2,
                   "logprobs": 2, "stream": True, "stream_options": {"include_usage": True}, "seed": -1},
    "token-prompts": {"prompt": [[1, 2, 3], [4]], "echo": True, "best_of": 1},
    "chat-tools": {"messages": [{"role": "system", "content": "be brief"},
                                {"role": "user", "content": [{"type": "text", "text": "caf\u00e9 \u20ac"}]},
                                {"role": "assistant", "content": None,
                                 "tool_calls": [{"id": "1", "type": "function",
                                                 "function": {"name": "f", "arguments": "{}"}}]},
                                {"role": "tool", "tool_call_id": "1", "content": "42"}],
                   "tools": [{"type": "function", "function": {"name": "f", "parameters": {
                       "type": "object", "properties": {"a": {"type": "string"}}}}}],
                   "tool_choice": {"type": "function", "function": {"name": "f"}},
                   "max_completion_tokens": 9, "logprobs": True, "top_logprobs": 3,
                   "chat_template_kwargs": {"enable_thinking": False}, "response_format": {"type": "text"}},
}
RAW_REQUESTS = {
    "deep": b'{"prompt": ' + b"[" * 200 + b"]" * 200 + b"}",
    "overflow": b'{"prompt": "x", "temperature": 1e999, "n": 123456789012345678901234567890}',
    "bad-utf8": b'{"prompt": "\xff\xfe", "\xc3": 1, "s": "\\ud800"}',
    "wrong-types": b'{"messages": [{"role": "user", "content": [{"type": 1}]}], "response_format": {"type": 5}}',
}


def gguf_string(s):
    data = s.encode()
    return struct.pack("<Q", len(data)) + data


def gguf():
    """GGUF v3: a few metadata types (u32, f32, string, string array), two F32 tensors."""
    kvs = [("general.architecture", 8, gguf_string("llama")),
           ("llama.context_length", 4, struct.pack("<I", 128)),
           ("llama.rope.freq_base", 6, struct.pack("<f", 10000.0)),
           ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 2) + gguf_string("a") + gguf_string("b"))]
    tensors = [("t0", [4], 0), ("t1", [2, 2], 32)]
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for key, kind, value in kvs:
        out += gguf_string(key) + struct.pack("<I", kind) + value
    for name, dims, offset in tensors:
        out += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", 0, offset)
    out += b"\0" * (-len(out) % 32)
    return out + struct.pack("<4f", 1, 2, 3, 4) + b"\0" * 16 + struct.pack("<4f", 5, 6, 7, 8)


def safetensors(header, data):
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


# Tokenizer inputs: a flags byte (1 parse_special, 2 add_special, 4 skip_special, 8 decode the rest
# as int32 ids, 16 ids unfolded), then the text or the ids.
TEXTS = {
    "english": "Hello world! It's a test, isn't it? We'll see.",
    "code": "def f(x):\n\treturn x ** 2  # 12345678901234567890\r\n",
    "multilingual": "caf\u00e9 \u4e2d\u6587 \u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0939\u093f\u0928\u094d\u0926\u0940 \u0440\u0443\u0441",
    "emoji": "\U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f44d\U0001f3fd \U0001f1eb\U0001f1f7 e\u0301\u0302\u0303",
    "whitespace": "a  b   c\t\t\n\n\n  \u00a0\u3000 \r\n" + " " * 40 + "end",
    "chat-special": "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<|endoftext|><|im_end",
    "gemma-special": "<start_of_turn>user\nHi<end_of_turn>\n<bos><eos></s><pad><unk><start_of_image><unused12>",
    "sentencepiece": "\u2581x \u2581\u2581 <0x41><0xZZ><0x0A> <b>bold</b> <table>",
}
RAW_TEXTS = {
    "invalid-utf8": b"ab\xff\xfe\xc3 \xe2\x82 \xf0\x9f\x98 \x80\x80 \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80",
    "nul": b"a\x00b\x00\x00 \x01\x1f\x7f",
}


def tokenizer_seeds(flags_for_text):
    out = {}
    for name, text in TEXTS.items():
        for flags in flags_for_text:
            out[f"{name}-{flags}"] = bytes([flags]) + text.encode()
    for name, data in RAW_TEXTS.items():
        out[name] = bytes([1]) + data
    out["decode-folded"] = bytes([8]) + struct.pack("<12I", 0, 1, 2, 3, 100, 1000, 40000, 0xFFFFFFFF, 7, 8, 9, 10)
    out["decode-raw"] = bytes([8 | 16 | 4]) + struct.pack("<6i", -1, -2147483648, 2147483647, 0, 5, 262144)
    return out


def byte_level_char(b):
    """GPT-2's bytes_to_unicode: printable bytes stand for themselves, the rest map above 255."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    if b in printable:
        return chr(b)
    return chr(256 + [x for x in range(256) if x not in printable].index(b))


def hf_tokenizer(pre, merges_as_pairs=False, post=None, ignore_merges=False):
    """A tiny byte-level BPE tokenizer.json: every byte, a few merges, two added tokens."""
    vocab = {byte_level_char(b): b for b in range(256)}
    merges = [("\u0120", "t"), ("h", "e"), ("\u0120t", "he"), ("i", "n"), ("1", "2")]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    added = [{"id": len(vocab), "content": "<|endoftext|>", "special": True},
             {"id": len(vocab) + 1, "content": "<tool>", "special": False}]
    doc = {"version": "1.0", "added_tokens": added, "normalizer": None, "pre_tokenizer": pre,
           "post_processor": post, "decoder": {"type": "ByteLevel"},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "ignore_merges": ignore_merges,
                     "vocab": vocab,
                     "merges": [[l, r] for l, r in merges] if merges_as_pairs else [f"{l} {r}" for l, r in merges]}}
    return json.dumps(doc, ensure_ascii=False).encode()


LLAMA3_REGEX = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
                "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def hf_seeds():
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    template = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                                         {"Sequence": {"id": "A", "type_id": 0}}],
                "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [261], "tokens": ["<|endoftext|>"]}}}
    seeds = {
        "gpt2": hf_tokenizer(byte_level),
        "smollm": hf_tokenizer({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, byte_level]}, post={"type": "ByteLevel"}),
        "llama3": hf_tokenizer({"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX}, "behavior": "Isolated", "invert": False},
            dict(byte_level, use_regex=False)]}, merges_as_pairs=True, ignore_merges=True,
            post={"type": "Sequence", "processors": [{"type": "ByteLevel"}, template]}),
    }
    # Shapes the reader must refuse with a Status: ids out of range or not integers, a template
    # naming tokens that are not there, nesting deeper than any tokenizer.json.
    hostile = {
        "added-id-negative": {"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": byte_level,
                              "added_tokens": [{"id": -1, "content": "x"}]},
        "added-id-huge": {"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": byte_level,
                          "added_tokens": [{"id": 18446744073709551615, "content": "x"}]},
        "added-id-float": {"model": {"type": "BPE", "vocab": {"a": 1e300}}, "pre_tokenizer": byte_level,
                           "added_tokens": [{"id": 1.5e300, "content": "x"}]},
        "template-missing": {"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": byte_level,
                             "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {}}],
                                                "special_tokens": {}}},
    }
    seeds.update({k: json.dumps(v).encode() for k, v in hostile.items()})
    seeds["deep-normalizer"] = b'{"model": {"type": "BPE"}, "normalizer": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    return seeds


def gguf_file(kvs):
    """GGUF v3 with metadata only (no tensors). kvs: (key, type, packed value)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs))
    for key, kind, value in kvs:
        out += gguf_string(key) + struct.pack("<I", kind) + value
    return out


def gguf_array(kind, values):
    fmt = {4: "<I", 5: "<i", 6: "<f"}.get(kind)
    body = b"".join(gguf_string(v) if kind == 8 else struct.pack(fmt, v) for v in values)
    return struct.pack("<IQ", kind, len(values)) + body


def gguf_tokenizer_seeds():
    # Byte-level BPE: every byte, a few merges, a control token.
    tokens = [byte_level_char(b) for b in range(256)] + ["\u0120t", "he", "\u0120the", "<|im_end|>"]
    types = [1] * 259 + [3]
    bpe = gguf_file([("tokenizer.ggml.model", 8, gguf_string("gpt2")),
                     ("tokenizer.ggml.pre", 8, gguf_string("smollm")),
                     ("tokenizer.ggml.tokens", 9, gguf_array(8, tokens)),
                     ("tokenizer.ggml.token_type", 9, gguf_array(5, types)),
                     ("tokenizer.ggml.merges", 9, gguf_array(8, ["\u0120 t", "h e", "\u0120t he"])),
                     ("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 259)),
                     ("tokenizer.ggml.add_bos_token", 7, b"\x01")])
    # SentencePiece: control, unknown, byte (<0xNN>), user-defined and scored normal pieces.
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    pieces += [(f"<0x{b:02X}>", 0.0, 6) for b in range(256)]
    pieces += [("\u2581", -1.0, 1), ("\u2581a", -2.0, 1), ("ab", -3.0, 1), ("a", -4.0, 1), ("b", -5.0, 1),
               ("<b>", 0.0, 4), ("  ", 0.0, 4), ("<unused0>", 0.0, 5), ("", 0.0, 1)]
    spm = gguf_file([("tokenizer.ggml.model", 8, gguf_string("llama")),
                     ("tokenizer.ggml.tokens", 9, gguf_array(8, [p[0] for p in pieces])),
                     ("tokenizer.ggml.scores", 9, gguf_array(6, [p[1] for p in pieces])),
                     ("tokenizer.ggml.token_type", 9, gguf_array(5, [p[2] for p in pieces])),
                     ("tokenizer.ggml.bos_token_id", 4, struct.pack("<I", 1)),
                     ("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 2)),
                     ("tokenizer.ggml.unknown_token_id", 4, struct.pack("<I", 0)),
                     ("tokenizer.ggml.add_bos_token", 7, b"\x01"),
                     ("tokenizer.ggml.add_space_prefix", 7, b"\x01")])
    return {"bpe": bpe, "spm": spm}


TEMPLATE_SNIPPETS = {
    "loop-macro": "{% macro m(x, y=2) %}{{ x ~ y }}{{ caller() if caller is defined }}{% endmacro %}"
                  "{% for m2 in messages if m2.role != 'tool' %}{{ loop.index }}:{{ m(m2.role) }}"
                  "{% if loop.last %}!{% endif %}{% endfor %}{% call m(1) %}c{% endcall %}",
    "namespace": "{% set ns = namespace(n=0, s='') %}{% for i in range(10) %}{% set ns.n = ns.n + i %}"
                 "{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s|length }} {{ ns }}",
    "filters": "{{ messages|map(attribute='role')|join(', ') }} {{ tools|tojson(indent=2) }} "
               "{{ 'a b c'.split()|reverse|list }} {{ '%-5s|%05.1f' % ('x', 3.14159) }} {{ 'x'|center(9) }}"
               "{{ messages|selectattr('content', 'string')|list|length }} {{ {'b': 1, 'a': 2}|dictsort }}",
    "strings": "{{ 'caf\u00e9'.upper() }}{{ 'abc'[::-1] }}{{ 'a,b'.partition(',') }}{{ '  x '.strip() }}"
               "{{ 'x' * 3 }}{{ [1, 2] * 2 }}{{ 'ab'.replace('', '-') }}{{ 'ab'|indent(4, true) }}"
               "{{ 'ab'.zfill(5) }}{{ 'ab'.ljust(4, '*') }}{{ 'abc'[1:10:2] }}",
    "recursion": "{% macro r(n) %}{% if n > 0 %}{{ r(n - 1) }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(3) }}",
    "raise": "{% if messages[0].role == 'system' %}{{ raise_exception('no system: ' ~ messages[0].content) }}{% endif %}",
    "whitespace": "  {%- for m in messages -%}\n  {{- m.role -}}  {%+ if true %} x {% endif -%}\n{%- endfor %}\n{# c #}{% raw %}{{ }}{% endraw %}",
}
# Templates that must stop at a limit with an error, not run (almost) for ever or exhaust memory.
TEMPLATE_BOMBS = {
    "nested-loops": "{% for a in range(100000) %}{% for b in range(100000) %}{% for c in range(100000) %}"
                    "{% endfor %}{% endfor %}{% endfor %}",
    "empty-repeat": "{{ '' * 1000000000000000000 }}{{ [] * 1000000000000000000 }}",
    "repeat": "{{ 'x' * 100000000000 }}",
    "doubling": "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "shared-lists": "{% set a = [1] * 1000 %}{% set b = [a] * 1000 %}{% set c = [b] * 1000 %}{{ c }}{{ c|tojson }}",
    "widths": "{{ 'x'|center(10000000000) }}{{ 'x'.ljust(10000000000) }}{{ 'x'.zfill(10000000000) }}"
              "{{ 'x'|indent(10000000000) }}{{ '%10000000000s' % 'x' }}{{ [1]|tojson(indent=10000000000) }}"
              "{{ [1]|batch(10000000000, 0)|list }}",
    "replace": "{{ ('x' * 1000)|replace('', 'y' * 1000000) }}",
    "exponential-macro": "{% macro r(n) %}{% if n > 0 %}{{ r(n - 1) }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(60) }}",
    "huge-slice-step": "{{ 'abc'[1::9223372036854775807] }}{{ [1, 2, 3][-1::-9223372036854775807] }}",
}

CONVERSATIONS = {
    "simple": {"messages": [{"role": "user", "content": "Hi!"}]},
    "system-turns": {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "a"},
                                  {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]},
    "tools": {"messages": [{"role": "user", "content": "weather?"},
                           {"role": "assistant", "content": None, "reasoning_content": "look it up",
                            "tool_calls": [{"id": "1", "type": "function",
                                            "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                           {"role": "tool", "tool_call_id": "1", "content": "sunny"}],
              "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
                                                          "parameters": {"type": "object", "properties": {
                                                              "city": {"type": "string"}}}}}],
              "extra": {"enable_thinking": False, "reasoning_effort": "low"}},
    "multimodal": {"messages": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " caf\u00e9 "}]}]},
    "odd-shapes": {"messages": [{"role": 7, "content": {"x": [1, None]}}, {"content": "no role"}, "not an object"],
                   "tools": {"not": "a list"}, "extra": [1]},
}


def chat_seeds():
    out = {}
    for index, name in enumerate(["smollm2", "gemma3", "qwen3", "muse-spark"]):
        for conv_name, conv in CONVERSATIONS.items():
            out[f"{name}-{conv_name}"] = bytes([index, 1]) + json.dumps(conv).encode()
        out[f"{name}-raw"] = bytes([index, 2]) + b"raw <|im_end|> <end_of_turn> \xff\xfe text"
    return out


def main():
    templates = pathlib.Path(__file__).resolve().parent.parent / "unit/tokenizer/testdata/templates"
    seeds = {"json_request_fuzz": {k: json.dumps(v).encode() for k, v in REQUESTS.items()} | RAW_REQUESTS,
             "gguf_header_fuzz": {"two-tensors": gguf(), "truncated": gguf()[:40]},
             "safetensors_header_fuzz": {
                 "two-tensors": safetensors({"__metadata__": {"format": "pt"},
                                             "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                             "b": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [8, 16]}},
                                            bytes(range(16))),
                 "out-of-file": safetensors({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 4096]}},
                                            bytes(16)),
                 "huge-length": struct.pack("<Q", 1 << 62) + b"{}"},
             "bpe_tokenizer_fuzz": tokenizer_seeds([0, 1, 3]),
             "spm_tokenizer_fuzz": tokenizer_seeds([0, 1, 3]),
             "hf_tokenizer_json_fuzz": hf_seeds(),
             "gguf_tokenizer_fuzz": gguf_tokenizer_seeds(),
             "jinja_template_fuzz": {k: v.encode() for k, v in TEMPLATE_SNIPPETS.items() | TEMPLATE_BOMBS.items()} | {
                 p.stem: p.read_bytes() for p in sorted(templates.glob("*.jinja"))},
             "chat_template_fuzz": chat_seeds()}
    for target, files in seeds.items():
        folder = HERE / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (folder / f"seed-{name}").write_bytes(data)


if __name__ == "__main__":
    main()
