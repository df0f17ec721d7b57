#!/usr/bin/env python3
"""Q8_0 and Q4_0 blocks quantized by the `gguf` package (bit-exact with ggml's reference
quantizers) for test_quant. Usage: python3 tools/oracles/quant_oracle.py > tests/data/quant_oracle.json"""
import json

import numpy as np
from gguf import GGMLQuantizationType, quants

rng = np.random.default_rng(20240611)
blocks = [
    rng.standard_normal(32),                     # ordinary weights
    rng.standard_normal(32) * 1e-3,              # small weights
    rng.uniform(-60000, 60000, 32),              # near the f16 range
    np.zeros(32),                                # all zero: scale 0
    np.linspace(-8, 7, 32),                      # many halfway cases after scaling
    np.where(np.arange(32) % 2 == 0, 1.0, -1.0) * np.arange(32),  # the extreme is positive
    -np.abs(rng.standard_normal(32)),            # all negative
    rng.standard_normal(32) * 1e-6,              # scale near the f16 subnormal range
]
values = np.concatenate(blocks).astype(np.float32)
out = {
    "values": [float(v) for v in values],
    "q8_0": quants.quantize(values, GGMLQuantizationType.Q8_0).tobytes().hex(),
    "q4_0": quants.quantize(values, GGMLQuantizationType.Q4_0).tobytes().hex(),
}
print(json.dumps(out, indent=1))
