#!/usr/bin/env python3
"""Fixtures for src/media: images, videos and audio clips drawn here, and what transformers'
Muse Spark processors make of them (tests/unit/media/testdata, README there).

Run from the repository root with the dev virtualenv (torch, torchvision, transformers, PIL,
numpy) and the ffmpeg CLI on PATH:   .venv/bin/python scripts/make_media_fixtures.py
Deterministic: every input is drawn from fixed formulas, every encoder runs single-threaded with
-bitexact, so running it twice gives identical files.
"""
import io
import json
import math
import os
import subprocess
import sys
import types

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageOps

from transformers.image_transforms import convert_to_rgb
from transformers.models.muse_glimmer.image_processing_muse_glimmer import MuseGlimmerImageProcessor
from transformers.models.muse_glimmer.video_processing_muse_glimmer import MuseGlimmerVideoProcessor
from transformers.models.muse_spark.feature_extraction_muse_spark import MuseSparkFeatureExtractor
from transformers.models.muse_spark.processing_muse_spark import MuseSparkProcessor

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "unit", "media", "testdata")
FF = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y"]
BITEXACT = ["-threads", "1", "-fflags", "+bitexact", "-flags", "+bitexact", "-map_metadata", "-1"]

torch.set_num_threads(1)


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def run(cmd, stdin=None):
    return subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, check=True).stdout


# ----------------------------------------------------------------------------------------------
# Drawing


