#!/usr/bin/env python3
"""Build the perplexity text ember is compared with llama.cpp on, deterministically, from files
every Debian/Ubuntu machine has: the licence texts in /usr/share/common-licenses (package
base-files). The licences themselves permit verbatim copying ("Everyone is permitted to copy and
distribute verbatim copies of this license document"), and they are used here unchanged.

The text is the regular files of that directory (symlinks such as GPL -> GPL-3 skipped, so no
licence appears twice) in sorted file-name order, each followed by one blank line. It is 237,348 bytes,
roughly 52k tokens for either model, and is not committed: this script rebuilds it.

  scripts/make_ppl_text.py [--out build/ppl/common-licenses.txt]

Prints the output path and its SHA-256; warns (does not fail) when the hash differs from the one
pinned below, which means the base-files package on this machine ships other licence versions,
so numbers measured here are not comparable with numbers measured on the pinned text.
"""
import argparse
import hashlib
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE_DIR = pathlib.Path("/usr/share/common-licenses")
DEFAULT_OUT = ROOT / "build/ppl/common-licenses.txt"
# The text built on the Ubuntu machine the issue 3 numbers were measured on.
PINNED_SHA256 = "815b38ec9c028069635c071fc130e4055e5095ba221d78715907a93bb2de8432"


def build_text(source_dir=SOURCE_DIR):
    files = sorted(p for p in source_dir.iterdir() if p.is_file() and not p.is_symlink())
    if not files:
        sys.exit(f"no licence files under {source_dir}: install the base-files package")
    return "".join(p.read_text(encoding="utf-8", errors="strict") + "\n\n" for p in files), [p.name for p in files]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    text, names = build_text()
    data = text.encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"{args.out} {len(data)} bytes from {', '.join(names)}", file=sys.stderr)
    if digest != PINNED_SHA256:
        print(f"warning: sha256 {digest} differs from the pinned {PINNED_SHA256}", file=sys.stderr)
    print(f"{args.out} {digest}")


if __name__ == "__main__":
    main()
