#!/usr/bin/env python3
"""Writes the GGUF block-format fixtures of tests/unit/quant/gguf_dequant_test.cc.

The oracle is gguf-py (the `gguf` package llama.cpp publishes, 0.19.0 here): its numpy
quantize/dequantize code in gguf/quants.py is what GGUF producers use and mirrors ggml's reference
C code. Run with the project venv:

    .venv/bin/python scripts/gen_gguf_quant_fixtures.py [--models DIR]

Outputs (little-endian throughout):

tests/unit/quant/testdata/gguf_blocks.bin  -- random blocks
    "EGQB" u32 version=1 u32 count, then per record:
      u32 kind (0: dequantize, 1: quantize to the type), u32 ggml type, u32 elements,
      u32 raw byte count, raw bytes, f32[elements]
    kind 0: the raw blocks and gguf-py's dequantized values.
    kind 1: the f32 input is the values, the raw bytes are gguf-py's quantization of them.

tests/unit/quant/testdata/gguf_real_rows.bin  -- rows of the real models, if present
    "EGQR" u32 version=1 u32 count, then per record:
      str model file name, u64 file size, str tensor name, u64 row index, u64 absolute file
      offset of the row, u32 ggml type, u32 elements, u32 raw byte count, u64 FNV-1a 64 of the
      raw bytes, f32[elements] (gguf-py's dequantization of the row)
    where str is u32 length + UTF-8 bytes. The test reads the row from the model file itself
    (skipping if the file is absent or has another size) and must reproduce the values exactly.

Random blocks: quant bytes are uniform random; f16 scale fields are finite values spanning
normal magnitudes, subnormals, zero and both signs (NaN/inf scales would only test NaN
propagation order, which no model exercises). Raw F16 values exclude NaNs: ember's F16ToF32
quiets signalling NaNs (as F16C does) while numpy keeps them signalling.
"""

import argparse
import importlib.metadata
import os
import struct
import sys
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as T
from gguf import quants

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "tests" / "unit" / "quant" / "testdata"
MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"]

# Byte offsets of the f16 scale fields in each block (see src/quant/gguf_blocks.h).
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
BLOCKS_PER_TYPE = {T.Q4_0: 64, T.Q4_1: 64, T.Q5_0: 64, T.Q5_1: 64, T.Q8_0: 64,
                   T.Q2_K: 12, T.Q3_K: 12, T.Q4_K: 12, T.Q5_K: 12, T.Q6_K: 12}


