"""The frozen target for DSpark training: SmolLM2-135M-Instruct from ember's local GGUF, run by
transformers (which dequantizes it, so the hidden states are those of the weights ember serves),
plus the prompt source and self-distilled continuations.

Taps follow src/spec/dspark/checkpoint_layout.md: tap l is transformers'
output_hidden_states[l + 1]; for the last layer that entry is the final-normed hidden state.
"""

from __future__ import annotations

import inspect
import os
import random
import re
from pathlib import Path

import torch

MODELS = Path(os.path.expanduser("~/.cache/ember/models"))
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def load_target(gguf: str = GGUF):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(MODELS, gguf_file=gguf)
    model = AutoModelForCausalLM.from_pretrained(MODELS, gguf_file=gguf, dtype=torch.float32).eval()
    model.requires_grad_(False)
    return tok, model


def embed_and_head(model):
    """The target's embedding and lm_head weights (SmolLM2 ties them: one tensor)."""
    return model.model.embed_tokens.weight.detach(), model.lm_head.weight.detach()


@torch.no_grad()
def taps(model, ids: torch.Tensor, layer_ids: list[int], attention_mask=None) -> torch.Tensor:
    """[B, T, m*d]: the taps of every position, concatenated in layer_ids order."""
    # The decoder only (no lm_head); its last hidden_states entry is the final-normed one.
    out = model.model(ids, attention_mask=attention_mask, output_hidden_states=True)
    hs = out.hidden_states
    return torch.cat([hs[0 if l == -1 else l + 1] for l in layer_ids], -1).float()


