#!/usr/bin/env python3
"""Digest GGUF files with the reference reader (gguf-py) so ember's GgufFile can be checked against it.

The digest is a line-oriented text that covers every metadata key and every tensor info:

  gguf-digest 1
  file_size / version / alignment / data_offset / kv_count / tensor_count   one line each
  kv <key> <type> <value>           every key, sorted by key bytes
  tensor <name> <TYPE> [d0,d1,...] at=<absolute file offset> bytes=<n>   in file order

Values: integers in decimal; bools true/false; float32 as %.9g and float64 as %.17g (both exact
round trips); strings as "escaped" when at most 64 bytes, otherwise
`len=N fnv1a64=HASH "first 48 bytes"...`; arrays as
`array[<element type>] n=N fnv1a64=HASH [first 4 elements]`, where HASH is FNV-1a 64 over each
element's canonical text followed by "\\n" (strings: the full escaped text, unquoted). Escaping keeps
bytes 0x20..0x7e except '"' and '\\\\' and writes every other byte as \\xNN. Dims are in GGUF order
(dims[0] is the row length). tests/unit/formats/gguf_model_file_test.cc computes the same text from
GgufFile and compares it with the files this script writes into tests/unit/formats/testdata/.

Usage:
  .venv/bin/python scripts/check_gguf_reader.py [MODEL.gguf ...]          print digests
  .venv/bin/python scripts/check_gguf_reader.py --write                   (re)write the testdata
  .venv/bin/python scripts/check_gguf_reader.py --check                   compare with the testdata
Without MODEL arguments the two reference models in the model cache are used (see
scripts/fetch_models.py; --cache-dir or $EMBER_MODEL_CACHE override ~/.cache/ember/models).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTDATA = REPO / "tests" / "unit" / "model" / "testdata"
MODELS = ["SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"]

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1


def fnv1a64(data: bytes, h: int = FNV_OFFSET) -> int:
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK64
    return h


def escape(raw: bytes) -> str:
    out = []
    for b in raw:
        if 0x20 <= b <= 0x7E and b not in (0x22, 0x5C):
            out.append(chr(b))
        else:
            out.append("\\x%02x" % b)
    return "".join(out)


def scalar_text(type_name: str, value) -> str:
    if type_name == "BOOL":
        return "true" if bool(value) else "false"
    if type_name == "FLOAT32":
        return "%.9g" % float(value)
    if type_name == "FLOAT64":
        return "%.17g" % float(value)
    return str(int(value))


def string_text(raw: bytes) -> str:
    if len(raw) <= 64:
        return '"%s"' % escape(raw)
    return 'len=%d fnv1a64=%016x "%s"...' % (len(raw), fnv1a64(raw), escape(raw[:48]))


def field_text(gguf, field) -> str:
    vt = gguf.GGUFValueType
    main = field.types[0]
    if main == vt.STRING:
        return "string " + string_text(bytes(field.parts[field.data[0]]))
    if main != vt.ARRAY:
        return "%s %s" % (main.name.lower(), scalar_text(main.name, field.parts[field.data[0]][0]))
    # parts = [key length, key bytes, value type, element type, element count, elements...]; the
    # element type is read from the file because gguf-py records no sub-type for empty arrays.
    element = vt(int(field.parts[3][0]))
    if element == vt.ARRAY:
        raise SystemExit("nested arrays: gguf-py flattens them, so they cannot be cross-checked")
    if element == vt.STRING:
        texts = [escape(bytes(field.parts[i])) for i in field.data]
        shown = ['"%s"' % t for t in texts[:4]]
    else:
        texts = [scalar_text(element.name, field.parts[i][0]) for i in field.data]
        shown = texts[:4]
    h = FNV_OFFSET
    for t in texts:
        h = fnv1a64(t.encode("ascii") + b"\n", h)
    return "array[%s] n=%d fnv1a64=%016x [%s]" % (
        element.name.lower(), len(texts), h, ", ".join(shown))


def digest(path: Path) -> str:
    import gguf  # the PyPI package (pip install gguf); imported late so --help works without it

    reader = gguf.GGUFReader(str(path))
    keys = [k for k in reader.fields if not k.startswith("GGUF.")]
    lines = [
        "gguf-digest 1",
        "file_size %d" % reader.data.size,
        "version %d" % int(reader.fields["GGUF.version"].parts[0][0]),
        "alignment %d" % int(reader.alignment),
        "data_offset %d" % int(reader.data_offset),
        "kv_count %d" % len(keys),
        "tensor_count %d" % len(reader.tensors),
    ]
    for key in sorted(keys, key=lambda k: k.encode("utf-8")):
        lines.append("kv %s %s" % (escape(key.encode("utf-8")), field_text(gguf, reader.fields[key])))
    for t in reader.tensors:
        dims = ",".join(str(int(d)) for d in t.shape.tolist())
        lines.append("tensor %s %s [%s] at=%d bytes=%d" % (
            escape(t.name.encode("utf-8")), t.tensor_type.name, dims, int(t.data_offset),
            int(t.n_bytes)))
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", type=Path, help="GGUF files (default: the cached models)")
    parser.add_argument("--cache-dir", type=Path,
                        default=Path(os.environ.get("EMBER_MODEL_CACHE",
                                                    Path.home() / ".cache" / "ember" / "models")))
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write tests/unit/formats/testdata/*.digest")
    mode.add_argument("--check", action="store_true", help="compare with the checked-in digests")
    args = parser.parse_args()

    models = args.models or [args.cache_dir / name for name in MODELS]
    failed = False
    for path in models:
        if not path.is_file():
            print("missing: %s (run scripts/fetch_models.py)" % path, file=sys.stderr)
            failed = True
            continue
        text = digest(path)
        target = TESTDATA / (path.name + ".digest")
        if args.write:
            TESTDATA.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="ascii")
            print("wrote %s (%d lines)" % (target, text.count("\n")))
        elif args.check:
            expected = target.read_text(encoding="ascii") if target.is_file() else ""
            if text == expected:
                print("ok: %s matches %s" % (path.name, target.relative_to(REPO)))
            else:
                failed = True
                print("MISMATCH: %s differs from %s" % (path.name, target), file=sys.stderr)
                for got, want in zip(text.splitlines(), expected.splitlines()):
                    if got != want:
                        print("  gguf-py: %s\n  file:    %s" % (got, want), file=sys.stderr)
                        break
        else:
            sys.stdout.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
