#!/usr/bin/env python3
"""Generate the golden fixture of Muse Spark's audio encoder from the transformers reference.

Builds a random `MuseSparkForConditionalGeneration` whose audio tower has the real structure
(patch sizes (16, 6, 5, 4) = 1920 samples per token, kernel 7, mlp_ratio 4, depths [2, 2, 2, 2])
at small widths, and a one-layer dense text model (hidden 64, vocab 64, weights drawn with
make_muse_golden.py's rules) whose logits for a prompt with <|audio|> placeholders check where the
features enter. Every weight comes from a fixed seed and is rounded to bfloat16-representable
values; the model runs in float32. Writes tests/golden/muse_spark_audio/:

  config.json, model.safetensors   save_pretrained of the bf16 model (model.audio_tower.* bf16)
  waveform.f32        little-endian f32 [num_samples]: the raw 24 kHz mono clip (not padded)
  stage{i}.f32        f32 [T_i, hidden_sizes[i]]: the output of audio layer i (patchify + conv blocks)
  encoder.f32         f32 [tokens, out_hidden_size]: audio_tower(...).last_hidden_state
  features.f32        f32 [tokens, out_hidden_size]: get_audio_features(...).pooler_output, the rows
                      that replace the <audio> placeholders' embeddings (the text embed_norm applied)
  logits.f32          f32 [prompt, vocab]: the whole model's logits for golden.json's prompt_ids, whose
                      audio_token_id positions take the features
  golden.json         sizes, file names, versions, and the measured float32-vs-float64 noise

The clip is prepared by transformers' own MuseSparkFeatureExtractor (right zero-padding to a
multiple of samples_per_token, plus the mask) exactly as the processor does.

The script checks itself and fails loudly if
  * the saved safetensors do not hold (bit for bit) the weights the goldens were computed with,
  * reloading the saved directory with from_pretrained(dtype=float32) changes the features,
  * an independent float64 re-implementation written from the README's formulas (not calling the
    transformers modules) disagrees with the reference beyond float32 noise.

Usage:  .venv/bin/python scripts/make_muse_audio_golden.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("MKL_NUM_THREADS", "2")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from transformers import (  # noqa: E402
    MuseSparkAudioConfig,
    MuseSparkConfig,
    MuseSparkFeatureExtractor,
    MuseSparkForConditionalGeneration,
    MuseSparkTextConfig,
    MuseSparkVisionConfig,
)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "tests" / "golden" / "muse_spark_audio"

SEED = 3003
SAMPLE_RATE = 24000
NUM_SAMPLES = 8400  # 350 ms: not a multiple of 1920, so the feature extractor pads (to 9600, 5 tokens)
PATCH_SIZES = [16, 6, 5, 4]
HIDDEN_SIZES = [8, 16, 24, 32]
DEPTHS = [2, 2, 2, 2]
MLP_RATIO = 4.0
KERNEL = 7
OUT_HIDDEN = 64  # = the text model's hidden size
PROMPT_BEFORE = [3, 17, 29]  # text ids around the clip's placeholders
PROMPT_AFTER = [42, 7, 11, 58]
AUDIO_EPS = 1e-6
TEXT_EPS = 1e-5


def fail(msg: str) -> None:
    print(f"make_muse_audio_golden: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def tiny_text_config(hidden: int = OUT_HIDDEN, eps: float = TEXT_EPS) -> MuseSparkTextConfig:
    """The one dense full-attention layer (vocab 64) whose logits check where encoder rows enter;
    shared with make_muse_vision_golden.py."""
    return MuseSparkTextConfig(
        vocab_size=64, hidden_size=hidden, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, head_dim=32, sliding_window=8,
        layer_types=["full_attention"], layer_rope_theta=[0.0],
        num_local_experts=2, num_experts_per_tok=1, moe_hidden_size=32, moe_intermediate_size=32,
        mlp_layer_types=["dense"], rms_norm_eps=eps, tie_word_embeddings=False,
    )


def build_config() -> MuseSparkConfig:
    text = tiny_text_config()
    vision = MuseSparkVisionConfig(
        hidden_size=8, intermediate_size=8, num_hidden_layers=1, num_attention_heads=1,
        patch_size=1, patch_temporal=1, pos_emb_height=1, pos_emb_width=1, merge_size=1,
    )
    audio = MuseSparkAudioConfig(
        patch_sizes=PATCH_SIZES, hidden_sizes=HIDDEN_SIZES, depths=DEPTHS,
        num_hidden_layers=len(PATCH_SIZES), mlp_ratio=MLP_RATIO, conv_kernel_size=KERNEL,
        hidden_act="gelu", rms_norm_eps=AUDIO_EPS, out_hidden_size=OUT_HIDDEN,
    )
    return MuseSparkConfig(text_config=text, vision_config=vision, audio_config=audio,
                           out_hidden_size=8, projector_hidden_size=8)


sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_muse_golden import text_weight_std  # noqa: E402  (the text fixtures' init rules)


def text_std(name: str, shape: tuple[int, ...]) -> tuple[float, float]:
    if name.startswith(("model.vision_tower.", "model.vision_adapter.", "model.vision_projection.")):
        return 0.0, 0.02  # never run here
    return text_weight_std(name, shape, SimpleNamespace(hidden_size=OUT_HIDDEN))


def audio_std(name: str, shape: tuple[int, ...]) -> tuple[float, float]:
    """(mean, std) for an audio-tower tensor: activations stay O(1) through every stage."""
    if name.endswith("norm.weight"):
        return 1.0, 0.1  # MuseSparkRMSNorm: absolute gain (initialised to ones)
    if name.endswith("conv.weight"):
        return 0.0, 1.0 / math.sqrt(shape[-1])  # depthwise [C, 1, K]
    if name.endswith(".bias"):
        return 0.0, 0.1
    if name.endswith(".weight") and len(shape) == 2:
        return 0.0, 1.0 / math.sqrt(shape[1])  # nn.Linear [out, in]
    raise ValueError(f"no init rule for audio tensor {name} {shape}")


@torch.no_grad()
def random_bf16_model(config: MuseSparkConfig, seed: int, init) -> MuseSparkForConditionalGeneration:
    """A float32 model whose every tensor is drawn N(mean, std^2) with (mean, std) = init(name, shape),
    from one seeded generator in name order, and rounded to bf16-representable values; shared with
    make_muse_vision_golden.py."""
    torch.manual_seed(seed)
    model = MuseSparkForConditionalGeneration(config).to(torch.float32).eval()
    gen = torch.Generator().manual_seed(seed)
    for name, t in sorted(model.state_dict(keep_vars=True).items()):
        if not t.is_floating_point():
            continue
        mean, std = init(name, tuple(t.shape))
        vals = torch.randn(t.shape, generator=gen, dtype=torch.float32) * std + mean
        t.data.copy_(vals.to(torch.bfloat16).to(torch.float32))
    return model


def make_model() -> MuseSparkForConditionalGeneration:
    return random_bf16_model(build_config(), SEED, lambda name, shape: audio_std(name, shape)
                             if name.startswith("model.audio_tower.") else text_std(name, shape))


def make_waveform() -> np.ndarray:
    """A deterministic 24 kHz clip: two tones, a chirp, a click train and a little seeded noise."""
    t = np.arange(NUM_SAMPLES, dtype=np.float64) / SAMPLE_RATE
    x = 0.30 * np.sin(2 * np.pi * 220.0 * t) + 0.15 * np.sin(2 * np.pi * 1375.0 * t + 0.3)
    x += 0.20 * np.sin(2 * np.pi * (300.0 * t + 4000.0 * t * t))  # chirp 300 Hz -> ~3 kHz
    x[::600] += 0.5  # clicks every 25 ms
    x += 0.02 * np.random.default_rng(SEED).standard_normal(NUM_SAMPLES)
    return x.astype(np.float32)


# --------------------------------------------------------------------------------------------------
# An independent float64 implementation, from the formulas in src/model/audio/README.md.
# --------------------------------------------------------------------------------------------------


def f64_forward(sd: dict[str, torch.Tensor], wave: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    def w(name):
        return sd[name].to(torch.float64).numpy()

    def rms(x, gain, eps):
        y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
        return y if gain is None else y * gain

    def gelu(x):
        return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))

    h = wave.astype(np.float64)[:, None]  # [T, 1]
    stages = []
    for i, p in enumerate(PATCH_SIZES):
        pre = f"model.audio_tower.layers.{i}."
        t, c = h.shape
        h = h.reshape(t // p, p * c)  # row s holds samples s*p .. s*p+p-1, each with its c channels
        h = rms(h @ w(pre + "patch_embedder.proj.weight").T + w(pre + "patch_embedder.proj.bias"),
                w(pre + "patch_embedder.norm.weight"), AUDIO_EPS)
        for j in range(DEPTHS[i]):
            b = pre + f"conv_blocks.{j}."
            k = w(b + "conv.weight")[:, 0, :]  # [C, K]
            padded = np.concatenate([np.zeros((KERNEL - 1, h.shape[1])), h], axis=0)
            conv = np.stack([(padded[s:s + KERNEL] * k.T).sum(0) for s in range(h.shape[0])]) + w(b + "conv.bias")
            m = rms(conv, w(b + "norm.weight"), AUDIO_EPS)
            m = gelu(m @ w(b + "mlp.fc1.weight").T + w(b + "mlp.fc1.bias"))
            h = h + m @ w(b + "mlp.fc2.weight").T + w(b + "mlp.fc2.bias")
        stages.append(h)
    a = "model.audio_tower."
    h = rms(h, w(a + "norm.weight"), AUDIO_EPS)
    enc = rms(h @ w(a + "proj.weight").T + w(a + "proj.bias"), w(a + "post_proj_norm.weight"), AUDIO_EPS)
    return stages, enc, rms(enc, None, TEXT_EPS)


def max_rel(a: np.ndarray, b: np.ndarray) -> float:
    """Worst |a - b| over a row, relative to that row's largest |b|, over all rows."""
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    return float((np.abs(a - b).max(-1) / np.abs(b).max(-1)).max())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)

    model = make_model()
    wave = make_waveform()
    spt = math.prod(PATCH_SIZES)
    fe = MuseSparkFeatureExtractor(samples_per_token=spt)
    inputs = fe(wave, sampling_rate=SAMPLE_RATE, return_tensors="pt")
    values, mask = inputs["input_values"].to(torch.float32), inputs["input_values_mask"]
    if values.shape[1] % spt or values.shape[1] < NUM_SAMPLES:
        fail(f"feature extractor gave {tuple(values.shape)}")
    if not torch.equal(values[0, :NUM_SAMPLES], torch.from_numpy(wave)) or values[0, NUM_SAMPLES:].abs().max() != 0:
        fail("feature extractor changed the samples (expected right zero-padding only)")

    # Each MuseSparkAudioLayer's output, from forward hooks (output_hidden_states gives the layers'
    # inputs and the final output instead).
    stages: list[torch.Tensor] = []
    hooks = [layer.register_forward_hook(lambda m, i, o: stages.append(o[0].detach().clone()))
             for layer in model.model.audio_tower.layers]
    with torch.no_grad():
        tower = model.model.audio_tower(input_values=values)
    for h in hooks:
        h.remove()
    with torch.no_grad():
        out = model.model.get_audio_features(values, mask)
    if len(stages) != len(PATCH_SIZES):
        fail(f"expected {len(PATCH_SIZES)} stage outputs, got {len(stages)}")
    encoder = tower.last_hidden_state[0].clone()
    features = out.pooler_output.clone()
    tokens = math.ceil(NUM_SAMPLES / spt)
    if encoder.shape != (values.shape[1] // spt, OUT_HIDDEN) or features.shape != (tokens, OUT_HIDDEN):
        fail(f"unexpected shapes {tuple(encoder.shape)} {tuple(features.shape)}")

    # The whole model on a prompt whose <|audio|> placeholders take the features.
    audio_id = model.config.audio_token_id
    prompt = PROMPT_BEFORE + [audio_id] * tokens + PROMPT_AFTER
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt]), input_values=values, input_values_mask=mask,
                       use_cache=False).logits[0].clone()
        no_audio = model(input_ids=torch.tensor([prompt]), use_cache=False).logits[0]
    effect = float((logits - no_audio).abs().max() / logits.abs().max())
    print(f"logits {tuple(logits.shape)}; the audio moves them by {effect:.3g} of the largest")
    if effect < 0.05:
        fail("the audio features barely change the logits: the fixture would not catch a wrong feature")

    # Float32 noise floor: the same module in float64, and the independent float64 version.
    sd32 = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model64 = make_model().to(torch.float64)
    with torch.no_grad():
        enc64 = model64.model.audio_tower(input_values=values.to(torch.float64)).last_hidden_state[0]
    noise_torch64 = max_rel(encoder.numpy(), enc64.numpy())
    st_ind, enc_ind, feat_ind = f64_forward(sd32, values[0].numpy())
    noise_independent = max_rel(encoder.numpy(), enc_ind)
    noise_features = max_rel(features.numpy(), feat_ind[:tokens])
    for i, (s, si) in enumerate(zip(stages, st_ind)):
        e = max_rel(s.numpy(), si)
        print(f"stage {i}: {tuple(s.shape)} f32 vs independent f64: {e:.3g}")
        if e > 1e-4:
            fail(f"stage {i} differs from the independent float64 implementation by {e:.3g}")
    print(f"encoder: f32 vs torch f64 {noise_torch64:.3g}, vs independent f64 {noise_independent:.3g}; "
          f"features vs independent f64 {noise_features:.3g}")
    if max(noise_torch64, noise_independent, noise_features) > 1e-4:
        fail("the float64 implementations disagree with the reference beyond float32 noise")

    # Save; check the saved bf16 tensors are exactly the weights used, and reloading reproduces.
    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model.to(torch.bfloat16).save_pretrained(tmp)
        model.to(torch.float32)
        cfg = json.loads((Path(tmp) / "config.json").read_text())
        with safe_open(str(Path(tmp) / "model.safetensors"), "pt") as f:
            names = list(f.keys())
            audio_names = [n for n in names if n.startswith("model.audio_tower.")]
            for n in audio_names:
                if not torch.equal(f.get_tensor(n).to(torch.float32), sd32[n]):
                    fail(f"saved {n} differs from the weights the goldens came from")
        reloaded = MuseSparkForConditionalGeneration.from_pretrained(tmp, dtype=torch.float32).eval()
        with torch.no_grad():
            again = reloaded.model.get_audio_features(values, mask).pooler_output
            again_logits = reloaded(input_ids=torch.tensor([prompt]), input_values=values, input_values_mask=mask,
                                    use_cache=False).logits[0]
        if not torch.equal(again, features) or not torch.equal(again_logits, logits):
            fail("reloading the saved directory changed the features or the logits")
        (out_dir / "config.json").write_text((Path(tmp) / "config.json").read_text())
        (out_dir / "model.safetensors").write_bytes((Path(tmp) / "model.safetensors").read_bytes())

    wave.astype("<f4").tofile(out_dir / "waveform.f32")
    for i, s in enumerate(stages):
        s.numpy().astype("<f4").tofile(out_dir / f"stage{i}.f32")
    encoder.numpy().astype("<f4").tofile(out_dir / "encoder.f32")
    features.numpy().astype("<f4").tofile(out_dir / "features.f32")
    logits.numpy().astype("<f4").tofile(out_dir / "logits.f32")
    golden = {
        "num_samples": NUM_SAMPLES,
        "sample_rate": SAMPLE_RATE,
        "padded_samples": int(values.shape[1]),
        "samples_per_token": spt,
        "encoder_tokens": int(encoder.shape[0]),
        "feature_tokens": int(features.shape[0]),
        "out_hidden_size": OUT_HIDDEN,
        "stage_shapes": [list(s.shape) for s in stages],
        "text_rms_norm_eps": cfg["text_config"]["rms_norm_eps"],
        "prompt_ids": prompt,
        "audio_token_id": audio_id,
        "vocab_size": int(logits.shape[1]),
        "logits_file": "logits.f32",
        "audio_effect_on_logits": effect,
        "audio_tensors": len(audio_names),
        "f32_vs_torch_f64": noise_torch64,
        "f32_vs_independent_f64": noise_independent,
        "features_f32_vs_independent_f64": noise_features,
        "seed": SEED,
        "reference": f"transformers {transformers.__version__} MuseSparkForConditionalGeneration "
                     "(model.audio_tower, model.get_audio_features), float32, CPU",
        "torch_version": torch.__version__,
    }
    (out_dir / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    total = sum(p.stat().st_size for p in out_dir.iterdir())
    print(f"wrote {out_dir} ({total} bytes, {len(audio_names)} audio tensors of {len(names)})")


if __name__ == "__main__":
    main()