def random_f16_scales(rng, count):
    """Finite f16 bit patterns: mostly ordinary magnitudes, some edge cases."""
    mags = np.exp(rng.uniform(np.log(1e-7), np.log(60000.0), size=count)).astype(np.float16)
    signs = np.where(rng.random(count) < 0.3, -1.0, 1.0).astype(np.float16)
    bits = (mags * signs).view(np.uint16).copy()
    edges = np.array([0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x3c00, 0x1400],
                     dtype=np.uint16)
    n_edges = min(count // 4, len(edges))
    bits[:n_edges] = edges[:n_edges]
    rng.shuffle(bits)
    return bits


def random_blocks(rng, qtype, n_blocks):
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for offset in F16_FIELDS[qtype]:
        raw[:, offset:offset + 2] = random_f16_scales(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return raw, n_blocks * block_size


def dequant_record(qtype, raw, n):
    values = quants.dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
    assert values.size == n, (qtype, values.size, n)
    return (0, int(qtype), n, raw.tobytes(), values)


def random_records(rng):
    records = []
    for qtype, n_blocks in BLOCKS_PER_TYPE.items():
        raw, n = random_blocks(rng, qtype, n_blocks)
        records.append(dequant_record(qtype, raw, n))

    # Plain types: random bit patterns (F16 without NaNs, see the module docstring).
    f16 = rng.integers(0, 1 << 16, size=512, dtype=np.uint16)
    f16 = f16[~(((f16 & 0x7c00) == 0x7c00) & ((f16 & 0x03ff) != 0))]
    f16 = np.concatenate([f16, np.array([0x7c00, 0xfc00, 0x0001, 0x8001, 0x0000, 0x8000], np.uint16)])
    records.append((0, int(T.F16), f16.size, f16.tobytes(), f16.view(np.float16).astype(np.float32)))
    bf16 = rng.integers(0, 1 << 16, size=512, dtype=np.uint16)
    records.append((0, int(T.BF16), bf16.size, bf16.tobytes(), quants.dequantize(bf16.view(np.uint8), T.BF16)))
    f32 = rng.standard_normal(64).astype(np.float32)
    records.append((0, int(T.F32), f32.size, f32.tobytes(), f32))

    # Q8_0 quantization of f32 inputs: assorted magnitudes, an all-zero block, a single spike,
    # and values that land on .5 after scaling (ties round away from zero).
    x = rng.standard_normal((48, 32)).astype(np.float32)
    x *= np.exp(rng.uniform(np.log(1e-4), np.log(1e3), size=(48, 1))).astype(np.float32)
    x[0] = 0.0
    x[1] = 0.0
    x[1, 7] = -3.0
    # amax 127 makes d = 1 exactly, so these k + 0.5 values are exact ties.
    x[2] = np.arange(32, dtype=np.float32) - 15.5
    x[2, 0] = 127.0
    x[3] = -x[2]
    raw = quants.quantize(x, T.Q8_0)
    records.append((1, int(T.Q8_0), x.size, raw.tobytes(), x.reshape(-1)))
    return records


def write_blocks_file(path, records):
    with open(path, "wb") as f:
        f.write(b"EGQB")
        f.write(struct.pack("<II", 1, len(records)))
        for kind, qtype, n, raw, values in records:
            f.write(struct.pack("<IIII", kind, qtype, n, len(raw)))
            f.write(raw)
            f.write(np.asarray(values, dtype="<f4").tobytes())


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def real_row_records(models_dir):
    records = []
    for model in MODELS:
        path = models_dir / model
        if not path.exists():
            print(f"  {path} not found: no real rows from it", file=sys.stderr)
            continue
        reader = gguf.GGUFReader(path)
        by_type = {}
        for t in reader.tensors:
            by_type.setdefault(t.tensor_type, []).append(t)
        file_size = path.stat().st_size
        for qtype, tensors in sorted(by_type.items()):
            # First tensor of the type: first, middle and last rows; last tensor: its last row.
            picks = [(tensors[0], "all")]
            if len(tensors) > 1:
                picks.append((tensors[-1], "last"))
            for t, which in picks:
                n_cols = int(t.shape[0])  # gguf-py lists dims innermost first
                n_rows = int(np.prod(t.shape[1:])) if len(t.shape) > 1 else 1
                rows = [0, n_rows // 2, n_rows - 1] if which == "all" else [n_rows - 1]
                row_bytes = t.n_bytes // n_rows
                for r in sorted(set(rows)):
                    offset = int(t.data_offset) + r * row_bytes
                    with open(path, "rb") as f:
                        f.seek(offset)
                        raw = f.read(row_bytes)
                    values = quants.dequantize(np.frombuffer(raw, dtype=np.uint8), qtype)
                    values = np.asarray(values, dtype=np.float32).reshape(-1)
                    assert values.size == n_cols, (t.name, values.size, n_cols)
                    records.append((model, file_size, t.name, r, offset, int(qtype), n_cols, raw, values))
    return records


def write_real_rows_file(path, records):
    def put_str(f, s):
        b = s.encode()
        f.write(struct.pack("<I", len(b)))
        f.write(b)

    with open(path, "wb") as f:
        f.write(b"EGQR")
        f.write(struct.pack("<II", 1, len(records)))
        for model, file_size, name, row, offset, qtype, n, raw, values in records:
            put_str(f, model)
            f.write(struct.pack("<Q", file_size))
            put_str(f, name)
            f.write(struct.pack("<QQIII", row, offset, qtype, n, len(raw)))
            f.write(struct.pack("<Q", fnv1a64(raw)))
            f.write(values.astype("<f4").tobytes())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path,
                        default=Path(os.environ.get("EMBER_MODEL_CACHE",
                                                    Path.home() / ".cache" / "ember" / "models")))
    args = parser.parse_args()
    print(f"gguf-py {importlib.metadata.version('gguf')}, numpy {np.__version__}")
    OUT_DIR.mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(20250207)
    blocks = random_records(rng)
    write_blocks_file(OUT_DIR / "gguf_blocks.bin", blocks)
    rows = real_row_records(args.models)
    write_real_rows_file(OUT_DIR / "gguf_real_rows.bin", rows)
    for name in ["gguf_blocks.bin", "gguf_real_rows.bin"]:
        print(f"  {name}: {(OUT_DIR / name).stat().st_size} bytes")
    print(f"  {len(blocks)} random-block records, {len(rows)} real rows")


if __name__ == "__main__":
    main()
