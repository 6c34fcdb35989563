#!/usr/bin/env python3
"""Generate the golden fixture of Muse Spark's vision tower from the transformers reference.

Builds a random `MuseSparkForConditionalGeneration` whose vision tower has the released structure
(patch linear + half-pixel bilinear position table, axial 2-D RoPE, window / full attention
layers, LayerNorm + GELU MLP blocks, 2x2 pixel shuffle, the GELU adapter, the projection and the
weightless perception norm) at small widths, and a one-layer dense text model (hidden 64, vocab 64,
weights drawn with make_muse_golden.py's rules) whose logits for a prompt with image and video
placeholders check where the features enter. Every weight comes from a fixed seed and is rounded to
bfloat16-representable values; the model runs in float32. Writes tests/golden/muse_spark_vision/:

  config.json, model.safetensors   save_pretrained of the bf16 model
  image{0,1}.u8        the source images, raw RGB uint8 [H, W, 3] (before the processor)
  video.u8             the source video, raw RGB uint8 [frames, H, W, 3]
  pixel_values.f32     f32 [112, 384]: MuseGlimmerImageProcessor(images) pixel_values (both images packed)
  pixel_values_videos.f32  f32 [72, 384]: MuseGlimmerVideoProcessor(video) pixel_values_videos
  {image,video}_patch_embed.f32   f32 [patches, hidden]: vision_tower.patch_embedder output
  {image,video}_tower.f32         f32 [tokens, hidden * merge^2]: vision_tower(...).last_hidden_state
  {image,video}_features.f32      f32 [tokens, text hidden]: get_image_features / get_video_features
                                  pooler_output, concatenated (the rows that replace the placeholders)
  logits.f32           f32 [prompt, vocab]: the whole model's logits for golden.json's prompt_ids with
                       image_token_id / video_token_id placeholders
  golden.json          grids, sizes, file names, versions, and the measured float32-vs-float64 noise

The script checks itself and fails loudly if
  * the saved safetensors do not hold (bit for bit) the weights the goldens were computed with,
  * reloading the saved directory with from_pretrained(dtype=float32) changes the features or logits,
  * an independent float64 re-implementation written from src/model/vision/README.md's formulas
    (numpy, not calling the transformers modules or vision_utils) disagrees beyond float32 noise,
  * the images or the video barely move the logits.

Usage:  .venv/bin/python scripts/make_muse_vision_golden.py [--out DIR]
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
from PIL import Image  # noqa: E402
from safetensors import safe_open  # noqa: E402
from transformers import (  # noqa: E402
    MuseSparkAudioConfig,
    MuseSparkConfig,
    MuseSparkForConditionalGeneration,
    MuseSparkVisionConfig,
)
from transformers.models.muse_glimmer import MuseGlimmerImageProcessor, MuseGlimmerVideoProcessor  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_muse_audio_golden import max_rel, random_bf16_model, tiny_text_config  # noqa: E402  (the audio fixture's text model)
from make_muse_golden import text_weight_std  # noqa: E402  (the text fixtures' init rules)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "tests" / "golden" / "muse_spark_vision"

SEED = 4004
PATCH = 8            # released: 14; smaller keeps pixel_values small (2 * 3 * 8 * 8 = 384 per patch)
TEMPORAL = 2
MERGE = 2
POS_SIDE = 4         # pos_emb_height = pos_emb_width: the table is 4x4 and a window is 4x4 patches
HIDDEN = 64
HEADS = 4            # head_dim 16: 4 RoPE frequencies per axis
INTERMEDIATE = 96
LAYER_TYPES = ["window_attention", "window_attention", "full_attention", "window_attention"]
LN_EPS = 1e-6        # ln_pre / ln_post (config.layer_norm_eps); the blocks' norms are fixed at 1e-5
ROPE_THETA = 10000.0
PROJECTOR = 48       # projector_hidden_size
TEXT_HIDDEN = 64
TEXT_EPS = 1e-5
OUT_HIDDEN = HIDDEN * MERGE * MERGE  # out_hidden_size: the pixel-shuffled width the adapter takes

# Source media (H, W): the processor resizes them (LANCZOS, aspect kept) to whole merge blocks.
IMAGE_SIZES = [(66, 83), (70, 33)]   # -> grids [1, 8, 10] (over a window both ways; 80 > 64 queries of a block) and [1, 8, 4]
VIDEO_FRAMES, VIDEO_SIZE = 5, (30, 50)  # -> [3, 4, 6]: 5 frames padded to 6 (last repeated), 3 groups


def fail(msg: str) -> None:
    print(f"make_muse_vision_golden: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def build_config() -> MuseSparkConfig:
    text = tiny_text_config(TEXT_HIDDEN, TEXT_EPS)
    vision = MuseSparkVisionConfig(
        patch_size=PATCH, pos_emb_height=POS_SIDE, pos_emb_width=POS_SIDE, num_attention_heads=HEADS,
        num_hidden_layers=len(LAYER_TYPES), hidden_size=HIDDEN, intermediate_size=INTERMEDIATE, hidden_act="gelu",
        rope_parameters={"rope_type": "axial", "rope_theta": ROPE_THETA}, patch_temporal=TEMPORAL,
        merge_size=MERGE, max_position_embeddings=POS_SIDE * POS_SIDE, layer_norm_eps=LN_EPS,
        layer_types=LAYER_TYPES,
    )
    audio = MuseSparkAudioConfig(patch_sizes=[2], hidden_sizes=[8], depths=[1], num_hidden_layers=1,
                                 out_hidden_size=TEXT_HIDDEN)
    return MuseSparkConfig(text_config=text, vision_config=vision, audio_config=audio,
                           out_hidden_size=OUT_HIDDEN, projector_hidden_size=PROJECTOR,
                           projector_hidden_act="gelu")


VISION_PREFIXES = ("model.vision_tower.", "model.vision_adapter.", "model.vision_projection.")


def vision_std(name: str, shape: tuple[int, ...]) -> tuple[float, float]:
    """(mean, std) for a vision tensor: activations stay O(1) through every block."""
    if name.endswith("position_embedding_table.weight"):
        return 0.0, 0.5
    if "norm" in name.split(".")[-2] or name.split(".")[-2].startswith("ln_"):
        return (1.0, 0.1) if name.endswith(".weight") else (0.0, 0.1)  # LayerNorm gain, bias
    if name.endswith(".bias"):
        return 0.0, 0.1
    if name.endswith(".weight") and len(shape) == 2:
        return 0.0, 1.0 / math.sqrt(shape[1])  # nn.Linear [out, in]
    raise ValueError(f"no init rule for vision tensor {name} {shape}")


def other_std(name: str, shape: tuple[int, ...]) -> tuple[float, float]:
    if name.startswith("model.audio_tower."):
        return 0.0, 0.02  # never run here
    return text_weight_std(name, shape, SimpleNamespace(hidden_size=TEXT_HIDDEN))


def make_model() -> MuseSparkForConditionalGeneration:
    return random_bf16_model(build_config(), SEED, lambda name, shape: vision_std(name, shape)
                             if name.startswith(VISION_PREFIXES) else other_std(name, shape))


def draw(h: int, w: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """A deterministic RGB picture: gradients, a disc, stripes and a little noise."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 255 * (x / max(w - 1, 1))
    g = 255 * (y / max(h - 1, 1))
    b = 128 + 100 * np.sin((x + 2 * y + 7 * k) / 4.0)
    disc = (x - w * (0.3 + 0.1 * k)) ** 2 + (y - h * 0.6) ** 2 < (min(h, w) / 3) ** 2
    r[disc], g[disc], b[disc] = 240 - 30 * k, 40, 200
    img = np.stack([r, g, b], axis=-1) + rng.normal(0, 6, (h, w, 3))
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


