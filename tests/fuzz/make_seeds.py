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


def main():
    seeds = {"json_request_fuzz": {k: json.dumps(v).encode() for k, v in REQUESTS.items()} | RAW_REQUESTS,
             "gguf_header_fuzz": {"two-tensors": gguf(), "truncated": gguf()[:40]},
             "safetensors_header_fuzz": {
                 "two-tensors": safetensors({"__metadata__": {"format": "pt"},
                                             "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                             "b": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [8, 16]}},
                                            bytes(range(16))),
                 "out-of-file": safetensors({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 4096]}},
                                            bytes(16)),
                 "huge-length": struct.pack("<Q", 1 << 62) + b"{}"}}
    for target, files in seeds.items():
        folder = HERE / target
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (folder / f"seed-{name}").write_bytes(data)


if __name__ == "__main__":
    main()
