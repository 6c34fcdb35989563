#!/usr/bin/env python3
"""Token ids of chat conversations from transformers' apply_chat_template(..., tokenize=True), for
SmolLM2-135M-Instruct and Gemma 3 270M: the reference for ember's `/tokenize` with `messages` (and
so for the prompt of every chat request, which is rendered and tokenized the same way).

For each conversation of scripts/make_chat_template_fixtures.py (the matrix behind
chat_templates.json) that the API accepts (text content only, a non-empty conversation), with the
two models' templates, this records the /tokenize request body and the ids transformers gives, or
the error it raises (the API then answers 400):

  * the tokenizers are rebuilt from the committed vocabulary extracts of the two GGUFs
    (testdata/*_vocab.bin.gz, scripts/make_tokenizer_corpus.py): SmolLM2's as a byte-level BPE
    tokenizer.json (as make_tokenizer_corpus.py builds it, where it matches llama.cpp on the whole
    corpus), Gemma 3's as a SentencePiece model (scripts/make_sentencepiece_fixtures.py) that
    transformers converts to its GemmaTokenizer itself;
  * content parts: a template that loops over them (Gemma 3's) is given the list, as transformers
    and vLLM give it; the others the parts' texts joined by "\\n", which is what vLLM passes such
    templates (transformers itself would fail on a list there). CONTENT_PARTS says which template
    is which; ember decides it from the template (ChatTemplate::wants_content_parts, tested on the
    same templates);
  * an assistant's null or absent content is "" (and null members are absent), as the API reads
    messages (so a tool-call turn renders on a template that concatenates content), but for the
    final message of continue_final_message, which then has nothing to continue;
  * add_special_tokens is false, vLLM's default for messages: apply_chat_template tokenizes the
    render with add_special_tokens=False and special tokens parsed.

Needs transformers, tokenizers, jinja2, sentencepiece, protobuf (requirements/dev.txt).
Usage:  .venv/bin/python scripts/make_chat_ids_fixtures.py
Writes: tests/unit/tokenizer/testdata/chat_template_ids.json
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
from pathlib import Path

import transformers
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_chat_template_fixtures as chat_fixtures  # noqa: E402
from make_sentencepiece_fixtures import TESTDATA, build_processor, read_vocab  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = TESTDATA / "chat_template_ids.json"

# template -> whether it loops over message content parts (vLLM's "openai" content format).
CONTENT_PARTS = {"smollm2": False, "gemma3": True}
API_ROLES = {"system", "developer", "user", "assistant", "tool"}


def smollm2_tokenizer() -> PreTrainedTokenizerFast:
    v = read_vocab(TESTDATA / "smollm2_vocab.bin.gz")
    texts = [t for t, _, _ in v["tokens"]]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(texts)},
                               merges=[tuple(m.split(" ", 1)) for m in v["merges"]]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, _, kind in v["tokens"] if kind == 3])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=texts[v["bos"]], eos_token=texts[v["eos"]])


def gemma3_tokenizer(workdir: Path):
    v = read_vocab(TESTDATA / "gemma3_vocab.bin.gz")
    (workdir / "tokenizer.model").write_bytes(build_processor(v).serialized_model_proto())
    texts = [t for t, _, _ in v["tokens"]]
    (workdir / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "GemmaTokenizer", "bos_token": texts[v["bos"]], "eos_token": texts[v["eos"]],
        "unk_token": texts[v["unk"]], "pad_token": texts[v["pad"]], "add_bos_token": True, "add_eos_token": False}))
    return AutoTokenizer.from_pretrained(str(workdir))


def api_accepts(messages: list) -> bool:
    if not messages:
        return False
    for m in messages:
        if m.get("role") not in API_ROLES:
            return False
        content = m.get("content")
        if isinstance(content, list) and any(p.get("type") != "text" for p in content):
            return False
    return True


def for_template(messages: list, content_parts: bool, continue_final_message: bool) -> list:
    messages = copy.deepcopy(messages)
    for i, m in enumerate(messages):
        # As the API reads a message (NormalizeMessages): null members are absent, and an
        # assistant's null or absent content is "" (tool calls only), which is what vLLM hands a
        # template that reads content as a string; but a final message without content has nothing
        # to continue (transformers raises, and so does the API).
        for key in [k for k, v in m.items() if v is None and k != "content"]:
            del m[key]
        continued = continue_final_message and i == len(messages) - 1
        if m.get("role") == "assistant" and m.get("content") is None and not continued:
            m["content"] = ""
        if not content_parts and isinstance(m.get("content"), list):
            m["content"] = "\n".join(p["text"] for p in m["content"])
    return messages


def main() -> None:
    chat_fixtures.chat_template_utils.datetime = chat_fixtures._FixedDatetime  # strftime_now() pinned
    with tempfile.TemporaryDirectory() as tmp:
        tokenizers = {"smollm2": smollm2_tokenizer(), "gemma3": gemma3_tokenizer(Path(tmp))}
        entries = []
        for name, tok in tokenizers.items():
            file_name = chat_fixtures.TEMPLATES[name][0]
            source = (chat_fixtures.TEMPLATE_DIR / file_name).read_text(encoding="utf-8")
            for c in chat_fixtures.CASES:
                if not api_accepts(c["messages"]):
                    continue
                request = {"messages": c["messages"], "add_generation_prompt": c["add_generation_prompt"]}
                if c["tools"] is not None:
                    request["tools"] = c["tools"]
                if c["continue_final_message"]:
                    request["continue_final_message"] = True
                if c["extra"]:
                    request["chat_template_kwargs"] = c["extra"]
                entry = {"template": name, "case": c["name"], "request": request}
                try:
                    entry["ids"] = tok.apply_chat_template(
                        for_template(c["messages"], CONTENT_PARTS[name], c["continue_final_message"]), tools=copy.deepcopy(c["tools"]),
                        chat_template=source, add_generation_prompt=c["add_generation_prompt"],
                        continue_final_message=c["continue_final_message"], tokenize=True, return_dict=False,
                        **c["extra"])
                except Exception as e:  # the API must refuse it too
                    entry["error"] = {"type": type(e).__name__, "message": str(e)[:300]}
                entries.append(entry)
    document = {
        "generator": "scripts/make_chat_ids_fixtures.py",
        "transformers_version": transformers.__version__,
        "content_parts": CONTENT_PARTS,
        "note": "request: a /tokenize body (add_special_tokens false, vLLM's default for messages); ids: "
                "apply_chat_template(..., tokenize=True) of the same conversation",
        "cases": entries,
    }
    text = json.dumps(document, ensure_ascii=False, indent=1)
    for entry in entries:  # the id lists on one line each
        if "ids" in entry:
            text = text.replace(json.dumps(entry["ids"], indent=1).replace("\n", "\n   "), json.dumps(entry["ids"]), 1)
    OUT.write_text(text + "\n", encoding="utf-8")
    errors = sum("error" in e for e in entries)
    print(f"wrote {OUT.relative_to(ROOT)}: {len(entries)} cases ({errors} expected errors)")


if __name__ == "__main__":
    main()
