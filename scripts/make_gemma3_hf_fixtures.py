#!/usr/bin/env python3
"""Hugging Face `tokenizers`' ids for Gemma 3's tokenizer.json, the reference for ember's reader of
that layout (tests/unit/tokenizer/hf_gemma3_tokenizer_json_test.cc).

The tokenizer.json is made as scripts/gguf_to_hf_dir.py makes it for a Gemma 3 directory: the
SentencePiece model rebuilt from testdata/gemma3_vocab.bin.gz (make_sentencepiece_fixtures.py),
converted by transformers' GemmaTokenizer. It is ~33 MB, so it is not committed; what is:

  gemma3_hf_tokenizer.json  the file without its three big parts (model.vocab, model.merges,
                            added_tokens), and how the test rebuilds those from the vocabulary
                            extract, with counts and FNV-1a digests so the rebuild is checked:
                              vocab        piece i of the extract (user-defined pieces with their
                                           U+2581 back) -> i
                              merges       for each piece in id order, every split into a left
                                           and right part (by code points, shortest left first)
                                           that are both pieces
                              added_tokens every control, unknown and user-defined piece, in id
                                           order; special unless user-defined
                            This script asserts that those rules give the converted file exactly.
  gemma3_hf_ids.bin.gz      `Tokenizer.from_file(...).encode(text, add_special_tokens=False)` for
                            every corpus record that is valid UTF-8, with encode_special_tokens on
                            (parse_special off) and off; the ids format of make_tokenizer_corpus.py.

Needs sentencepiece, protobuf, transformers, tokenizers (requirements/dev.txt).
Usage:  .venv/bin/python scripts/make_gemma3_hf_fixtures.py [--save-tokenizer-json PATH]
"""
from __future__ import annotations

import argparse
import gzip
import json

from tokenizers import Tokenizer

import make_sentencepiece_fixtures as spf
from make_tokenizer_corpus import ids_blob

OUT_JSON = spf.TESTDATA / "gemma3_hf_tokenizer.json"
OUT_IDS = spf.TESTDATA / "gemma3_hf_ids.bin.gz"


def fnv1a64(chunks) -> str:
    h = 0xCBF29CE484222325
    for chunk in chunks:
        for b in chunk:
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--save-tokenizer-json", help="also write the whole tokenizer.json here")
    args = ap.parse_args()
    vocab = spf.read_vocab(spf.TESTDATA / "gemma3_vocab.bin.gz")
    text = spf.hf_tokenizer(spf.build_proto(vocab)).backend_tokenizer.to_str()
    if args.save_tokenizer_json:
        with open(args.save_tokenizer_json, "w", encoding="utf-8") as f:
            f.write(text)
    doc = json.loads(text)

    # The rebuild rules, checked against the converted file.
    pieces = [t.replace(" ", spf.SPACE) if kind == 4 else t for t, _, kind in vocab["tokens"]]
    index = {p: i for i, p in enumerate(pieces)}
    assert len(index) == len(pieces) and doc["model"]["vocab"] == index
    merges = [[p[:k], p[k:]] for p in pieces for k in range(1, len(p)) if p[:k] in index and p[k:] in index]
    assert doc["model"]["merges"] == merges, "merges are not the rebuild rule's"
    added = [{"id": i, "content": pieces[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": kind != 4}
             for i, (_, _, kind) in enumerate(vocab["tokens"]) if kind in (2, 3, 4)]
    assert doc["added_tokens"] == added, "added_tokens are not the rebuild rule's"

    skeleton = dict(doc, added_tokens=[], model=dict(doc["model"], vocab={}, merges=[]))
    fixture = {
        "generator": "scripts/make_gemma3_hf_fixtures.py",
        "vocab": "gemma3_vocab.bin.gz",
        "digest": "FNV-1a 64 over: merges, left + '\\0' + right + '\\0' each; added_tokens, "
                  "content + '\\0' + ('1' if special else '0') each",
        "merges": {"count": len(merges),
                   "fnv1a64": fnv1a64(x for l, r in merges for x in (l.encode(), b"\0", r.encode(), b"\0"))},
        "added_tokens": {"count": len(added),
                         "fnv1a64": fnv1a64(x for a in added
                                            for x in (a["content"].encode(), b"\0", b"1" if a["special"] else b"0"))},
        "tokenizer_json": skeleton,
    }
    OUT_JSON.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    tok = Tokenizer.from_str(text)
    plain, special = [], []
    for raw in spf.read_records(spf.TESTDATA / "corpus.bin.gz"):
        try:
            record = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        tok.encode_special_tokens = True
        plain.append(tok.encode(record, add_special_tokens=False).ids)
        tok.encode_special_tokens = False
        special.append(tok.encode(record, add_special_tokens=False).ids)
    OUT_IDS.write_bytes(gzip.compress(ids_blob(plain, special), compresslevel=9, mtime=0))
    print(f"wrote {OUT_JSON.name} and {OUT_IDS.name}: {len(plain)} records, {len(merges)} merges, "
          f"{len(added)} added tokens")


if __name__ == "__main__":
    main()
