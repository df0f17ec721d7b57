#!/usr/bin/env python3
"""Perplexity of the real SmolLM2-135M-Instruct Q4_1 file on a Python text, computed here in
float64 with numpy from the weights as the `gguf` package dequantizes them (llama.cpp's own
gguf-py), for test_forward_reference: an independent reference for specula-cli perplexity.

The text is tokenized by Hugging Face `tokenizers` from the file's vocabulary and merges
(as real_models_oracle.py does), cut into windows of CONTEXT tokens (the vocabulary adds no
BOS), and every token of a window but its first is scored from the logits before it:
eval/perplexity.h's definition. The forward is the llama block written out: RMSNorm, rotary
embedding of pairs (2i, 2i+1) (GGUF's layout of llama's q and k), grouped-query attention,
SwiGLU, the tied output matrix.

Usage: python3 tools/oracles/perplexity_oracle.py REAL_MODELS_DIR > tests/data/perplexity_oracle.json
Needs `gguf`, `numpy` and `tokenizers`.
"""
import json
import math
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

from python_text import PYTHON_TEXT_START
from smollm2_vocabulary import smollm2_tokenizer

NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONTEXT = 128
TEXT = PYTHON_TEXT_START + '''__len__(self):
        return len(self.items)


def main(argv):
    if len(argv) != 2:
        print("usage: words.py FILE", file=sys.stderr)
        return 2
    if not os.path.exists(argv[1]):
        print(f"no such file: {argv[1]}", file=sys.stderr)
        return 1
    for word, count in most_common(count_words(read_lines(argv[1]))):
        print(f"{count:6d} {word}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
'''


def number(reader, key):
    field = reader.fields[key]
    return field.parts[field.data[0]][0]


reader = GGUFReader(os.path.join(sys.argv[1], NAME))
ids = smollm2_tokenizer(reader).encode(TEXT).ids

tensors = {t.name: t for t in reader.tensors}


def weight(name):
    t = tensors[name]
    return dequantize(t.data, t.tensor_type).reshape([int(d) for d in reversed(t.shape)]).astype(np.float64)


n_layers = int(number(reader, "llama.block_count"))
n_heads = int(number(reader, "llama.attention.head_count"))
n_kv = int(number(reader, "llama.attention.head_count_kv"))
eps = float(number(reader, "llama.attention.layer_norm_rms_epsilon"))
theta = float(number(reader, "llama.rope.freq_base"))
embedding = weight("token_embd.weight")
dim = embedding.shape[1]
head = dim // n_heads
layers = [{k: weight(f"blk.{i}.{k}.weight") for k in
           ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")}
          for i in range(n_layers)]
final_norm = weight("output_norm.weight")
output = weight("output.weight") if "output.weight" in tensors else embedding


def rmsnorm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, positions):  # x: (T, heads, head); rotates pairs (2i, 2i + 1)
    freqs = theta ** (-np.arange(0, head, 2, dtype=np.float64) / head)
    angles = positions[:, None] * freqs[None, :]
    cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def logits_of(window):
    T = len(window)
    positions = np.arange(T, dtype=np.float64)
    x = embedding[window]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for L in layers:
        h = rmsnorm(x, L["attn_norm"])
        q = rope((h @ L["attn_q"].T).reshape(T, n_heads, head), positions)
        k = rope((h @ L["attn_k"].T).reshape(T, n_kv, head), positions)
        v = (h @ L["attn_v"].T).reshape(T, n_kv, head)
        out = np.empty((T, n_heads, head))
        for hd in range(n_heads):
            kv = hd // (n_heads // n_kv)
            scores = q[:, hd, :] @ k[:, kv, :].T / math.sqrt(head) + mask
            scores = np.exp(scores - scores.max(axis=1, keepdims=True))
            out[:, hd, :] = (scores / scores.sum(axis=1, keepdims=True)) @ v[:, kv, :]
        x = x + out.reshape(T, dim) @ L["attn_output"].T
        h = rmsnorm(x, L["ffn_norm"])
        g = h @ L["ffn_gate"].T
        x = x + ((g / (1 + np.exp(-g))) * (h @ L["ffn_up"].T)) @ L["ffn_down"].T
    return rmsnorm(x, final_norm) @ output.T


nll, scored, windows = 0.0, 0, 0
for start in range(0, len(ids), CONTEXT):
    window = ids[start:start + CONTEXT]
    if len(window) < 2:
        break
    logits = logits_of(window)
    for p in range(1, len(window)):
        row = logits[p - 1]
        top = row.max()
        nll += math.log(np.exp(row - top).sum()) - (row[window[p]] - top)
        scored += 1
    windows += 1

json.dump({"script": "tools/oracles/perplexity_oracle.py", "file": NAME, "context": CONTEXT, "text": TEXT,
           "ids": ids, "tokens": len(ids), "scored": scored, "windows": windows,
           "perplexity": math.exp(nll / scored)}, sys.stdout, indent=1)
print()
