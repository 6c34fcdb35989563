#!/usr/bin/env python3
"""Builds the tokenizer test fixtures in tests/unit/tokenizer/testdata/ (see src/tokenizer/README.md).

  corpus.bin.gz           ~1.2 MB of varied text in records (Python stdlib sources and docstrings,
                          a dozen scripts, emoji, combining marks, whitespace runs, long numbers,
                          special-token look-alikes, some invalid UTF-8), made deterministically here
  smollm2_vocab.bin.gz    tokenizer metadata of SmolLM2-135M-Instruct.Q4_1.gguf
  gemma3_vocab.bin.gz     tokenizer metadata of gemma-3-270m-q4_k_m.gguf
  smollm2_ids.bin.gz      llama.cpp's token ids for every record, parse_special off and on
  gemma3_ids.bin.gz       the same for Gemma 3
  hf_*.json, hf_*_ids.bin.gz  two small BPE tokenizer.json files trained here with the
                          `tokenizers` package, and its ids for the first HF_SAMPLE records of
                          the corpus that are valid UTF-8

The references come from llama.cpp through llama-cpp-python (`Llama(path, vocab_only=True)
.tokenize(bytes, add_bos=True, special=...)`); SmolLM2's are also compared with Hugging Face
`tokenizers` running a tokenizer.json built from the same GGUF vocabulary and merges.

Needs (in the project .venv): gguf, tokenizers, llama-cpp-python (compiles llama.cpp, ~20 min on
2 cores). Usage: .venv/bin/python scripts/make_tokenizer_corpus.py [--models DIR]

File formats (all gzip; integers are unsigned LEB128 varints unless noted):
  records file: "EMBREC1\\n", count, then per record: length, bytes.
  vocab file:   "EMBVOC1\\n", model (0 gpt2, 1 llama), pre (length, bytes), bos+1, eos+1, unk+1,
                pad+1, flags (1 add_bos, 2 add_eos, 4 add_space_prefix), n_tokens, per token:
                length, bytes, score code (see score_code), type; n_merges, per merge: length,
                bytes.
  ids file:     "EMBIDS1\\n", count, per record: n, ids (parse_special off); then per record a
                byte 0 (same ids with parse_special on) or 1 followed by n, ids.
"""

import argparse
import gzip
import inspect
import json
import os
import pkgutil
import random
import struct
import sys
import sysconfig
import importlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "unit", "tokenizer", "testdata")
MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}
SEED = 20260101
HF_SAMPLE = 400


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def blob(b):
    return varint(len(b)) + b


def write_gz(name, data):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        # mtime=0 keeps the file identical from run to run.
        f.write(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"wrote {path}: {len(data)} bytes raw, {os.path.getsize(path)} gz")


# ---------------------------------------------------------------------------------------------
# The corpus.

