#!/usr/bin/env python3
"""Quantized-checkpoint fixtures made with the producers' own libraries (CPU).

Writes tests/golden/quant/:

  <producer>/config.json (+ hf_quant_config.json for ModelOpt), <producer>/model.safetensors
      expert weights of a two-layer Muse Spark-shaped MoE (prefix model.language_model.): layer 0
      kept bf16 (excluded, as layers 0 and 61 of the released NVFP4 checkpoint), layer 1 quantized
      by the producer, in the producer's layout:
        modelopt_nvfp4  NVFP4QTensor.quantize per expert and per gate/up half (nvidia-modelopt):
                        gate_up_proj uint8 [E, 2I, Hm/2], gate_up_proj_weight_scale e4m3 [E, 2I, Hm/16],
                        gate_up_proj_weight_scale_2 f32 [E, 2]; down_proj* with weight_scale_2 [E]
        quark_mxfp4     amd-quark's file-to-file quantizer (MXFP4 weight-only scheme) run on the
                        experts as per-expert linears, restacked: gate_up_proj uint8 [E, 2I, Hm/2],
                        gate_up_proj_weight_scale uint8 (e8m0) [E, 2I, Hm/32]; config.json carries
                        Quark's own quantization_config
        ct_nvfp4        compressed-tensors NVFP4PackedCompressor on per-expert linears
                        (mlp.experts.{e}.{gate,up,down}_proj.weight_packed / weight_scale /
                        weight_global_scale), the layout llm-compressor writes for MoE experts
        ct_fp8_block    compressed-tensors float-quantized, 128x128 block strategy, same per-expert
                        names (weight F8_E4M3, weight_scale f32)
  <producer>/reference.safetensors
      source.<tensor>  the bf16 weights the producer quantized ([E, rows, cols] per stacked tensor)
      dequant.<tensor> the producer's reference dequantization of its own bytes, f32
      qdq_floor.<tensor> (Quark) Quark's quantize-dequantize in the OCP "floor" scale mode (the
                       checkpoint itself and dequant.<tensor> are in Quark's default "even" mode)
(accuracy/ is made by scripts/make_quant_accuracy.py, which uses ct_quantize and kl_top1 from here.)

Usage: .venv/bin/python scripts/make_quant_fixtures.py   (needs requirements/dev.txt)
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "golden" / "quant"
PREFIX = "model.language_model.layers."
E, HM, INTER = 2, 64, 32  # experts, expert width (K of gate_up), intermediate (K of down)


def source_experts(seed: int) -> dict[str, torch.Tensor]:
    """Stacked bf16 expert weights for layers 0 and 1; gate and up halves of different scale."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for layer in (0, 1):
        gate_up = torch.randn(E, 2 * INTER, HM, generator=g) * 0.02
        gate_up[:, INTER:] *= 3.0  # separate gate/up global scales must matter
        gate_up[0, 5, :16] = 0.0  # an all-zero block
        down = torch.randn(E, HM, INTER, generator=g) * 0.05
        out[f"{PREFIX}{layer}.mlp.experts.gate_up_proj"] = gate_up.bfloat16()
        out[f"{PREFIX}{layer}.mlp.experts.down_proj"] = down.bfloat16()
    return out


def write_dir(name: str, tensors: dict, config: dict, reference: dict, extra: dict | None = None):
    d = OUT / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(d / "model.safetensors"), metadata={"format": "pt"})
    save_file({k: v.contiguous() for k, v in reference.items()}, str(d / "reference.safetensors"))
    (d / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for fname, content in (extra or {}).items():
        (d / fname).write_text(json.dumps(content, indent=2) + "\n")


def base_reference(src: dict) -> dict:
    return {"source." + k: v for k, v in src.items() if f"{PREFIX}1." in k}


# ---- ModelOpt NVFP4 ------------------------------------------------------------------------------
def modelopt_nvfp4(src: dict):
    import modelopt
    from modelopt.torch.quantization.qtensor.nvfp4_tensor import NVFP4QTensor

    def quant(w: torch.Tensor):
        w32 = w.float()
        scale_2 = NVFP4QTensor.get_weights_scaling_factor_2(w32)
        q, scale, scale_2 = NVFP4QTensor.quantize(w32, 16, weights_scaling_factor_2=scale_2)
        deq = q.dequantize(dtype=torch.float32, scale=scale, double_scale=scale_2, block_sizes={-1: 16})
        return q._quantized_data, scale, scale_2.reshape(()), deq

    tensors = {k: v for k, v in src.items() if f"{PREFIX}0." in k}
    ref = base_reference(src)
    for which, halves in (("gate_up_proj", 2), ("down_proj", 1)):
        name = f"{PREFIX}1.mlp.experts.{which}"
        w = src[name]
        rows = w.shape[1] // halves
        codes, scales, g2, deqs = [], [], [], []
        for e in range(E):
            parts = [quant(w[e, h * rows:(h + 1) * rows]) for h in range(halves)]
            codes.append(torch.cat([p[0] for p in parts]))
            scales.append(torch.cat([p[1] for p in parts]))
            g2.append(torch.stack([p[2] for p in parts]) if halves == 2 else parts[0][2])
            deqs.append(torch.cat([p[3] for p in parts]))
        tensors[name] = torch.stack(codes)
        tensors[name + "_weight_scale"] = torch.stack(scales)
        tensors[name + "_weight_scale_2"] = torch.stack(g2).float()
        tensors[name + "_input_scale"] = torch.ones_like(tensors[name + "_weight_scale_2"])
        ref["dequant." + name] = torch.stack(deqs)
    hf_quant = {
        "producer": {"name": "modelopt", "version": modelopt.__version__},
        "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None, "group_size": 16,
                         "exclude_modules": ["lm_head", f"{PREFIX}0.mlp.experts*"]},
    }
    write_dir("modelopt_nvfp4", tensors, {"model_type": "muse_spark_text"}, ref, {"hf_quant_config.json": hf_quant})