def scene(w, h, phase=0.0):
    """An RGB uint8 picture with gradients, edges and a few shapes (fine detail for the resampler)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 127.5 + 127.5 * np.sin(x / max(w, 1) * 5.0 + phase)
    g = 255.0 * y / max(h - 1, 1)
    b = 255.0 * (((x.astype(int) // 5) + (y.astype(int) // 7)) % 2)
    img = Image.fromarray(np.stack([r, g, b], -1).round().clip(0, 255).astype(np.uint8))
    d = ImageDraw.Draw(img)
    cx = int((0.2 + 0.6 * ((phase / 3.0) % 1.0)) * w)
    d.ellipse([cx - w // 6, h // 4, cx + w // 6, h // 4 + h // 3], fill=(250, 30, 40))
    d.rectangle([w // 10, h * 2 // 3, w // 2, h * 2 // 3 + max(h // 8, 1)], fill=(10, 200, 90))
    d.line([0, h - 1, w - 1, 0], fill=(255, 255, 0), width=1)
    return img


def encode(img, fmt, **kw):
    b = io.BytesIO()
    img.save(b, fmt, **kw)
    return b.getvalue()


def images():
    """(name, encoded bytes, processor kwargs)."""
    cases = []
    cases.append(("rgb_odd.png", encode(scene(97, 61), "PNG"), {}))
    cases.append(("wide.png", encode(scene(200, 50), "PNG"), {}))
    cases.append(("tall.jpg", encode(scene(105, 266), "JPEG", quality=90), {"max_image_tokens": 6}))
    rgba = scene(80, 50).convert("RGBA")
    a = np.array(rgba)
    yy, xx = np.mgrid[0:50, 0:80]
    a[..., 3] = ((xx * 255) // 79).astype(np.uint8)
    a[:10, :10, 3] = 0
    a[:10, :10, :3] = (1, 2, 3)  # invisible colour: composited away
    cases.append(("alpha.png", encode(Image.fromarray(a, "RGBA"), "PNG"), {}))
    cases.append(("gray.png", encode(scene(45, 70).convert("L"), "PNG"), {}))
    pal = scene(64, 40).convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    cases.append(("palette_trns.png", encode(pal, "PNG", transparency=3), {}))
    cases.append(("palette.png", encode(scene(33, 90).convert("P", palette=Image.Palette.ADAPTIVE, colors=7), "PNG"), {}))
    # 16-bit RGB PNG (PIL keeps the high byte of each sample), written by ffmpeg's png encoder.
    y, x = np.mgrid[0:29, 0:33]
    rgb48 = np.stack([x * 1985, y * 2340, (x * y * 37) % 65536], -1).astype(">u2")
    png16 = run(FF + ["-f", "rawvideo", "-pix_fmt", "rgb48be", "-s", "33x29", "-i", "-"] + BITEXACT
                + ["-frames:v", "1", "-f", "image2pipe", "-c:v", "png", "-"], rgb48.tobytes())
    cases.append(("rgb16.png", png16, {}))
    cases.append(("gray.jpg", encode(scene(70, 52).convert("L"), "JPEG", quality=85), {}))
    # 4:4:4 and 4:2:0 colour JPEGs, and one with EXIF orientation 6 (rotate 90 clockwise to view).
    cases.append(("q444.jpg", encode(scene(57, 43), "JPEG", quality=95, subsampling=0), {}))
    exif = Image.Exif()
    exif[0x0112] = 6
    cases.append(("exif6.jpg", encode(scene(64, 36), "JPEG", quality=90, exif=exif.tobytes()), {}))
    cases.append(("lossy.webp", encode(scene(90, 66), "WEBP", quality=80, method=4), {}))
    cases.append(("lossless_alpha.webp", encode(Image.fromarray(a, "RGBA"), "WEBP", lossless=True), {}))
    # Every EXIF orientation, on a PNG (eXIf chunk); 3 and 8 also in WebP.
    for o in range(2, 9):
        ex = Image.Exif()
        ex[0x0112] = o
        cases.append((f"exif{o}.png", encode(scene(13, 7), "PNG", exif=ex.tobytes()), {}))
    ex = Image.Exif()
    ex[0x0112] = 8
    cases.append(("exif8.webp", encode(scene(20, 12), "WEBP", lossless=True, exif=ex.tobytes()), {}))
    # CMYK JPEG (PIL writes it with an Adobe marker, inverted).
    cases.append(("cmyk.jpg", encode(scene(30, 20).convert("CMYK"), "JPEG", quality=95), {}))
    # Too many tokens: downscaled under a small cap.
    cases.append(("big.png", encode(scene(320, 180), "PNG"), {"max_image_tokens": 12}))
    return cases


def image_fixtures(manifest):
    proc = MuseGlimmerImageProcessor()
    for name, data, kw in images():
        write(name, data)
        pil = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
        rgb = convert_to_rgb(pil, return_numpy=True)  # what the processor sees from a PIL image
        out = proc(images=pil, return_tensors="pt", **kw)
        out_np = proc(images=rgb, return_tensors="pt", **kw)
        assert torch.equal(out["pixel_values"], out_np["pixel_values"]), name
        pv = out["pixel_values"].numpy()
        # mean = std = 0.5: pixel = (u8 - 127.5) / 127.5 in float32, so the uint8 is recoverable.
        u8 = np.round(pv.astype(np.float64) * 127.5 + 127.5).astype(np.uint8)
        assert np.array_equal((u8.astype(np.float32) - np.float32(127.5)) / np.float32(127.5), pv), name
        stem = name.replace(".", "_")
        write(stem + ".rgb", rgb.tobytes())
        write(stem + ".pv.u8", u8.tobytes())
        grid = [int(v) for v in out["image_grid_thw"][0]]
        manifest["images"].append({
            "file": name, "width": int(rgb.shape[1]), "height": int(rgb.shape[0]), "decoded_rgb": stem + ".rgb",
            "max_image_tokens": kw.get("max_image_tokens", 4096), "grid_thw": grid,
            "num_tokens": grid[0] * grid[1] * grid[2] // 4, "pixel_values_u8": stem + ".pv.u8",
            "num_patches": int(pv.shape[0]), "patch_dim": int(pv.shape[1]),
        })


# ----------------------------------------------------------------------------------------------
# Video


def probe(path, stream):
    j = json.loads(run(["ffprobe", "-v", "error", "-select_streams", stream, "-count_packets", "-show_entries",
                        "stream=avg_frame_rate,nb_read_packets,duration", "-of", "json", path]))
    return j["streams"][0]


def video_fixtures(manifest):
    specs = [
        # name, w, h, fps, frames, codec args, container, with audio
        ("shapes.mp4", 64, 48, 10, 25, ["-c:v", "libx264", "-preset", "medium", "-crf", "20", "-pix_fmt", "yuv420p",
                                         "-x264-params", "threads=1"], "mp4", False),
        ("shapes_vp9.webm", 70, 40, 8, 13, ["-c:v", "libvpx-vp9", "-b:v", "0", "-crf", "30", "-row-mt", "0"],
         "webm", False),
        ("shapes_audio.mp4", 48, 64, 12, 14, ["-c:v", "mpeg4", "-q:v", "3"], "mp4", True),
    ]
    proc = MuseGlimmerVideoProcessor()
    for name, w, h, fps, n, vargs, container, with_audio in specs:
        frames = np.stack([np.array(scene(w, h, phase=0.37 * i)) for i in range(n)])
        tmp = os.path.join(OUT, "_tmp_" + name)
        cmd = FF + ["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}", "-r", str(fps), "-i", "-"]
        if with_audio:
            cmd += ["-f", "lavfi", "-i", f"sine=frequency=330:sample_rate=16000:duration={n / fps}",
                    "-c:a", "libmp3lame", "-b:a", "32k", "-shortest"]
        cmd += BITEXACT + vargs + ["-f", container, tmp]
        run(cmd, frames.tobytes())
        with open(tmp, "rb") as f:
            data = f.read()
        os.replace(tmp, os.path.join(OUT, name))
        path = os.path.join(OUT, name)
        st = probe(path, "v:0")
        num, den = (int(v) for v in st["avg_frame_rate"].split("/"))
        video_fps = num / den
        total = int(st["nb_read_packets"])
        # Decoded frames as libavcodec + libswscale give them (the same libraries as ember's).
        raw = run(FF + ["-i", path, "-map", "0:v:0", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        decoded = np.frombuffer(raw, np.uint8).reshape(-1, h, w, 3)
        assert decoded.shape[0] == total, (name, decoded.shape, total)
        metadata = {"fps": video_fps, "total_num_frames": total, "duration": total / video_fps,
                    "width": w, "height": h}
        out = proc(videos=[decoded], video_metadata=[metadata], do_sample_frames=True, return_metadata=True,
                   return_tensors="pt")
        md = out["video_metadata"][0]
        indices = [int(i) for i in md.frames_indices]
        pv = out["pixel_values_videos"].numpy()
        u8 = np.round(pv.astype(np.float64) * 127.5 + 127.5).astype(np.uint8)
        assert np.array_equal((u8.astype(np.float32) - np.float32(127.5)) / np.float32(127.5), pv), name
        grid = [int(v) for v in out["video_grid_thw"][0]]
        fake = types.SimpleNamespace(video_processor=proc, video_start_token="<|vid_start|>",
                                     video_end_token="<|vid_end|>", video_token="<|video|>",
                                     video_sep_token="<|vid_frame_separator|>")
        text = MuseSparkProcessor.replace_video_token(fake, {"video_grid_thw": out["video_grid_thw"],
                                                             "video_metadata": out["video_metadata"]}, 0)
        stem = name.replace(".", "_")
        write(stem + ".frames.rgb", decoded[indices].tobytes())
        write(stem + ".pv.u8", u8.tobytes())
        entry = {"file": name, "width": w, "height": h, "fps": video_fps, "total_num_frames": total,
                 "frames_indices": indices, "timestamps": [float(t) for t in md.timestamps],
                 "sampled_frames_rgb": stem + ".frames.rgb", "grid_thw": grid,
                 "pixel_values_u8": stem + ".pv.u8", "num_patches": int(pv.shape[0]),
                 "patch_dim": int(pv.shape[1]), "replacement": text}
        if with_audio:
            entry["audio"] = audio_reference(path, name)
        manifest["videos"].append(entry)


# ----------------------------------------------------------------------------------------------
# Audio


def audio_reference(path, name):
    """Mono float32 at 24 kHz: decoded by libavcodec at the stream's own rate and layout (ffmpeg
    CLI, f32le), channels averaged (numpy mean, as librosa/soundfile/torchaudio do), then resampled
    by libswresample with its default settings (ffmpeg CLI -ar 24000 on the mono f32 stream)."""
    st = json.loads(run(["ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries",
                         "stream=sample_rate,channels", "-of", "json", path]))["streams"][0]
    sr, ch = int(st["sample_rate"]), int(st["channels"])
    raw = run(FF + ["-i", path, "-map", "0:a:0", "-f", "f32le", "-acodec", "pcm_f32le", "-"])
    x = np.frombuffer(raw, np.float32).reshape(-1, ch)
    mono = x.mean(axis=1, dtype=np.float32) if ch > 1 else x[:, 0]
    if sr != 24000:
        res = run(FF + ["-f", "f32le", "-ar", str(sr), "-ac", "1", "-i", "-", "-ar", "24000", "-f", "f32le", "-"],
                  mono.astype("<f4").tobytes())
        wave = np.frombuffer(res, np.float32)
    else:
        wave = mono.astype(np.float32)
    fe = MuseSparkFeatureExtractor()
    feats = fe(wave, sampling_rate=24000, return_tensors="np")
    iv = feats["input_values"][0]
    mask = feats["input_values_mask"][0]
    num_samples = int(mask.sum())
    stem = name.replace(".", "_")
    write(stem + ".wave24k.f32", wave.astype("<f4").tobytes())
    return {"source_rate": sr, "source_channels": ch, "num_samples": num_samples,
            "padded_samples": int(iv.shape[-1]), "num_tokens": -(-num_samples // 1920),
            "wave_f32": stem + ".wave24k.f32"}


def audio_fixtures(manifest):
    def tone(sr, seconds, channels):
        t = np.arange(int(sr * seconds)) / sr
        chans = [0.5 * np.sin(2 * math.pi * (220 + 110 * c) * t) * np.linspace(1, 0.2, t.size) for c in range(channels)]
        return np.stack(chans, -1)

    specs = [
        ("tone_s16_44k_stereo.wav", 44100, 0.3, 2, ["-c:a", "pcm_s16le"], "wav"),
        ("tone_24k_mono.wav", 24000, 0.3, 1, ["-c:a", "pcm_s16le"], "wav"),
        ("tone_f32_16k.wav", 16000, 0.25, 1, ["-c:a", "pcm_f32le"], "wav"),
        ("tone_22k.mp3", 22050, 0.4, 1, ["-c:a", "libmp3lame", "-b:a", "48k"], "mp3"),
        ("tone_48k_stereo.flac", 48000, 0.4, 2, ["-c:a", "flac"], "flac"),
        ("tone_8k.ogg", 8000, 0.4, 1, ["-c:a", "libvorbis", "-q:a", "2"], "ogg"),
    ]
    for name, sr, secs, ch, cargs, fmt in specs:
        pcm = (tone(sr, secs, ch) * 32767).round().astype("<i2")
        path = os.path.join(OUT, name)
        run(FF + ["-f", "s16le", "-ar", str(sr), "-ac", str(ch), "-i", "-"] + BITEXACT + cargs + ["-f", fmt, path],
            pcm.tobytes())
        entry = {"file": name}
        entry.update(audio_reference(path, name))
        manifest["audio"].append(entry)


def smart_resize_sweep(manifest):
    """(height, width, patch, max_tokens) -> transformers' smart_resize, ties included."""
    from transformers.models.muse_glimmer.image_processing_muse_glimmer import smart_resize
    rows = []
    for max_tokens in (144, 4, 1):
        for h in range(1, 200, 7):
            for w in range(1, 200, 11):
                rows.append([h, w, 28, max_tokens, *smart_resize(h, w, 28, max_tokens)])
    rng = np.random.default_rng(0)
    for _ in range(400):
        h, w = (int(v) for v in rng.integers(1, 5000, 2))
        mt = int(rng.choice([4096, 1024, 144, 16, 6]))
        rows.append([h, w, 28, mt, *smart_resize(h, w, 28, mt)])
    for k in range(1, 40):  # 3:4 and square images at grid boundaries: the set-order ties
        for h, w in ((21 * k, 28 * k), (28 * k, 21 * k), (14 * k, 14 * k), (42 * k, 56 * k)):
            rows.append([h, w, 28, 4096, *smart_resize(h, w, 28, 4096)])
    manifest["smart_resize"] = rows