# --------------------------------------------------------------------------------------------------
# An independent float64 implementation, from the formulas in src/model/vision/README.md.
# --------------------------------------------------------------------------------------------------


def f64_forward(sd: dict[str, torch.Tensor], pixels: np.ndarray, grids: list[list[int]]):
    def w(name):
        return sd[name].to(torch.float64).numpy()

    def layer_norm(x, pre, eps):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w(pre + ".weight") + w(pre + ".bias")

    erf = np.vectorize(math.erf)

    def gelu(x):
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))

    def lin(x, pre, bias=True):
        y = x @ w(pre + ".weight").T
        return y + w(pre + ".bias") if bias else y

    v = "model.vision_tower."
    side, d, hd = POS_SIDE, HIDDEN, HIDDEN // HEADS
    table = w(v + "patch_embedder.position_embedding_table.weight")

    def taps(i, size):  # half-pixel bilinear taps into `side` cells, zero weight outside
        src = (i + 0.5) * side / size - 0.5
        f = math.floor(src)
        return [(min(max(f + o, 0), side - 1), (1 - abs(src - f - o)) * (0 <= f + o <= side - 1)) for o in (0, 1)]

    # Per patch, in the processor's order (item, frame, row r, column c): its position-table row and
    # its RoPE position (w + 1, h + 1). The table lookup reproduces the reference's grid (t, w, h)
    # swap: patch p = r * W + c of a frame is read as row p // H of W, column p % H of H.
    pos, rope_pos, frames, windows = [], [], [], []
    base = 0
    for t, hh, ww in grids:
        for f in range(t):
            for p in range(hh * ww):
                acc = np.zeros(d)
                for ia, wa in taps(p // hh, ww):
                    for ib, wb in taps(p % hh, hh):
                        acc += wa * wb * table[ia * side + ib]
                pos.append(acc)
                rope_pos.append((p % ww + 1, p // ww + 1))
            first = base + f * hh * ww
            frames.append(list(range(first, first + hh * ww)))
            for wr in range(0, hh, side):  # windows of side x side patches, row-major, per frame
                for wc in range(0, ww, side):
                    windows.append([first + r * ww + c for r in range(wr, min(wr + side, hh))
                                    for c in range(wc, min(wc + side, ww))])
        base += t * hh * ww
    x = pixels.astype(np.float64) @ w(v + "patch_embedder.patch_embedding.weight").T + np.array(pos)
    patch_embed = x.copy()
    x = layer_norm(x, v + "ln_pre", LN_EPS)

    inv = 1.0 / ROPE_THETA ** (np.arange(0, hd // 2, 2) / (hd // 2))
    pw, ph = np.array(rope_pos, dtype=np.float64).T
    ang = np.concatenate([pw[:, None] * inv, ph[:, None] * inv], axis=1)  # [N, hd/2]: [w freqs, h freqs]
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(q):  # q [N, heads, hd], rotate-half pairs (i, i + hd/2)
        a, b = q[..., : hd // 2], q[..., hd // 2:]
        c, s = cos[:, None, :], sin[:, None, :]
        return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)

    for i, kind in enumerate(LAYER_TYPES):
        pre = f"{v}layers.{i}."
        hn = layer_norm(x, pre + "norm1", 1e-5)
        q = rope(lin(hn, pre + "attn.q_proj").reshape(-1, HEADS, hd))
        k = rope(lin(hn, pre + "attn.k_proj").reshape(-1, HEADS, hd))
        val = lin(hn, pre + "attn.v_proj").reshape(-1, HEADS, hd)
        out = np.zeros_like(val)
        for seg in (windows if kind == "window_attention" else frames):
            s = np.einsum("qhd,khd->hqk", q[seg], k[seg]) / math.sqrt(hd)
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            out[seg] = np.einsum("hqk,khd->qhd", p, val[seg])
        x = x + lin(out.reshape(-1, d), pre + "attn.proj")
        x = x + lin(gelu(lin(layer_norm(x, pre + "norm2", 1e-5), pre + "mlp.fc1")), pre + "mlp.fc2")
    x = layer_norm(x, v + "ln_post", LN_EPS)

    # Pixel shuffle: per frame, merge blocks row-major; a block's m*m patches (row-major) go
    # channel-major into one row: out[d * m*m + s].
    rows = []
    base = 0
    for t, hh, ww in grids:
        for f in range(t):
            for br in range(0, hh, MERGE):
                for bc in range(0, ww, MERGE):
                    block = [base + f * hh * ww + (br + i) * ww + bc + j for i in range(MERGE) for j in range(MERGE)]
                    rows.append(x[block].T.reshape(-1))
        base += t * hh * ww
    tower = np.array(rows)
    a = gelu(gelu(tower @ w("model.vision_adapter.fc1.weight").T) @ w("model.vision_adapter.fc2.weight").T)
    proj = a @ w("model.vision_projection.weight").T
    features = proj / np.sqrt((proj * proj).mean(-1, keepdims=True) + TEXT_EPS)
    return patch_embed, tower, features


@torch.no_grad()
def run_tower(model, pixels: torch.Tensor, grid: torch.Tensor):
    """(patch-embedder output, last_hidden_state, features) of one packed call."""
    tower = model.model.vision_tower
    embed = tower.patch_embedder(pixels, grid).clone()
    last = tower(pixel_values=pixels, grid_thw=grid).last_hidden_state.clone()
    feats = torch.cat(model.model.get_image_features(pixels, grid).pooler_output, dim=0).clone()
    return embed, last, feats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)

    model = make_model()
    rng = np.random.default_rng(SEED)
    images = [draw(h, w, k, rng) for k, (h, w) in enumerate(IMAGE_SIZES)]
    video = np.stack([draw(*VIDEO_SIZE, 2 + f, rng) for f in range(VIDEO_FRAMES)])

    proc_kwargs = dict(patch_size=PATCH, temporal_patch_size=TEMPORAL, merge_size=MERGE)
    image_in = MuseGlimmerImageProcessor(**proc_kwargs)([Image.fromarray(i) for i in images], return_tensors="pt")
    video_in = MuseGlimmerVideoProcessor(**proc_kwargs)(videos=[video], do_sample_frames=False, return_tensors="pt")
    pixels, image_grid = image_in["pixel_values"].to(torch.float32), image_in["image_grid_thw"]
    pixels_v, video_grid = video_in["pixel_values_videos"].to(torch.float32), video_in["video_grid_thw"]
    print(f"images {[i.shape for i in images]} -> pixel_values {tuple(pixels.shape)} grids {image_grid.tolist()}")
    print(f"video {video.shape} -> pixel_values_videos {tuple(pixels_v.shape)} grid {video_grid.tolist()}")
    if image_grid.tolist() != [[1, 8, 10], [1, 8, 4]] or video_grid.tolist() != [[3, 4, 6]]:
        fail("the processor gave other grids than the fixture is designed around")

    img_embed, img_tower, img_feats = run_tower(model, pixels, image_grid)
    with torch.no_grad():
        vid_feats = torch.cat(model.model.get_video_features(pixels_v, video_grid).pooler_output, dim=0).clone()
    vid_embed, vid_tower, vid_feats_img_path = run_tower(model, pixels_v, video_grid)
    if not torch.equal(vid_feats, vid_feats_img_path):
        fail("get_video_features differs from get_image_features on the same input")

    # The whole model on a prompt with both images' and the video's placeholders.
    cfg = model.config
    n_img = [int(g.prod()) // MERGE**2 for g in image_grid]
    n_vid = int(video_grid[0].prod()) // MERGE**2
    img_id, vid_id = cfg.image_token_id, cfg.video_token_id
    prompt = [3, 17] + [img_id] * n_img[0] + [29] + [img_id] * n_img[1] + [42] + [vid_id] * n_vid + [7, 11]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt]), pixel_values=pixels, image_grid_thw=image_grid,
                       pixel_values_videos=pixels_v, video_grid_thw=video_grid, use_cache=False).logits[0].clone()
        no_media = model(input_ids=torch.tensor([prompt]), use_cache=False).logits[0]
    effect = float((logits - no_media).abs().max() / logits.abs().max())
    print(f"logits {tuple(logits.shape)}; the media move them by {effect:.3g} of the largest")
    if effect < 0.05:
        fail("the media features barely change the logits: the fixture would not catch a wrong feature")

    # Float32 noise floor: the same modules in float64, and the independent float64 version.
    sd32 = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model64 = make_model().to(torch.float64)
    noise = {}
    for kind, px, grid, ref in (("image", pixels, image_grid, (img_embed, img_tower, img_feats)),
                                ("video", pixels_v, video_grid, (vid_embed, vid_tower, vid_feats))):
        e64, t64, f64 = run_tower(model64, px.to(torch.float64), grid)
        ie, it, ifeat = f64_forward(sd32, px.numpy(), grid.tolist())
        for stage, r32, r64, ind in (("patch_embed", ref[0], e64, ie), ("tower", ref[1], t64, it),
                                     ("features", ref[2], f64, ifeat)):
            a, b = max_rel(r32.numpy(), r64.numpy()), max_rel(r32.numpy(), ind)
            noise[f"{kind}_{stage}"] = {"f32_vs_torch_f64": a, "f32_vs_independent_f64": b}
            print(f"{kind} {stage} {tuple(r32.shape)}: f32 vs torch f64 {a:.3g}, vs independent f64 {b:.3g}")
            if max(a, b) > 1e-4:
                fail(f"{kind} {stage}: the float64 implementations disagree with the reference beyond f32 noise")

    # Each item alone gives the rows it gets packed (up to f32 noise of the batched matmuls).
    alone = []
    starts = [0, int(image_grid[0].prod())]
    for i, g in enumerate(image_grid):
        _, _, f_alone = run_tower(model, pixels[starts[i]:starts[i] + int(g.prod())], g[None])
        alone.append(f_alone)
    packed_vs_alone = max_rel(torch.cat(alone).numpy(), img_feats.numpy())
    print(f"images packed vs alone: {packed_vs_alone:.3g}")
    if packed_vs_alone > 1e-5:
        fail("packing the images changes their features")

    # Save; check the saved bf16 tensors are exactly the weights used, and reloading reproduces.
    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model.to(torch.bfloat16).save_pretrained(tmp)
        model.to(torch.float32)
        with safe_open(str(Path(tmp) / "model.safetensors"), "pt") as f:
            names = list(f.keys())
            vision_names = [n for n in names if n.startswith(VISION_PREFIXES)]
            for n in vision_names:
                if not torch.equal(f.get_tensor(n).to(torch.float32), sd32[n]):
                    fail(f"saved {n} differs from the weights the goldens came from")
        reloaded = MuseSparkForConditionalGeneration.from_pretrained(tmp, dtype=torch.float32).eval()
        with torch.no_grad():
            again = torch.cat(reloaded.model.get_image_features(pixels, image_grid).pooler_output)
            again_logits = reloaded(input_ids=torch.tensor([prompt]), pixel_values=pixels, image_grid_thw=image_grid,
                                    pixel_values_videos=pixels_v, video_grid_thw=video_grid,
                                    use_cache=False).logits[0]
        if not torch.equal(again, img_feats) or not torch.equal(again_logits, logits):
            fail("reloading the saved directory changed the features or the logits")
        (out_dir / "config.json").write_text((Path(tmp) / "config.json").read_text())
        (out_dir / "model.safetensors").write_bytes((Path(tmp) / "model.safetensors").read_bytes())

    for i, img in enumerate(images):
        img.tofile(out_dir / f"image{i}.u8")
    video.tofile(out_dir / "video.u8")
    arrays = {
        "pixel_values": pixels, "pixel_values_videos": pixels_v,
        "image_patch_embed": img_embed, "image_tower": img_tower, "image_features": img_feats,
        "video_patch_embed": vid_embed, "video_tower": vid_tower, "video_features": vid_feats,
        "logits": logits,
    }
    for name, t in arrays.items():
        t.numpy().astype("<f4").tofile(out_dir / f"{name}.f32")
    golden = {
        "image_sizes_hw": [list(s) for s in IMAGE_SIZES],
        "video_frames": VIDEO_FRAMES,
        "video_size_hw": list(VIDEO_SIZE),
        "processor_kwargs": proc_kwargs,
        "image_grid_thw": image_grid.tolist(),
        "video_grid_thw": video_grid.tolist(),
        "patch_dim": int(pixels.shape[1]),
        "image_tokens": n_img,
        "video_tokens": [n_vid],
        "hidden_size": HIDDEN,
        "out_hidden_size": OUT_HIDDEN,
        "text_hidden_size": TEXT_HIDDEN,
        "shapes": {name: list(t.shape) for name, t in arrays.items()},
        "prompt_ids": prompt,
        "image_token_id": img_id,
        "video_token_id": vid_id,
        "vocab_size": int(logits.shape[1]),
        "media_effect_on_logits": effect,
        "vision_tensors": len(vision_names),
        "noise": noise,
        "images_packed_vs_alone": packed_vs_alone,
        "seed": SEED,
        "reference": f"transformers {transformers.__version__} MuseSparkForConditionalGeneration "
                     "(model.vision_tower, get_image_features, get_video_features), float32, CPU; "
                     "inputs from MuseGlimmerImageProcessor / MuseGlimmerVideoProcessor",
        "torch_version": torch.__version__,
    }
    (out_dir / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    total = sum(p.stat().st_size for p in out_dir.iterdir())
    print(f"wrote {out_dir} ({total} bytes, {len(vision_names)} vision tensors of {len(names)})")


if __name__ == "__main__":
    main()
