#!/usr/bin/env python3
"""Generate the servable tiny multimodal Muse Spark used by tests/e2e/test_multimodal.py.

A random MuseSparkForConditionalGeneration with all three parts at small widths (the vision tower
of make_muse_vision_golden.py's structure, the audio tower of make_muse_audio_golden.py's, a
two-layer text model with a 512-token vocabulary), a byte-level tokenizer whose special tokens
are Muse Spark's multimodal ones, and a chat template that writes <|patch|>, <|video|> and
<|audio|> for media parts. transformers is the reference: its MuseSparkProcessor (Muse Glimmer
image and video processors, MuseSparkFeatureExtractor) expands the prompts and
model.generate(do_sample=False) continues them, for chat requests whose media are files of
tests/unit/media/testdata (decoded as transformers decodes them: PIL for images, the frames
libavcodec gives for video, libavcodec + libswresample for audio).

Writes tests/golden/muse_spark_mm/: config.json, model.safetensors, tokenizer.json,
tokenizer_config.json, chat_template.jinja, generation_config.json, and cases.json (per case:
the messages with media named by file, the reference prompt ids and greedy output ids, and the
smallest top-1 / top-2 logit gap along the continuation, so a tolerance claim can cite it).

Usage:  .venv/bin/python scripts/make_muse_mm_e2e.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import sys
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("OMP_NUM_THREADS", "2")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image, ImageOps  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import (  # noqa: E402
    MuseSparkAudioConfig,
    MuseSparkConfig,
    MuseSparkTextConfig,
    MuseSparkVisionConfig,
    PreTrainedTokenizerFast,
)
from transformers.models.muse_glimmer import MuseGlimmerImageProcessor, MuseGlimmerVideoProcessor  # noqa: E402
from transformers.models.muse_spark import MuseSparkFeatureExtractor, MuseSparkProcessor  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_muse_audio_golden import random_bf16_model  # noqa: E402
from make_muse_golden import text_weight_std  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MEDIA = REPO / "tests" / "unit" / "media" / "testdata"
DEFAULT_OUT = REPO / "tests" / "golden" / "muse_spark_mm"
sys.path.insert(0, str(REPO / "tests" / "e2e"))
from serving import byte_level_tokenizer  # noqa: E402

SEED = 5005
VOCAB = 512
HIDDEN = 64
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot|>", "<|start|>", "<|message|>", "<|patch|>",
            "<|image_start|>", "<|image_end|>", "<|video|>", "<|vid_frame_separator|>", "<|vid_start|>",
            "<|vid_end|>", "<|audio|>", "<|soft_audio_start|>", "<|soft_audio_end|>", "<|pad|>"]
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start|>{{ m.role }}<|message|>"
    "{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}"
    "{% if p.type == 'text' %}{{ p.text }}{% elif p.type == 'image' %}<|patch|>"
    "{% elif p.type == 'video' %}<|video|>{% elif p.type == 'audio' %}<|audio|>{% endif %}"
    "{% endfor %}{% endif %}<|eot|>{% endfor %}{% if add_generation_prompt %}<|start|>assistant<|message|>{% endif %}")
MAX_NEW_TOKENS = 8

# Chat requests: (name, [message content parts]); media parts name files of MEDIA.
CASES = [
    ("image", [{"type": "text", "text": "what is this? "}, {"type": "image", "file": "rgb_odd.png"}]),
    ("other_image", [{"type": "text", "text": "what is this? "}, {"type": "image", "file": "tall.jpg"}]),
    ("two_images", [{"type": "image", "file": "alpha.png"}, {"type": "text", "text": " and "},
                    {"type": "image", "file": "wide.png"}]),
    ("audio", [{"type": "text", "text": "listen: "}, {"type": "audio", "file": "tone_24k_mono.wav"}]),
    ("video", [{"type": "text", "text": "watch: "}, {"type": "video", "file": "shapes.mp4"}]),
]


def build_config(ids: dict[str, int]) -> MuseSparkConfig:
    text = MuseSparkTextConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=16,
        layer_types=["sliding_attention", "full_attention"], layer_rope_theta=[10000.0, 0.0],
        num_local_experts=2, num_experts_per_tok=1, moe_hidden_size=32, moe_intermediate_size=32,
        mlp_layer_types=["dense", "dense"], rms_norm_eps=1e-5, tie_word_embeddings=False,
        bos_token_id=ids["<|begin_of_text|>"], eos_token_id=ids["<|eot|>"], pad_token_id=ids["<|pad|>"],
    )
    vision = MuseSparkVisionConfig(
        hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2, patch_size=8,
        patch_temporal=2, pos_emb_height=4, pos_emb_width=4, merge_size=2,
        layer_types=["window_attention", "full_attention"], layer_norm_eps=1e-6,
        rope_parameters={"rope_type": "axial", "rope_theta": 10000.0},
    )
    audio = MuseSparkAudioConfig(
        patch_sizes=[16, 6, 5, 4], hidden_sizes=[8, 16, 24, 32], depths=[1, 1, 1, 1], num_hidden_layers=4,
        mlp_ratio=2.0, conv_kernel_size=7, hidden_act="gelu", rms_norm_eps=1e-6, out_hidden_size=HIDDEN,
    )
    return MuseSparkConfig(text_config=text, vision_config=vision, audio_config=audio, out_hidden_size=128,
                           projector_hidden_size=48, image_token_id=ids["<|patch|>"],
                           video_token_id=ids["<|video|>"], audio_token_id=ids["<|audio|>"])


def std_of(name: str, shape: tuple[int, ...]) -> tuple[float, float]:
    if name.endswith("norm.weight") or name.endswith("norm1.weight") or name.endswith("norm2.weight") or \
            name.endswith("ln_pre.weight") or name.endswith("ln_post.weight"):
        return 1.0, 0.1
    if name.endswith(".bias"):
        return 0.0, 0.1
    if name.startswith("model.language_model.") or name.startswith("lm_head"):
        return text_weight_std(name, shape, SimpleNamespace(hidden_size=HIDDEN))
    if "conv" in name and len(shape) == 3:  # depthwise kernels [C, 1, K]
        return 0.0, (1.0 / shape[-1]) ** 0.5
    fan_in = shape[-1] if len(shape) > 1 else 1
    return 0.0, (1.0 / fan_in) ** 0.5


def make_tokenizer(out: Path) -> tuple[PreTrainedTokenizerFast, dict[str, int]]:
    spec = byte_level_tokenizer(VOCAB - len(SPECIALS))
    # HF tokenizers needs every field of the byte-level decoder spelled out.
    spec["decoder"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    ids = {}
    for i, text in enumerate(SPECIALS):
        ids[text] = VOCAB - len(SPECIALS) + i
        spec["added_tokens"].append({"id": ids[text], "content": text, "single_word": False, "lstrip": False,
                                     "rstrip": False, "normalized": False, "special": True})
        spec["model"]["vocab"][text] = ids[text]
    (out / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False))
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot|>", "pad_token": "<|pad|>",
              "image_token": "<|patch|>", "video_token": "<|video|>", "audio_token": "<|audio|>",
              "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 4096}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")
    (out / "chat_template.jinja").write_text(TEMPLATE)
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_file(str(out / "tokenizer.json")), **{
        k: v for k, v in config.items() if k != "tokenizer_class"})
    tok.image_token, tok.video_token, tok.audio_token = "<|patch|>", "<|video|>", "<|audio|>"
    return tok, ids


def ffmpeg(args: list[str]) -> bytes:
    return subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y", *args],
                          check=True, capture_output=True).stdout


def load_image(path: Path) -> Image.Image:
    return ImageOps.exif_transpose(Image.open(path))


def load_video(path: Path) -> tuple[np.ndarray, dict]:
    probe = json.loads(subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_packets",
                                       "-show_entries", "stream=avg_frame_rate,nb_read_packets,width,height",
                                       "-of", "json", str(path)], check=True, capture_output=True).stdout)["streams"][0]
    num, den = (int(v) for v in probe["avg_frame_rate"].split("/"))
    w, h, total = int(probe["width"]), int(probe["height"]), int(probe["nb_read_packets"])
    frames = np.frombuffer(ffmpeg(["-i", str(path), "-map", "0:v:0", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]),
                           np.uint8).reshape(-1, h, w, 3)
    return frames, {"fps": num / den, "total_num_frames": total, "duration": total / (num / den), "width": w,
                    "height": h}


def load_audio(path: Path) -> np.ndarray:
    # What ember's decoder gives: libavcodec's samples as float, channels averaged, then
    # libswresample to 24 kHz (tests/unit/media/README.md).
    raw = ffmpeg(["-i", str(path), "-map", "0:a:0", "-f", "f32le", "-acodec", "pcm_f32le", "-ac", "1", "-ar", "24000",
                  "-"])
    return np.frombuffer(raw, np.float32).copy()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    tok, ids = make_tokenizer(out)
    config = build_config(ids)
    model = random_bf16_model(config, SEED, std_of)
    model.generation_config.do_sample = False
    model.save_pretrained(out, safe_serialization=True)
    for extra in ("generation_config.json",):
        if not (out / extra).exists():
            raise SystemExit(f"save_pretrained wrote no {extra}")
    vision = {"patch_size": config.vision_config.patch_size, "temporal_patch_size": config.vision_config.patch_temporal,
              "merge_size": config.vision_config.merge_size}
    processor = MuseSparkProcessor(image_processor=MuseGlimmerImageProcessor(**vision, max_image_tokens=64),
                                   video_processor=MuseGlimmerVideoProcessor(**vision, max_video_frame_tokens=16,
                                                                             num_frames=8),
                                   tokenizer=tok, feature_extractor=MuseSparkFeatureExtractor(), chat_template=TEMPLATE)
    # The processors' settings as transformers saves them (processor_config.json), which ember
    # reads; the tokenizer files stay the ones written above.
    with tempfile.TemporaryDirectory() as tmp:
        processor.save_pretrained(tmp)
        for name in sorted(os.listdir(tmp)):
            if "processor" in name or "preprocessor" in name:
                shutil.copy(os.path.join(tmp, name), out / name)
    cases = []
    for name, parts in CASES:
        images, videos, metadata, audios = [], [], [], []
        template_parts = []
        for p in parts:
            if p["type"] == "text":
                template_parts.append(p)
                continue
            template_parts.append({"type": p["type"]})
            path = MEDIA / p["file"]
            if p["type"] == "image":
                images.append(load_image(path))
            elif p["type"] == "video":
                frames, md = load_video(path)
                videos.append(frames)
                metadata.append(md)
            else:
                audios.append(load_audio(path))
        messages = [{"role": "user", "content": template_parts}]
        text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        kwargs = {}
        if videos:
            kwargs.update(videos=videos, video_metadata=metadata, do_sample_frames=True, return_metadata=True)
        inputs = processor(text=[text], images=images or None, audio=audios or None, return_tensors="pt",
                           add_special_tokens=False, **kwargs)
        inputs.pop("video_metadata", None)
        with torch.no_grad():
            generated = model.generate(**inputs, max_new_tokens=MAX_NEW_TOKENS, do_sample=False, output_logits=True,
                                       return_dict_in_generate=True)
        prompt_ids = inputs["input_ids"][0].tolist()
        output_ids = generated.sequences[0, len(prompt_ids):].tolist()
        gaps = []
        for step_logits in generated.logits:
            top = torch.topk(step_logits[0].float(), 2).values
            gaps.append(float(top[0] - top[1]))
        api_parts = [p if p["type"] == "text" else {"type": p["type"], "file": p["file"]} for p in parts]
        cases.append({"name": name, "content": api_parts, "prompt_ids": prompt_ids, "output_ids": output_ids,
                      "output_text": tok.decode(output_ids, skip_special_tokens=True),
                      "min_logit_gap": min(gaps)})
        print(f"{name}: {len(prompt_ids)} prompt tokens -> {output_ids} (min top-2 gap {min(gaps):.4f})")
    outputs = {c["name"]: c["output_ids"] for c in cases}
    if outputs["image"] == outputs["other_image"]:
        raise SystemExit("two different images continue the prompt the same way: the test would prove nothing")
    meta = {"transformers": __import__("transformers").__version__, "torch": torch.__version__, "seed": SEED,
            "max_new_tokens": MAX_NEW_TOKENS, "cases": cases}
    (out / "cases.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main()