# ---- Quark MXFP4 ---------------------------------------------------------------------------------
def quark_mxfp4(src: dict):
    from quark.torch.kernel.hw_emulation.hw_emulation_interface import fake_quantize_mx
    from quark.torch.quantization.config.config import QConfig
    from quark.torch.quantization.config.template import MXFP4WeightOnlyScheme
    from quark.torch.quantization.file2file_quantization import quantize_model_per_safetensor

    names = [f"{PREFIX}1.mlp.experts.{w}" for w in ("gate_up_proj", "down_proj")]
    with tempfile.TemporaryDirectory() as tmp:
        s, d = Path(tmp) / "src", Path(tmp) / "dst"
        s.mkdir()
        linears = {f"{n}.{e}.weight": src[n][e].contiguous() for n in names for e in range(E)}
        save_file(linears, str(s / "model.safetensors"), metadata={"format": "pt"})
        (s / "config.json").write_text(json.dumps({"model_type": "llama", "torch_dtype": "bfloat16"}))
        cfg = QConfig(global_quant_config=MXFP4WeightOnlyScheme().config, exclude=[])
        quantize_model_per_safetensor(str(s), cfg, str(d), device="cpu")
        out = load_file(str(d / "model.safetensors"))
        quark_config = json.loads((d / "config.json").read_text())["quantization_config"]
    tensors = {k: v for k, v in src.items() if f"{PREFIX}0." in k}
    ref = base_reference(src)
    for n in names:
        tensors[n] = torch.stack([out[f"{n}.{e}.weight"] for e in range(E)])
        tensors[n + "_weight_scale"] = torch.stack([out[f"{n}.{e}.weight_scale"] for e in range(E)])
        # Quark's reference: its own quantize-dequantize (the CPU path; its dq_mxfp4 is GPU-only), in
        # the mode the checkpoint was made with ("even": amax rounded to e2m1 precision before
        # floor(log2)), and in the OCP MX v1.0 "floor" mode that ember's quantizer implements.
        for mode, key in (("even", "dequant."), ("floor", "qdq_floor.")):
            ref[key + n] = torch.stack(
                [fake_quantize_mx(src[n][e].float(), -1, 32, mode, mx_element_dtype="fp4") for e in range(E)])
    quark_config["exclude"] = [f"{PREFIX}0.mlp.experts*", "lm_head"]
    write_dir("quark_mxfp4", tensors, {"model_type": "muse_spark_text", "quantization_config": quark_config}, ref)