def sample_frames_sweep(manifest):
    """(total frames, video fps) -> MuseGlimmerVideoProcessor.sample_frames' indices."""
    from transformers.video_utils import VideoMetadata
    proc = MuseGlimmerVideoProcessor()
    rows = []
    for fps in (1.0, 7.5, 8.0, 10.0, 12.0, 23.976023976023978, 24.0, 25.0, 29.97002997002997, 30.0, 59.94005994005994, 60.0):
        for total in list(range(1, 121)) + [150, 299, 300, 301, 997, 1799, 1800, 3601, 7203]:
            md = VideoMetadata(total_num_frames=total, fps=fps)
            idx = proc.sample_frames(md, temporal_patch_size=2)
            rows.append([total, fps, [int(i) for i in idx]])
    manifest["sample_frames"] = rows


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f != "README.md":
            os.remove(os.path.join(OUT, f))
    manifest = {"images": [], "videos": [], "audio": []}
    image_fixtures(manifest)
    smart_resize_sweep(manifest)
    sample_frames_sweep(manifest)
    # The micro-bench's input: a smooth 1024x768 photo-like picture (small once compressed).
    y, x = np.mgrid[0:768, 0:1024].astype(np.float64)
    smooth = np.stack([127 + 100 * np.sin(x / 97.0) * np.cos(y / 71.0), 255 * y / 767,
                       127 + 120 * np.sin((x + y) / 150.0)], -1).round().astype(np.uint8)
    write("bench_1024x768.jpg", encode(Image.fromarray(smooth), "JPEG", quality=85))
    video_fixtures(manifest)
    audio_fixtures(manifest)
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=None, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"wrote {len(os.listdir(OUT))} files, {total / 1024:.0f} KiB, to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    sys.exit(main())
