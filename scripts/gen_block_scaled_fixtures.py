#!/usr/bin/env python3
"""Writes tests/unit/quant/testdata/block_scaled.bin for tests/unit/quant/block_scaled_fixture_test.cc.

Oracles (run with the project venv: .venv/bin/python scripts/gen_block_scaled_fixtures.py):
  * NVFP4: nvidia-modelopt's own NVFP4QTensor (quantize from a bf16 tensor: weight_scale_2, e4m3
    block scales, packed codes; dequantize to f32), the producer of the Muse NVFP4 checkpoint.
  * MXFP4: the OCP MX v1.0 rule written in torch (shared scale 2^(floor(log2(amax)) - 2), stored as
    torch.float8_e8m0fnu), with ModelOpt's e2m1 encoder (NVFP4QTensor._cast_fp4, round to nearest
    even, saturating) for the elements, except that values rounding to zero are +0 (code 0) as
    amd-quark writes them; dequantized as e2m1 * 2^(e-127) in torch f32.
  * FP8 e4m3: torch's float8_e4m3fn cast of x / scale (scale = amax / 448 per tensor, per row or per
    128x128 block, f32) and torch's f32 dequantization code * scale.

Inputs are bf16 values (what checkpoints hold) with a spread of magnitudes per block, an all-zero
block, a block far below the tensor's amax (so that NVFP4's 2^-9 clamp of the block scale is hit),
and -0.0.

Format (little-endian): "EBSF" u32 version=1 u32 count, then per record:
  u32 format (0 mxfp4, 1 nvfp4, 2 fp8), u32 fp8 scale kind (0 tensor, 1 channel, 2 block128),
  u32 rows, u32 cols, f32 global scale, f32 input[rows*cols], u32 n, u8 codes[n],
  u32 n, u8 scales[n] (e8m0 / e4m3 bytes, or f32 little-endian for FP8), f32 dequantized[rows*cols]
"""

import struct
from pathlib import Path

import torch
from modelopt.torch.quantization.qtensor import NVFP4QTensor

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "unit" / "quant" / "testdata" / "block_scaled.bin"
E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float32)


def make_input(rows, cols, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g)
    block_scale = torch.exp2(torch.empty(rows, cols // 16).uniform_(-6, 2, generator=g))
    x = x * block_scale.repeat_interleave(16, dim=1)
    x[0, 16:32] = 0.0            # an all-zero block
    x[0, 40] = -0.0
    x[1, 0:16] *= 1e-7           # far below the tensor amax: NVFP4 block scale clamps at 2^-9
    x[rows - 1, 5] = 0.0
    return x.to(torch.bfloat16)


def pack_nibbles(codes):
    codes = codes.to(torch.uint8)
    return (codes[..., 1::2] << 4) | codes[..., 0::2]


def record(fmt, kind, x, global_scale, codes, scales, dequant):
    rows, cols = x.shape
    out = struct.pack("<IIIIf", fmt, kind, rows, cols, global_scale)
    out += x.float().contiguous().numpy().astype("<f4").tobytes()
    codes = codes.contiguous().numpy().tobytes()
    scales = scales.contiguous().numpy().tobytes()
    out += struct.pack("<I", len(codes)) + codes + struct.pack("<I", len(scales)) + scales
    out += dequant.float().contiguous().numpy().astype("<f4").tobytes()
    return out


def nvfp4(x):
    qt, scale, scale_2 = NVFP4QTensor.quantize(x, 16)
    dequant = qt.dequantize(dtype=torch.float32, scale=scale, double_scale=scale_2, block_sizes={-1: 16})
    return record(1, 0, x, float(scale_2), qt._quantized_data, scale.view(torch.uint8), dequant)


def mxfp4(x):
    rows, cols = x.shape
    blocks = x.float().view(rows, cols // 32, 32)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    exponent = torch.floor(torch.log2(amax)) - 2
    exponent = torch.where(amax == 0, torch.full_like(exponent, -127), exponent).clamp(-127, 127)
    scale = torch.exp2(exponent)
    e8m0 = scale.to(torch.float8_e8m0fnu).view(torch.uint8)
    codes = NVFP4QTensor._cast_fp4((blocks / scale).view(rows, cols))
    codes = torch.where(codes == 8, torch.zeros_like(codes), codes)  # amd-quark writes +0 for -0
    dequant = (E2M1[codes.long()].view(rows, cols // 32, 32) * scale).view(rows, cols)
    return record(0, 0, x, 1.0, pack_nibbles(codes), e8m0.view(rows, cols // 32), dequant)


def fp8(x, kind):
    rows, cols = x.shape
    xf = x.float()
    if kind == 0:
        scale = (xf.abs().amax() / 448.0).view(1, 1)
        full = scale.expand(rows, cols)
    elif kind == 1:
        scale = xf.abs().amax(dim=1, keepdim=True) / 448.0
        full = scale.expand(rows, cols)
    else:
        br, bc = (rows + 127) // 128, (cols + 127) // 128
        scale = torch.empty(br, bc)
        for i in range(br):
            for j in range(bc):
                scale[i, j] = xf[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128].abs().amax() / 448.0
        full = scale.repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)[:, :cols]
    codes = (xf / full).to(torch.float8_e4m3fn)
    dequant = codes.float() * full
    global_scale = float(scale) if kind == 0 else 1.0
    scale_bytes = torch.empty(0) if kind == 0 else scale.contiguous()
    return record(2, kind, x, global_scale, codes.view(torch.uint8), scale_bytes.view(torch.uint8), dequant)


def main():
    records = [nvfp4(make_input(4, 64, 1)), nvfp4(make_input(3, 160, 2)), mxfp4(make_input(4, 64, 3)),
               mxfp4(make_input(3, 160, 4)), fp8(make_input(4, 64, 5), 0), fp8(make_input(4, 64, 6), 1),
               fp8(make_input(130, 144, 7), 2)]
    OUT.write_bytes(b"EBSF" + struct.pack("<II", 1, len(records)) + b"".join(records))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(records)} records)")


if __name__ == "__main__":
    main()