SENTENCES = {
    "zh": ["我们在山上看日出，天空慢慢变成了金色。", "这个程序的速度比上一个版本快了三倍。",
           "请把文件保存到桌面上，然后重新启动电脑。", "人工智能正在改变我们工作和生活的方式。",
           "北京的冬天很冷，但是夏天非常热。"],
    "ja": ["今日はとても良い天気ですね。", "東京駅で友達と待ち合わせをしました。",
           "このプログラムはメモリをあまり使いません。", "カタカナとひらがなと漢字を混ぜて書きます。",
           "ｶﾀｶﾅの半角文字もあります。"],
    "ko": ["안녕하세요, 만나서 반갑습니다.", "서울의 지하철은 매우 편리합니다.",
           "토큰화는 텍스트를 작은 조각으로 나누는 과정입니다."],
    "ar": ["مرحبا بالعالم، كيف حالك اليوم؟", "تعلم البرمجة يحتاج إلى الصبر والممارسة.",
           "القاهرة هي عاصمة مصر وأكبر مدنها."],
    "he": ["שלום עולם, מה שלומך?", "ירושלים היא עיר עתיקה מאוד."],
    "hi": ["नमस्ते, आप कैसे हैं?", "भारत एक विशाल और विविध देश है।",
           "मशीन लर्निंग डेटा से पैटर्न सीखती है।"],
    "ru": ["Привет, мир! Как дела?", "Москва — столица России, крупнейший город страны.",
           "Ёжик в тумане искал лошадку.", "Съешь же ещё этих мягких французских булок."],
    "el": ["Γειά σου κόσμε! Τι κάνεις;", "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
           "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία."],
    "th": ["สวัสดีครับ ยินดีที่ได้รู้จัก", "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย"],
    "vi": ["Xin chào thế giới, bạn có khỏe không?", "Tiếng Việt có rất nhiều dấu thanh."],
    "de": ["Größenwahn und Straßenbahn: Übermäßig schöne Äpfel.", "Die Würde des Menschen ist unantastbar."],
    "fr": ["L'été dernier, nous sommes allés à la plage où l'eau était très froide.",
           "Ça va? Oui, ça va très bien, merci!"],
    "es": ["¿Dónde está la biblioteca? ¡Está allí, señor!", "El niño comió piña y jalapeños."],
    "tr": ["İstanbul'da yaşıyorum; ıslak şemsiyeyi çıkardım.", "Türkçe'de 'ı' ve 'i' farklı harflerdir."],
    "en": ["I'm sure they'll say it's fine, but we've seen what you'd do.",
           "DON'T SHOUT, IT'S RUDE; We'Re NoT YeLlInG.", "The quick brown fox jumps over the lazy dog."],
}

EMOJI = ["😀", "😂", "🥲", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇩🇪", "❤️", "🔥", "🤖", "🧑🏿‍🚀",
         "✅", "⭐", "🎉", "🐍", "🦀", "1️⃣", "#️⃣", "☕", "🫠", "🫶🏻"]

SPECIAL_LOOKALIKES = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<start_of_turn>", "<end_of_turn>", "<bos>",
    "<eos>", "<pad>", "<unk>", "<mask>", "</s>", "<s>", "<0x41>", "<0x0A>", "<0xFF>", "<0xzz>",
    "<unused0>", "<unused123>", "<unused6241>", "[multimodal]", "<start_of_image>", "<end_of_image>",
    "<table>", "</table>", "<h1>", "</h2>", "<code>", "</code>", "<b>", "<div>", "<repo_name>",
    "<filename>", "<gh_stars>", "<jupyter_code>", "<empty_output>", "<|im_sta", "rt|>", "<<|im_end|>>",
    "<start_of_turn><start_of_turn>", "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n", "<|", "|>", "<", ">",
]


def stdlib_records(rng, budget):
    stdlib = sysconfig.get_paths()["stdlib"]
    files = []
    for dirpath, dirnames, filenames in os.walk(stdlib):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "test", "__pycache__",
                                                             "idlelib", "lib2to3", "tkinter"))
        for name in sorted(filenames):
            if name.endswith(".py"):
                files.append(os.path.join(dirpath, name))
    rng.shuffle(files)
    records, total = [], 0
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        lines = data.split(b"\n")
        i = 0
        while i < len(lines) and total < budget:
            n = rng.randint(5, 120)
            chunk = b"\n".join(lines[i:i + n])
            if rng.random() < 0.5:
                chunk += b"\n"
            if chunk.strip():
                records.append(chunk)
                total += len(chunk)
            i += n
        if total >= budget:
            break
    return records


def docstring_records(rng, budget):
    names = sorted(m.name for m in pkgutil.iter_modules() if not m.name.startswith("_"))
    skip = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "lib2to3"}
    records, total = [], 0
    for name in names:
        if name in skip or total >= budget:
            continue
        path = getattr(sys.modules.get(name), "__file__", None)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None or not spec.origin.startswith(sysconfig.get_paths()["stdlib"]):
            continue
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        for attr_name in sorted(dir(module)):
            doc = inspect.getdoc(getattr(module, attr_name, None))
            if doc and len(doc) > 80 and rng.random() < 0.5:
                records.append(doc.encode())
                total += len(doc)
    return records


