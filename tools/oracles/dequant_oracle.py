#!/usr/bin/env python3
"""Blocks of the GGUF tensor types beyond F32/F16/BF16/Q8_0/Q4_0/Q4_K/Q6_K and their values as
the `gguf` package decodes them (gguf.quants.dequantize, the Python port of ggml's
dequantize_row_*), for test_quant.

Usage: python3 tools/oracles/dequant_oracle.py [REAL_MODELS_DIR] > tests/data/dequant_oracle.json

Per type: `blocks` (hex of the raw blocks) and `values` (hex of the little-endian float32
values gguf decodes). The blocks are random bytes with their scale fields set to finite
f16 values of several magnitudes (subnormal ones included), so that every quant bit pattern
occurs; for Q4_1, Q5_0 and Q5_1 also `quantized`: fixed values (`inputs`) quantized by
gguf.quants.quantize, which is bit-exact with ggml's reference quantizers. With
REAL_MODELS_DIR (the folder the shared data's models/real/fetch.sh fills:
SmolLM2-135M-Instruct.Q4_1.gguf, gemma-3-270m-q4_k_m.gguf), two blocks of a Q4_1 and of a Q5_0 tensor of the real files are
added to the random ones.
"""
import json
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T, GGML_QUANT_SIZES, quants

rng = np.random.default_rng(45)

# byte offsets of each type's f16 scale fields (ggml-common.h); MXFP4's E8M0 byte is apart
F16_FIELDS = {
    T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q2_K: [80, 82], T.Q3_K: [108],
    T.Q5_K: [0, 2], T.IQ4_NL: [0], T.IQ4_XS: [0], T.MXFP4: [],
}
BLOCKS = 8


def scale_f16(i):
    # ordinary, small, large, subnormal and negative scales in turn
    mags = [1e-2, 3e-4, 2.0, 3e-6, 5e-8]
    v = rng.uniform(0.5, 1.0) * mags[i % len(mags)] * (-1 if i % 3 == 2 else 1)
    return np.float16(v).tobytes()


def random_blocks(t):
    n, size = GGML_QUANT_SIZES[t]
    raw = bytearray(rng.integers(0, 256, size * BLOCKS, dtype=np.uint8).tobytes())
    for b in range(BLOCKS):
        for k, off in enumerate(F16_FIELDS[t]):
            raw[b * size + off:b * size + off + 2] = scale_f16(b + 3 * k)
        if t == T.MXFP4:
            # exponents in f16's range, and two outside it (the Q8_0 conversion refuses those)
            raw[b * size] = [127, 120, 104, 143, 131, 3, 250, 128][b]
    return bytes(raw)


def real_blocks(path, t, count=2):
    from gguf import GGUFReader
    reader = GGUFReader(path)
    for tensor in reader.tensors:
        if tensor.tensor_type == t:
            size = GGML_QUANT_SIZES[t][1]
            data = np.asarray(tensor.data).tobytes()
            return data[size * 7:size * (7 + count)]  # two blocks past the row's start
    return b""


def decode(raw, t):
    n, size = GGML_QUANT_SIZES[t]
    arr = np.frombuffer(raw, dtype=np.uint8).reshape(-1, size)
    return np.asarray(quants.dequantize(arr, t), dtype="<f4").reshape(-1).tobytes()


real_dir = sys.argv[1] if len(sys.argv) > 1 else None
out = {"script": "tools/oracles/dequant_oracle.py", "gguf_dequantize": "gguf.quants.dequantize", "types": {}}
inputs = np.concatenate([rng.standard_normal(32), rng.standard_normal(32) * 1e-3, np.linspace(-8, 7, 32),
                         np.zeros(32), -np.abs(rng.standard_normal(32)), rng.uniform(0, 5, 32)]).astype(np.float32)
for t in F16_FIELDS:
    raw = random_blocks(t)
    if real_dir:
        files = {T.Q4_1: "SmolLM2-135M-Instruct.Q4_1.gguf", T.Q5_0: "gemma-3-270m-q4_k_m.gguf"}
        if t in files and os.path.exists(os.path.join(real_dir, files[t])):
            raw += real_blocks(os.path.join(real_dir, files[t]), t)
    entry = {"name": t.name.lower().replace("_k", "_K"), "ggml_type": int(t), "blocks": raw.hex(), "values": decode(raw, t).hex()}
    if t in (T.Q4_1, T.Q5_0, T.Q5_1):
        entry["inputs"] = inputs.tobytes().hex()
        entry["quantized"] = quants.quantize(inputs, t).tobytes().hex()
    out["types"][entry["name"]] = entry
json.dump(out, sys.stdout, indent=1)
print()
