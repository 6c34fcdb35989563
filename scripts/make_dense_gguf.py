#!/usr/bin/env python3
"""Write a dense (bf16, f16 or f32) copy of a quantized GGUF: every quantized tensor dequantized,
metadata and tokenizer unchanged. The draft-model benchmark needs a real target/drafter pair that
shares a vocabulary; the quantized file drafting for its own dense copy is one (the drafter is
~3x cheaper per token and agrees with the target on most greedy tokens).

  .venv/bin/python scripts/make_dense_gguf.py            # SmolLM2-135M-Instruct.Q4_1 -> .BF16.gguf
  .venv/bin/python scripts/make_dense_gguf.py --type f32 --src M.gguf --out M.F32.gguf

Uses llama.cpp's gguf-py (`gguf` in requirements/dev.txt) to read, dequantize and write.
The dense weights are the quantized ones exactly (bf16 rounds the dequantized values once), so the
copy's greedy output is close to the quantized model's, not to the original checkpoint's.
"""
from __future__ import annotations

import argparse
import os
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import dequantize, quantize

CACHE = pathlib.Path(os.environ.get("EMBER_CACHE", pathlib.Path.home() / ".cache/ember"))
DENSE = {"bf16": Q.BF16, "f16": Q.F16, "f32": Q.F32}
# general.file_type values (llama.cpp's LLAMA_FTYPE_ALL_F32, MOSTLY_F16, MOSTLY_BF16).
FILE_TYPE = {"f32": 0, "f16": 1, "bf16": 32}


def copy_metadata(reader: GGUFReader, writer: GGUFWriter, dense: str) -> None:
    for name, field in reader.fields.items():
        # GGUF.* are the reader's view of the header; the writer sets the architecture itself.
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "general.file_type":
            writer.add_uint32(name, FILE_TYPE[dense])
            continue
        vtype = field.types[0]
        sub_type = field.types[-1] if vtype == GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), vtype, sub_type=sub_type)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=pathlib.Path, default=CACHE / "models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--type", choices=sorted(DENSE), default="bf16")
    ap.add_argument("--out", type=pathlib.Path, default=None, help="default: next to --src, .<TYPE>.gguf")
    args = ap.parse_args()
    stem = args.src.name.removesuffix(".gguf").rsplit(".", 1)[0]
    out = args.out or args.src.with_name(f"{stem}.{args.type.upper()}.gguf")

    reader = GGUFReader(args.src)
    arch = reader.fields["general.architecture"].contents()
    writer = GGUFWriter(out, arch)
    copy_metadata(reader, writer, args.type)
    for t in reader.tensors:
        dense = t.tensor_type
        data = t.data
        # Norms and other vectors stay f32 as llama.cpp's converters write them; matrices that are
        # quantized (or of another float type) become the requested type.
        if len(t.shape) >= 2 and t.tensor_type != DENSE[args.type]:
            values = dequantize(t.data, t.tensor_type).astype(np.float32)
            dense = DENSE[args.type]
            data = values if dense == Q.F32 else quantize(values, dense)
        writer.add_tensor(t.name, data, raw_dtype=dense)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(out)


if __name__ == "__main__":
    main()