# ---- compressed-tensors --------------------------------------------------------------------------
def ct_quantize(w: torch.Tensor, scheme_name: str):
    """Runs compressed-tensors' own calibration-free weight quantization and compressor on one
    Linear; returns (compressed state dict, reference dequantized weight, scheme dict)."""
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationScheme, preset_name_to_scheme
    from compressed_tensors.quantization.lifecycle import apply_quantization_config, initialize_module_for_quantization
    from compressed_tensors.quantization.utils import calculate_qparams, generate_gparam

    scheme: QuantizationScheme = preset_name_to_scheme(scheme_name, ["Linear"])
    args = scheme.weights
    lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False)
    lin.weight.data = w.float().clone()
    x = lin.weight.data
    state = {"weight": x}
    if args.strategy == "tensor_group":
        gs = args.group_size
        global_scale = generate_gparam(x.min(), x.max())
        blocks = x.reshape(x.shape[0], -1, gs)
        scale, zp = calculate_qparams(blocks.amin(-1), blocks.amax(-1), args, global_scale=global_scale)
        state.update(weight_scale=scale, weight_global_scale=global_scale)
        fmt = "nvfp4-pack-quantized"
    else:  # block
        bs = args.block_structure
        r, c = x.shape
        pr, pc = -(-r // bs[0]) * bs[0], -(-c // bs[1]) * bs[1]
        padded = torch.zeros(pr, pc)
        padded[:r, :c] = x
        b = padded.reshape(pr // bs[0], bs[0], pc // bs[1], bs[1]).transpose(1, 2)
        scale, zp = calculate_qparams(b.amin((-1, -2)), b.amax((-1, -2)), args)
        state.update(weight_scale=scale)
        fmt = "float-quantized"
    compressor = BaseCompressor.load_from_registry(fmt)
    compressed = compressor.compress(dict(state), scheme)
    if fmt == "nvfp4-pack-quantized":
        # The compressor's decompress unpacks to bf16 and rounds there; the reference here is the
        # library's dequantize (code * (scale / global_scale)) on the same bytes in f32.
        from compressed_tensors.compressors.nvfp4.helpers import unpack_fp4_from_uint8
        from compressed_tensors.quantization.lifecycle.forward import dequantize
        packed = compressed["weight_packed"]
        codes = unpack_fp4_from_uint8(packed, packed.shape[0], packed.shape[1] * 2, dtype=torch.float32)
        deq = dequantize(x_q=codes, scale=compressed["weight_scale"].float(), args=args,
                         global_scale=compressed["weight_global_scale"], dtype=torch.float32)
        return compressed, deq.float(), scheme, fmt
    restored = compressor.decompress(dict(compressed), scheme)
    return compressed, restored["weight"].float(), scheme, fmt


def compressed_tensors(src: dict, scheme_name: str, out_name: str):
    import compressed_tensors as ct

    tensors = {k: v for k, v in src.items() if f"{PREFIX}0." in k}
    ref = base_reference(src)
    scheme_dict, fmt = None, None
    for which, halves in (("gate_up_proj", 2), ("down_proj", 1)):
        name = f"{PREFIX}1.mlp.experts.{which}"
        w = src[name]
        rows = w.shape[1] // halves
        deqs = []
        for e in range(E):
            parts = []
            for h in range(halves):
                proj = ("gate_proj", "up_proj")[h] if halves == 2 else "down_proj"
                comp, deq, scheme, fmt = ct_quantize(w[e, h * rows:(h + 1) * rows], scheme_name)
                for k, v in comp.items():
                    tensors[f"{PREFIX}1.mlp.experts.{e}.{proj}.{k}"] = v.data if hasattr(v, "data") else v
                parts.append(deq)
                scheme_dict = scheme.model_dump(exclude_none=True)
            deqs.append(torch.cat(parts))
        ref["dequant." + name] = torch.stack(deqs)
    qc = {"quant_method": "compressed-tensors", "format": fmt, "version": ct.__version__,
          "config_groups": {"group_0": scheme_dict}, "ignore": ["lm_head", f"re:.*layers\\.0\\.mlp\\.experts.*"],
          "quantization_status": "compressed"}
    write_dir(out_name, tensors, {"model_type": "muse_spark_text", "quantization_config": qc}, ref)


def kl_top1(p_logits: np.ndarray, q_logits: np.ndarray) -> dict:
    def logsoftmax(z):
        z = z.astype(np.float64)
        z = z - z.max(-1, keepdims=True)
        return z - np.log(np.exp(z).sum(-1, keepdims=True))
    lp, lq = logsoftmax(p_logits), logsoftmax(q_logits)
    kl = (np.exp(lp) * (lp - lq)).sum(-1)
    return {"mean_kl": float(kl.mean()), "max_kl": float(kl.max()),
            "top1_agreement": float((p_logits.argmax(-1) == q_logits.argmax(-1)).mean())}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    src = source_experts(seed=4)
    only = set(sys.argv[1:])
    steps = {"modelopt": lambda: modelopt_nvfp4(src), "quark": lambda: quark_mxfp4(src),
             "ct_nvfp4": lambda: compressed_tensors(src, "NVFP4", "ct_nvfp4"),
             "ct_fp8": lambda: compressed_tensors(src, "FP8_BLOCK", "ct_fp8_block")}
    for name, step in steps.items():
        if not only or name in only:
            print("==", name, flush=True)
            step()


if __name__ == "__main__":
    main()
