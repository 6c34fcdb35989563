#!/usr/bin/env python3
"""Reference hidden states for the Muse Spark golden fixtures (tests/golden/muse_spark/*).

Loads a committed fixture directory with transformers in float32 (make_muse_golden.py checks
that this reload reproduces the golden logits bit for bit), runs its prompt once with
output_hidden_states=True and writes, beside the other files:
  hidden_states.f32   little-endian float32 [num_layers + 1, num_positions, hidden_size]
                      transformers' output_hidden_states: [0] the (normed) input embeddings,
                      [l + 1] the output of decoder layer l, the last one after the final norm
and records the file and its shape in golden.json ("hidden_states_file", "hidden_states_shape").

Usage: scripts/make_muse_hidden_states.py [tests/golden/muse_spark/tiny_a ...]
Needs torch and transformers (scripts/setup --dev).
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import MuseSparkForConditionalGeneration


def main(dirs: list[str]) -> None:
    root = Path(__file__).resolve().parent.parent / "tests/golden/muse_spark"
    paths = [Path(d) for d in dirs] or sorted(p for p in root.iterdir() if (p / "golden.json").exists())
    for path in paths:
        meta_path = path / "golden.json"
        meta = json.loads(meta_path.read_text())
        model = MuseSparkForConditionalGeneration.from_pretrained(
            path, dtype=torch.float32, attn_implementation="eager", experts_implementation="eager")
        model.eval()
        ids = torch.tensor([meta["prompt_ids"]])
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=False, output_hidden_states=True)
        # The reload must be the fixture's model: its logits are the committed ones, up to the
        # float32 summation order of this machine's torch kernels (the fixtures may have been made
        # on another CPU; 1e-4 of the largest logit here): half the 1e-3 the golden tests allow, at most.
        golden = np.fromfile(path / meta["logits_file"], dtype="<f4").reshape(out.logits.shape[1], -1)
        diff = float(np.abs(out.logits[0].numpy() - golden).max())
        if diff > 5e-4 * float(np.abs(golden).max()):
            sys.exit(f"{path}: the reloaded model's logits are {diff:.3g} from {meta['logits_file']}")
        print(f"{path.name}: logits reproduced within {diff:.3g} (max |logit| {float(np.abs(golden).max()):.3g})")
        states = torch.stack([h[0] for h in out.hidden_states]).to(torch.float32).numpy()
        np.asarray(states, dtype="<f4").tofile(path / "hidden_states.f32")
        meta["hidden_states_file"] = "hidden_states.f32"
        meta["hidden_states_shape"] = list(states.shape)
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
        print(f"{path.name}: hidden states {list(states.shape)}")


if __name__ == "__main__":
    main(sys.argv[1:])