@torch.no_grad()
def taps_batched(model, seqs: list[torch.Tensor], layer_ids: list[int], batch: int = 16) -> list[torch.Tensor]:
    """taps() of each sequence ([T_i, m*d], bf16), computed in batches of similar length. Right
    padding changes nothing before it (causal attention), so each sequence's rows are its own."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    out: list[torch.Tensor | None] = [None] * len(seqs)
    for b in range(0, len(order), batch):
        idx = order[b : b + batch]
        width = max(len(seqs[i]) for i in idx)
        padded = torch.zeros(len(idx), width, dtype=torch.long)
        for r, i in enumerate(idx):
            padded[r, : len(seqs[i])] = seqs[i]
        t = taps(model, padded, layer_ids)
        for r, i in enumerate(idx):
            out[i] = t[r, : len(seqs[i])].to(torch.bfloat16)
    return out


# --- prompts: text that ships on this machine ---------------------------------------------------

LICENSES = Path("/usr/share/common-licenses")
STDLIB = ["json", "re", "collections", "itertools", "functools", "os", "pathlib", "string",
          "textwrap", "datetime", "statistics", "fractions", "decimal", "heapq", "bisect", "random",
          "math", "shutil", "subprocess", "argparse", "logging", "csv", "sqlite3", "socket",
          "threading", "queue", "zipfile", "tarfile", "hashlib", "base64", "urllib.parse",
          "email.message", "http.client", "typing", "dataclasses", "enum", "contextlib", "abc",
          "io", "tempfile", "glob", "fnmatch", "difflib", "unittest", "doctest", "pickle",
          "copy", "pprint", "inspect", "time", "calendar", "uuid", "struct", "array", "operator",
          "asyncio", "concurrent.futures", "multiprocessing", "selectors", "signal", "mmap",
          "codecs", "unicodedata", "locale", "gettext", "configparser", "tomllib", "netrc",
          "plistlib", "xml.etree.ElementTree", "xml.dom.minidom", "html", "html.parser",
          "urllib.request", "http.server", "http.cookies", "ftplib", "smtplib", "imaplib",
          "mailbox", "mimetypes", "ipaddress", "ssl", "hmac", "secrets", "zlib", "gzip", "bz2",
          "lzma", "shelve", "dbm", "sched", "contextvars", "weakref", "types", "numbers", "cmath",
          "graphlib", "reprlib", "traceback", "warnings", "dis", "ast", "tokenize", "importlib",
          "pkgutil", "runpy", "sysconfig", "platform", "getpass", "cmd", "shlex", "optparse",
          "filecmp", "linecache", "stat", "timeit", "trace", "tracemalloc", "cProfile", "pstats",
          "wave", "colorsys", "zoneinfo", "selectors", "socketserver", "xmlrpc.client",
          "numpy", "numpy.linalg", "numpy.random", "numpy.fft", "numpy.polynomial"]

TEMPLATES_DOC = [
    "Explain in plain words what this Python documentation says:\n\n{t}",
    "Here is part of the Python documentation:\n\n{t}\n\nWrite a short example that uses it.",
    "Summarize this in two sentences:\n\n{t}",
    "What is this Python feature for?\n\n{t}",
]
TEMPLATES_LICENSE = [
    "Explain this license clause in simple terms:\n\n{t}",
    "Summarize this paragraph:\n\n{t}",
    "What does this text allow and forbid?\n\n{t}",
]


def _license_paragraphs() -> list[str]:
    paras = []
    for f in sorted(LICENSES.iterdir()):
        if f.is_symlink() or not f.is_file():
            continue
        for p in re.split(r"\n\s*\n", f.read_text(errors="ignore")):
            p = " ".join(p.split())
            if 200 <= len(p) <= 600:
                paras.append(p)
    return paras


def _public_members(modules: list[str], methods: bool):
    """(qualified name, object) of each public function and class of the modules that import, or
    with `methods`, of each public callable attribute of those classes."""
    import importlib

    for name in modules:
        try:
            mod = importlib.import_module(name)
        except Exception:
            continue
        for attr, obj in sorted(vars(mod).items()):
            if attr.startswith("_") or not (inspect.isclass(obj) or (not methods and inspect.isfunction(obj))):
                continue
            if not methods:
                yield f"{name}.{attr}", obj
                continue
            for method, fn in sorted(vars(obj).items()):
                if not method.startswith("_") and callable(fn):
                    yield f"{name}.{attr}.{method}", fn


def _first_paragraphs(members) -> list[str]:
    """'qualified name: first paragraph of its docstring' for docstrings of 40-600 chars, sorted."""
    docs = []
    for qualified, obj in members:
        d = (inspect.getdoc(obj) or "").split("\n\n")[0].strip()
        if 40 <= len(d) <= 600:
            docs.append(f"{qualified}: {d}")
    return sorted(set(docs))


def docstrings(modules: list[str] = STDLIB) -> list[str]:
    """'module.name: first paragraph' of each public function and class of `modules` (40-600 chars)."""
    return _first_paragraphs(_public_members(modules, methods=False))


# More training text (never held out): the packages of the project's virtualenv, and the methods of
# every class. The held-out prompts stay those of the base pool above, so drafters trained with and
# without this text are measured on the same prompts.
EXTRA_MODULES = ["sympy", "sympy.functions", "sympy.matrices", "sympy.polys", "networkx",
                 "networkx.algorithms", "matplotlib.pyplot", "torch", "torch.nn", "torch.nn.functional",
                 "torch.optim", "PIL.Image", "jinja2", "requests", "yaml", "click", "rich.console", "attr",
                 "mpmath", "pytest", "tqdm", "typer", "fsspec", "scipy.linalg", "scipy.stats",
                 "scipy.optimize", "scipy.signal", "scipy.sparse", "pandas"]


def method_docstrings(modules: list[str]) -> list[str]:
    """'module.Class.method: first paragraph' of each public method of each public class (40-600 chars)."""
    return _first_paragraphs(_public_members(modules, methods=True))


def extra_texts(exclude: list[str]) -> list[str]:
    """EXTRA_MODULES' docstrings and every module's method docstrings, one per distinct body, none
    whose body appears in `exclude` (held-out and benchmark texts)."""
    seen, out = set(), []
    for d in docstrings(EXTRA_MODULES) + method_docstrings(STDLIB + EXTRA_MODULES):
        body = d.split(": ", 1)[1]
        if body in seen or any(body in t for t in exclude):
            continue
        seen.add(body)
        out.append(d)
    return out


# A second pool of training text (never held out), added once the first was used up (session 40):
# more of the virtualenv's packages and the standard library's submodules. Its prompts form their own
# batches (train_dspark.py's `grow` stage, a data shard of its own), so the first pool's batch order,
# which `data --resume` depends on, is unchanged.
MORE_MODULES = [
    "transformers.generation", "transformers.tokenization_utils_base", "transformers.modeling_utils",
    "transformers.configuration_utils", "transformers.trainer", "transformers.training_args",
    "transformers.pipelines", "huggingface_hub", "pydantic", "hypothesis", "hypothesis.strategies",
    "werkzeug", "werkzeug.utils", "werkzeug.datastructures", "pygments", "pygments.lexer", "jsonschema",
    "markdown_it", "accelerate", "safetensors.torch", "gguf", "packaging.version", "packaging.specifiers",
    "sortedcontainers", "anyio", "openai", "rich.table", "rich.text", "rich.progress", "rich.panel",
    "rich.syntax", "rich.markdown", "rich.pretty", "rich.prompt", "rich.tree", "rich.live", "rich.logging",
    "sympy.core", "sympy.solvers", "sympy.geometry", "sympy.logic", "sympy.sets", "sympy.stats",
    "sympy.series", "sympy.integrals", "sympy.simplify", "sympy.ntheory", "sympy.combinatorics",
    "sympy.tensor", "sympy.printing", "sympy.physics.units", "sympy.physics.mechanics", "sympy.calculus",
    "sympy.utilities", "torch.distributions", "torch.utils.data", "torch.linalg", "torch.fft",
    "torch.special", "torch.autograd", "torch.nn.init", "torch.nn.utils", "torch.optim.lr_scheduler",
    "torch.fx", "torch.testing", "networkx.algorithms.shortest_paths", "networkx.algorithms.flow",
    "networkx.algorithms.community", "networkx.generators", "networkx.readwrite", "networkx.linalg",
    "networkx.classes", "numpy.ma", "numpy.lib", "numpy.testing", "mpmath.functions", "yaml.constructor",
    "click.types", "click.core", "typer.main", "jinja2.environment", "jinja2.ext", "jinja2.filters",
    "requests.sessions", "requests.models", "urllib3", "urllib3.util", "tqdm.contrib", "fsspec.spec",
    "tokenizers.pre_tokenizers", "tokenizers.normalizers", "tokenizers.decoders", "_pytest.python",
    "_pytest.fixtures", "psutil", "filelock", "regex", "idna", "charset_normalizer", "referencing",
    "pluggy", "attrs", "h11", "markupsafe", "annotated_types", "setuptools", "email.mime.text",
    "email.utils", "logging.handlers", "collections.abc", "os.path", "importlib.metadata",
    "importlib.resources", "unittest.mock", "asyncio.streams", "asyncio.tasks", "asyncio.queues",
    "asyncio.subprocess", "multiprocessing.pool", "multiprocessing.shared_memory",
    "concurrent.futures.thread", "json.decoder", "xml.sax", "wsgiref.simple_server", "curses", "turtle",
    "tkinter", "venv", "zipapp", "compileall", "py_compile", "symtable", "keyword", "bdb", "pdb",
    "faulthandler", "site", "code", "codeop", "quopri", "binascii", "ctypes", "select", "termios",
    "pty", "fcntl", "resource"]


def more_prompts(exclude: list[str], seed: int = 1, per_text: int = 2) -> list[str]:
    """The second pool's training prompts: MORE_MODULES' function, class and method docstrings
    whose body is in neither the first pool (base or extra) nor `exclude` (held-out and benchmark
    texts), each under `per_text` documentation templates, deterministically shuffled."""
    known = {d.split(": ", 1)[1] for d in docstrings() + extra_texts([])}
    seen, texts = set(), []
    for d in docstrings(MORE_MODULES) + method_docstrings(MORE_MODULES):
        body = d.split(": ", 1)[1]
        if body in known or body in seen or any(body in t for t in exclude):
            continue
        seen.add(body)
        texts.append(d)
    rng = random.Random(seed)
    out = [f.format(t=t) for t in texts for f in rng.sample(TEMPLATES_DOC, per_text)]
    rng.shuffle(out)
    return out


def prompts(seed: int = 0, held_out: int = 32, per_text: int = 2, extra: bool = False,
            exclude: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """(held_out, train) prompts, deterministically shuffled: license clauses and stdlib/numpy
    docstrings under instruction templates. The first `held_out` texts (one template each) are
    never trained on; every other text appears under `per_text` different templates. `extra` adds
    extra_texts() to the training prompts (none of them in the held-out set or `exclude`)."""
    rng = random.Random(seed)
    texts = [(p, TEMPLATES_LICENSE) for p in _license_paragraphs()]
    texts += [(d, TEMPLATES_DOC) for d in docstrings()]
    rng.shuffle(texts)
    held = [rng.choice(tpl).format(t=t) for t, tpl in texts[:held_out]]
    train = [f.format(t=t) for t, tpl in texts[held_out:] for f in rng.sample(tpl, min(per_text, len(tpl)))]
    if extra:
        known = {t for t, _ in texts}
        more = [d for d in extra_texts(held + list(exclude)) if d not in known]
        train += [f.format(t=t) for t in more for f in rng.sample(TEMPLATES_DOC, per_text)]
    rng.shuffle(train)
    return held, train


@torch.no_grad()
def generate_with_ember(tok, texts: list[str], max_new: int, temperature: float, seed: int, ember: Path,
                        gguf: str = GGUF, max_num_seqs: int = 64) -> list[tuple[list[int], list[int]]]:
    """Self-distillation by the engine that serves the target: `ember generate --jsonl` continues
    every chat-formatted prompt (continuous batching), greedy at temperature 0, else sampled with a
    per-prompt seed. Returns (prompt_ids, continuation_ids) in input order; a continuation that
    stopped at <|im_end|> keeps it."""
    import json
    import subprocess
    import tempfile

    eos = tok.convert_tokens_to_ids("<|im_end|>")
    prompts = [tok.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True,
                                       tokenize=True, return_dict=True)["input_ids"] for t in texts]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for i, ids in enumerate(prompts):
            line = {"prompt": list(ids), "max_tokens": max_new, "temperature": temperature}
            if temperature > 0:
                line["seed"] = seed + i
            f.write(json.dumps(line) + "\n")
        path = f.name
    try:
        run = subprocess.run([str(ember), "generate", "--model", str(MODELS / gguf), "--jsonl", path,
                              "--max-num-seqs", str(max_num_seqs)], capture_output=True, text=True, check=True)
    finally:
        os.unlink(path)
    out = []
    # One JSON object per '\n': str.splitlines() would also split inside a string at U+2028, U+0085
    # and the like, which JSON leaves unescaped (a sampled continuation produced one).
    lines = run.stdout.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for ids, line in zip(prompts, lines, strict=True):
        r = json.loads(line)
        cont = r["token_ids"]
        if r["finish_reason"] == "stop" and (not cont or cont[-1] != eos):
            cont = cont + [eos]  # the engine ends at the model's stop token; the drafter learns it
        out.append((list(ids), cont))
    return out


def generate(tok, model, texts: list[str], max_new: int, temperature: float, batch: int, seed: int):
    """Self-distillation: the target continues each chat-formatted prompt. Returns a list of
    (prompt_ids, continuation_ids) with the continuation cut after the first <|im_end|>."""
    tok.padding_side = "left"
    torch.manual_seed(seed)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    out = []
    texts = sorted(texts, key=len)  # batches of similar length pad less
    for i in range(0, len(texts), batch):
        msgs = [[{"role": "user", "content": t}] for t in texts[i : i + batch]]
        enc = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt",
                                      padding=True, return_dict=True)
        kw = dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0) if temperature > 0 \
            else dict(do_sample=False)
        g = model.generate(**enc, max_new_tokens=max_new, pad_token_id=eos, **kw)
        plen = enc["input_ids"].shape[1]
        for r in range(g.shape[0]):
            prompt = enc["input_ids"][r][enc["attention_mask"][r].bool()].tolist()
            cont = g[r, plen:].tolist()
            if eos in cont:
                cont = cont[: cont.index(eos) + 1]
            out.append((prompt, cont))
    return out
