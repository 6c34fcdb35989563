#!/usr/bin/env python3
"""SentencePiece's own token ids for Gemma 3 on text that holds a literal U+2581 ("▁").

SentencePiece writes every space as U+2581 before it looks anything up, so a U+2581 typed in the
input is a space to it: "▁▁hello" is the user-defined piece "▁▁" (id 138) and then "hello", just
as "  hello" is. llama.cpp keeps the typed character apart from a space (its converter stored the
user-defined whitespace pieces as real spaces and it matches them before escaping), so on such
text its ids are not the reference ids; these are.

The model is rebuilt from the committed vocabulary extract (testdata/gemma3_vocab.bin.gz, made by
scripts/make_tokenizer_corpus.py from gemma-3-270m-q4_k_m.gguf) as a SentencePiece ModelProto:
the same pieces, scores and types (the user-defined pieces get their U+2581 back, undoing
llama.cpp's converter), BPE with byte fallback, Gemma's normalizer (no dummy prefix, whitespace
kept and escaped). Then `sentencepiece` encodes:
  * every record of testdata/corpus.bin.gz that is valid UTF-8 and contains U+2581, and
  * the cases below.
SentencePiece never matches control pieces in text, so these are the ids with parse_special off
(BOS is not included; ember's test adds it).

Needs `sentencepiece` and `protobuf` (requirements/dev.txt).
Usage:  .venv/bin/python scripts/make_sentencepiece_fixtures.py
Writes: tests/unit/tokenizer/testdata/gemma3_sentencepiece.json
"""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import sentencepiece
from sentencepiece import sentencepiece_model_pb2 as model_pb2

ROOT = Path(__file__).resolve().parent.parent
TESTDATA = ROOT / "tests/unit/tokenizer/testdata"
OUT = TESTDATA / "gemma3_sentencepiece.json"
SPACE = "\u2581"

CASES = [
    "\u2581",
    "\u2581\u2581",
    "  ",
    "a\u2581b",
    "a \u2581b",
    "a\u2581 b",
    "x\u2581\u2581\u2581\u2581y",
    "\u2581 \u2581 \u2581",
    "end\u2581",
    "\n\u2581\n\u2581\u2581\n",
    "\t\u2581\t",
    "\u2581\u2581\u2581\u2581\u2581\u2581\u2581\u2581 code",
    "def f():\n\u2581\u2581\u2581\u2581return 1",
    "Hello\u2581world, \u2581\u2581spaced\u2581\u2581 out",
    "<start_of_turn>user\n\u2581\u2581hi<end_of_turn>",
    "\u2581<b>bold</b>\u2581",
    "日本\u2581語\u2581\u2581テキスト",
]


class Reader:
    def __init__(self, data: bytes, offset: int):
        self.data, self.pos = data, offset

    def varint(self) -> int:
        n = shift = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    def blob(self) -> bytes:
        n = self.varint()
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b


def read_vocab(path: Path) -> dict:
    """The vocab file format of scripts/make_tokenizer_corpus.py."""
    data = gzip.decompress(path.read_bytes())
    assert data[:8] == b"EMBVOC1\n", path
    r = Reader(data, 8)
    model = r.varint()
    r.blob()  # pre-tokenizer
    bos, eos, unk, pad = (r.varint() - 1 for _ in range(4))
    flags = r.varint()
    tokens, previous = [], 0
    for _ in range(r.varint()):
        text = r.blob()
        code = r.varint()
        if code & 1:
            score = struct.unpack("<f", data[r.pos:r.pos + 4])[0]
            r.pos += 4
        else:
            zigzag = code >> 1
            previous += (zigzag >> 1) if not zigzag & 1 else -((zigzag + 1) >> 1)
            score = previous
        tokens.append((text.decode("utf-8"), float(score), r.varint()))
    merges = [r.blob().decode("utf-8") for _ in range(r.varint())]
    return {"model": model, "bos": bos, "eos": eos, "unk": unk, "pad": pad, "flags": flags, "tokens": tokens,
            "merges": merges}


def read_records(path: Path) -> list[bytes]:
    data = gzip.decompress(path.read_bytes())
    assert data[:8] == b"EMBREC1\n", path
    r = Reader(data, 8)
    return [r.blob() for _ in range(r.varint())]


def build_proto(vocab: dict) -> bytes:
    """The serialized SentencePiece ModelProto of a Gemma 3 vocabulary (read_vocab's dict)."""
    assert vocab["model"] == 1 and not vocab["flags"] & 4, "expected Gemma 3's SentencePiece vocabulary"
    proto = model_pb2.ModelProto()
    for i, (text, score, kind) in enumerate(vocab["tokens"]):
        piece = proto.pieces.add()
        # GGUF token types and SentencePiece piece types share their numbers (1 normal, 2 unknown,
        # 3 control, 4 user-defined, 5 unused, 6 byte).
        piece.type = kind if kind in (1, 2, 3, 4, 5, 6) else 1
        if i == vocab["unk"]:
            piece.type = model_pb2.ModelProto.SentencePiece.UNKNOWN
        piece.piece = text.replace(" ", SPACE) if kind == 4 else text
        piece.score = score
    spec = proto.trainer_spec
    spec.model_type = model_pb2.TrainerSpec.BPE
    spec.vocab_size = len(vocab["tokens"])
    spec.byte_fallback = True
    spec.unk_id, spec.bos_id, spec.eos_id, spec.pad_id = vocab["unk"], vocab["bos"], vocab["eos"], vocab["pad"]
    norm = proto.normalizer_spec
    norm.name = "identity"
    norm.add_dummy_prefix = False
    norm.remove_extra_whitespaces = False
    norm.escape_whitespaces = True
    return proto.SerializeToString()


def build_processor(vocab: dict) -> sentencepiece.SentencePieceProcessor:
    return sentencepiece.SentencePieceProcessor(model_proto=build_proto(vocab))


def hf_tokenizer(proto: bytes):
    """transformers' GemmaTokenizer (a `tokenizers` fast tokenizer) converted from the ModelProto,
    BOS added as Gemma's tokenizer adds it. Its backend_tokenizer.to_str() is the tokenizer.json."""
    import tempfile
    from transformers import GemmaTokenizer
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "tokenizer.model").write_bytes(proto)
        return GemmaTokenizer.from_pretrained(d, add_bos_token=True)


def main() -> None:
    sp = build_processor(read_vocab(TESTDATA / "gemma3_vocab.bin.gz"))
    records = []
    for index, raw in enumerate(read_records(TESTDATA / "corpus.bin.gz")):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if SPACE in text:
            records.append({"record": index, "ids": sp.encode(text)})
    cases = [{"text": text, "ids": sp.encode(text)} for text in CASES]
    document = {
        "generator": "scripts/make_sentencepiece_fixtures.py",
        "sentencepiece_version": sentencepiece.__version__,
        "vocab": "gemma3_vocab.bin.gz",
        "note": "parse_special off, no BOS; corpus records are indices into corpus.bin.gz",
        "corpus_records": records,
        "cases": cases,
    }
    text = json.dumps(document, ensure_ascii=False, indent=1)
    # One line per case: the id lists are long and say nothing line by line.
    for entry in records + cases:
        one = json.dumps(entry, ensure_ascii=False)
        text = text.replace(json.dumps(entry, ensure_ascii=False, indent=1).replace("\n", "\n  "), one)
    OUT.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(records)} corpus records, {len(cases)} cases")


if __name__ == "__main__":
    main()