def random_block_text(rng, lo, hi, n):
    out = []
    for _ in range(n):
        cp = rng.randint(lo, hi)
        c = chr(cp)
        import unicodedata
        if unicodedata.category(c) not in ("Cn", "Cs", "Co"):
            out.append(c)
    return "".join(out)


def generated_records(rng, count):
    blocks = [(0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x0900, 0x097F), (0x0600, 0x06FF), (0x0400, 0x04FF),
              (0x0370, 0x03FF), (0x0E00, 0x0E7F), (0x05D0, 0x05EA), (0x1F300, 0x1FAFF), (0x2200, 0x22FF),
              (0x2500, 0x257F), (0x3040, 0x30FF), (0x00A0, 0x024F), (0x0300, 0x036F), (0x1D400, 0x1D7FF),
              (0x2000, 0x206F), (0xFF00, 0xFFEF), (0x10A0, 0x10FF), (0x0B80, 0x0BFF), (0x1200, 0x137F)]
    langs = sorted(SENTENCES)
    records = []
    for i in range(count):
        parts = []
        for _ in range(rng.randint(3, 25)):
            kind = rng.random()
            if kind < 0.35:
                parts.append(rng.choice(SENTENCES[rng.choice(langs)]))
            elif kind < 0.45:
                parts.append("".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 6))))
            elif kind < 0.55:
                lo, hi = rng.choice(blocks)
                parts.append(random_block_text(rng, lo, hi, rng.randint(1, 30)))
            elif kind < 0.62:
                # combining marks stacked on letters (decomposed accents, "zalgo")
                base = rng.choice("aeiouAEIOUncszxyqw")
                parts.append(base + "".join(chr(rng.randint(0x300, 0x36F)) for _ in range(rng.randint(1, 8))))
            elif kind < 0.70:
                ws = rng.choice([" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2009", "\u200b", "\x0b", "\x0c", "\x85"])
                parts.append(ws * rng.randint(1, 70))
            elif kind < 0.78:
                parts.append(rng.choice(["", "-", "+", "$", "0x", "#", " "]) +
                             str(rng.randint(0, 10 ** rng.randint(1, 40))) +
                             rng.choice(["", ".", ",", ".5", "e10", "%", "km", "th", "'s"]))
            elif kind < 0.88:
                parts.append(rng.choice(SPECIAL_LOOKALIKES))
            elif kind < 0.94:
                parts.append(rng.choice(["٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "①②③", "ⅣⅫ", "½¾", "１２３", "๑๒๓", "²³¹"]))
            else:
                parts.append(rng.choice(["'s", "'T", "'RE", "'ve", "'Ll", "'d", "'m", "’s", "''", "'''"]))
            parts.append(rng.choice(["", " ", " ", " ", "\n", "  ", "\t", ", ", ". "]))
        records.append("".join(parts).encode())
    return records


def edge_records():
    texts = ["", " ", "  ", "\n", "\n\n\n", " \n \n ", "\t\t\t", " " * 100, "\n" * 40, "\t" * 33,
             " " * 31 + "x", " " * 32 + "x", "a" * 500, "1" * 100, "Ġ", "▁", "▁▁hello▁world", "\u2581 x",
             "<0x41><0x42>", "<|im_start|>" * 5, "<start_of_turn>" * 3, "x<unused5>y", "\r\n\r\n",
             "hello world", " hello", "hello ", "Hello, World! 123 4567 89012", "\u00e9\u0301\u0327",
             "\U0001F600" * 10, "\ufeffBOM first", "zero\u200bwidth\u200cjoiner\u200d", "A\u0000B"]
    recs = [t.encode() for t in texts]
    # Invalid UTF-8: llama.cpp reads each bad byte as U+FFFD (byte-level BPE) or byte-falls-back it
    # (SentencePiece); ember must do the same.
    recs += [b"caf\xc3", b"\x80abc", b"ab\xe2\x82", b"\xc0\x80 overlong", b"\xed\xa0\x80 surrogate",
             b"mixed \xff\xfe bytes", b"\xf0\x9f\x98 cut emoji", b"ok \xe4\xb8\xad\xe6 partial"]
    return recs


def build_corpus():
    rng = random.Random(SEED)
    records = edge_records()
    records += stdlib_records(rng, 560_000)
    records += docstring_records(rng, 180_000)
    records += generated_records(rng, 1400)
    rng.shuffle(records)
    return records


def records_blob(records):
    return b"EMBREC1\n" + varint(len(records)) + b"".join(blob(r) for r in records)


# ---------------------------------------------------------------------------------------------
# GGUF tokenizer metadata.

def read_gguf_tokenizer(path):
    import gguf
    r = gguf.GGUFReader(path)

    def get(key, default=None):
        f = r.fields.get("tokenizer.ggml." + key)
        if f is None:
            return default
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            return [f.contents(i) for i in range(len(f.data))]
        return f.contents()

    return {
        "model": get("model"), "pre": get("pre", ""), "tokens": get("tokens"),
        "scores": get("scores"), "types": get("token_type"), "merges": get("merges", []),
        "bos": get("bos_token_id", -1), "eos": get("eos_token_id", -1),
        "unk": get("unknown_token_id", -1), "pad": get("padding_token_id", -1),
        "add_bos": get("add_bos_token", False), "add_eos": get("add_eos_token", False),
        "add_space_prefix": get("add_space_prefix", False),
    }


def vocab_blob(v):
    out = bytearray(b"EMBVOC1\n")
    out += varint({"gpt2": 0, "llama": 1}[v["model"]]) + blob(v["pre"].encode())
    for key in ("bos", "eos", "unk", "pad"):
        out += varint(v[key] + 1)
    out += varint(int(v["add_bos"]) | int(v["add_eos"]) << 1 | int(v["add_space_prefix"]) << 2)
    out += varint(len(v["tokens"]))
    scores = v["scores"] or [0.0] * len(v["tokens"])
    types = v["types"] or [1] * len(v["tokens"])
    previous = 0
    for tok, score, typ in zip(v["tokens"], scores, types):
        out += blob(tok.encode("utf-8", "surrogatepass")) + score_code(score, previous) + varint(typ)
        if score == int(score):
            previous = int(score)
    out += varint(len(v["merges"]))
    for m in v["merges"]:
        out += blob(m.encode())
    return bytes(out)


def score_code(score, previous):
    # Integral scores (all of Gemma's: -rank) as the zigzag difference from the previous integral
    # score, shifted left once; anything else as 1 and the float32's 4 little-endian bytes.
    if score == int(score) and abs(int(score)) < 2 ** 31:
        d = int(score) - previous
        zigzag = d << 1 if d >= 0 else ((-d) << 1) - 1
        return varint(zigzag << 1)
    return varint(1) + struct.pack("<f", score)


def ids_blob(plain, special):
    out = bytearray(b"EMBIDS1\n") + varint(len(plain))
    for ids in plain:
        out += varint(len(ids)) + b"".join(varint(i) for i in ids)
    for a, b in zip(plain, special):
        if a == b:
            out.append(0)
        else:
            out.append(1)
            out += varint(len(b)) + b"".join(varint(i) for i in b)
    return bytes(out)


def llama_reference(path, records):
    from llama_cpp import Llama
    llm = Llama(model_path=path, vocab_only=True, verbose=False)
    plain = [llm.tokenize(r, add_bos=True, special=False) for r in records]
    special = [llm.tokenize(r, add_bos=True, special=True) for r in records]
    return plain, special


# ---------------------------------------------------------------------------------------------
# Hugging Face cross-checks and tokenizer.json fixtures.

def hf_from_gguf_smollm2(v):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, AddedToken
    vocab = {t: i for i, t in enumerate(v["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in v["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(v["tokens"], v["types"]) if ty == 3])
    return tok


def cross_check_hf(tok, records, plain, special, bos):
    mismatches = 0
    for r, a, b in zip(records, plain, special):
        try:
            text = r.decode("utf-8")
        except UnicodeDecodeError:
            continue  # HF takes str; invalid bytes are llama-only cases
        strip = lambda ids: ids[1:] if bos is not None and ids[:1] == [bos] else ids
        tok.encode_special_tokens = False
        got_special = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = True
        got_plain = tok.encode(text, add_special_tokens=False).ids
        for got, want, what in ((got_special, strip(b), "special"), (got_plain, strip(a), "plain")):
            if got != want:
                mismatches += 1
                if mismatches <= 5:
                    print(f"  HF/llama.cpp mismatch ({what}) on {text[:60]!r}: {got[:12]} vs {want[:12]}")
    return mismatches


def train_hf_fixtures(records):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers, AddedToken, Regex
    texts = [r.decode() for r in records[:3000] if r and all(b < 0x80 or True for b in r[:1])
             if _valid(r)]
    shapes = {
        # Digits + ByteLevel(use_regex) as SmolLM2 ships it; merges rewritten as "a b" strings.
        "hf_digits_bytelevel": pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]),
        # Llama 3's Split regex + ByteLevel(use_regex=false); merges stay [a, b] pairs.
        "hf_llama3_split": pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
                                 behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
    }
    for name, pre in shapes.items():
        tok = Tokenizer(models.BPE(ignore_merges=(name == "hf_llama3_split")))
        tok.pre_tokenizer = pre
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=1200, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                      special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                      show_progress=False)
        tok.train_from_iterator(texts, trainer)
        tok.add_tokens([AddedToken("<tool>", special=False, normalized=False)])
        doc = json.loads(tok.to_str())
        if name == "hf_digits_bytelevel":
            doc["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in doc["model"]["merges"]]
        text = json.dumps(doc, ensure_ascii=False, indent=None, separators=(",", ":"))
        with open(os.path.join(OUT, name + ".json"), "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {name}.json: {len(text)} bytes")
        tok = Tokenizer.from_str(text)
        sample = [r for r in records if _valid(r)][:HF_SAMPLE]
        tok.encode_special_tokens = True
        plain = [tok.encode(r.decode(), add_special_tokens=False).ids for r in sample]
        tok.encode_special_tokens = False
        special = [tok.encode(r.decode(), add_special_tokens=False).ids for r in sample]
        write_gz(name + "_ids.bin.gz", ids_blob(plain, special))


def _valid(r):
    try:
        r.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=os.environ.get("EMBER_MODEL_CACHE",
                        os.path.expanduser("~/.cache/ember/models")))
    parser.add_argument("--skip-llama", action="store_true", help="corpus and vocab files only")
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)

    records = build_corpus()
    print(f"corpus: {len(records)} records, {sum(map(len, records))} bytes")
    write_gz("corpus.bin.gz", records_blob(records))
    train_hf_fixtures(records)

    for name, filename in MODELS.items():
        path = os.path.join(args.models, filename)
        v = read_gguf_tokenizer(path)
        write_gz(f"{name}_vocab.bin.gz", vocab_blob(v))
        if args.skip_llama:
            continue
        plain, special = llama_reference(path, records)
        n_tokens = sum(map(len, plain)) + sum(map(len, special))
        print(f"{name}: llama.cpp gave {n_tokens} tokens over both modes")
        write_gz(f"{name}_ids.bin.gz", ids_blob(plain, special))
        if name == "smollm2":
            bad = cross_check_hf(hf_from_gguf_smollm2(v), records, plain, special,
                                 v["bos"] if v["add_bos"] else None)
            print(f"smollm2: Hugging Face tokenizers vs llama.cpp: {bad} mismatching encodings")


if __name__ == "__main__":
    main()
