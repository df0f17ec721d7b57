#!/usr/bin/env python3
"""A float64 numpy forward of the real Gemma 3 270M file (`gemma3`), on the weights as the
`gguf` package (llama.cpp's gguf-py) dequantizes them, for test_forward_reference: the
last-position logits of a few prompts, greedy continuations of five code prompts, and the
perplexity of a Python text longer than the sliding window (one window, so its later tokens
attend through the window's mask).

The forward is Hugging Face's Gemma3ForCausalLM (transformers' modeling_gemma3.py) on the
GGUF layout: the embedding times sqrt(d_model); per layer RMSNorm -> q, k, v -> per-head RMSNorm
of q and k -> RoPE on halves (x[i], x[i + head_dim/2]) with base 10 000 on sliding layers and
rope.freq_base on global ones (every sixth: layer il is global when (il + 1) % 6 == 0) ->
attention scaled by 1/sqrt(key_length), a sliding layer's query seeing keys less than
attention.sliding_window positions back -> output -> RMSNorm (post_attention_norm) added to
the residual; then RMSNorm -> down(gelu_tanh(gate) * up) -> RMSNorm (post_ffw_norm) added;
final RMSNorm and the tied embedding as output. Gemma's RMSNorm multiplies by (1 + w):
llama.cpp's converter stores 1 + w in the GGUF, so the weights are used as stored (with
--raw-norm-check the script also prints the perplexity the other reading would give).
Token ids come from `transformers`' tokenizer built from the file (gemma3_vocabulary.py),
BOS first (tokenizer.ggml.add_bos_token).

Usage: python3 tools/oracles/gemma3_oracle.py REAL_MODELS_DIR > tests/data/gemma3_oracle.json
Needs `gguf`, `numpy`, `transformers` and `tokenizers` (not torch).
"""
import json
import math
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

from gemma3_vocabulary import gemma3_tokenizer
from python_text import PYTHON_TEXT_START

NAME = "gemma-3-270m-q4_k_m.gguf"
GREEDY_TOKENS = 16
LOGIT_PROMPTS = [
    "def fibonacci(n):\n    ",
    "import numpy as np\n\n",
    "The quick brown fox",
]
GREEDY_PROMPTS = [
    "def add(a, b):\n    return",
    "def is_prime(n):\n    if n < 2:\n        return False\n    for i in range(2,",
    "# Sort the list in place\nnumbers = [5, 3, 1]\nnumbers.",
    "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y",
    "for (int i = 0; i < n; ++i) {\n    sum +=",
]
PERPLEXITY_TEXT = PYTHON_TEXT_START + '''peek(self):
        if not self.items:
            raise IndexError("peek at an empty stack")
        return self.items[-1]

    def __len__(self):
        return len(self.items)


class Queue:
    """A first-in, first-out queue on two stacks."""

    def __init__(self):
        self.inbox = Stack()
        self.outbox = Stack()

    def put(self, item):
        self.inbox.push(item)

    def get(self):
        if not len(self.outbox):
            while len(self.inbox):
                self.outbox.push(self.inbox.pop())
        return self.outbox.pop()

    def __len__(self):
        return len(self.inbox) + len(self.outbox)


def binary_search(items, target):
    """The index of target in the sorted list items, or -1."""
    low, high = 0, len(items) - 1
    while low <= high:
        middle = (low + high) // 2
        if items[middle] == target:
            return middle
        if items[middle] < target:
            low = middle + 1
        else:
            high = middle - 1
    return -1


def merge_sorted(left, right):
    """One sorted list of the items of two sorted lists."""
    merged = []
    i = j = 0
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            merged.append(left[i])
            i += 1
        else:
            merged.append(right[j])
            j += 1
    merged.extend(left[i:])
    merged.extend(right[j:])
    return merged


def merge_sort(items):
    """A sorted copy of items."""
    if len(items) <= 1:
        return list(items)
    middle = len(items) // 2
    return merge_sorted(merge_sort(items[:middle]), merge_sort(items[middle:]))


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
    return reader.fields[key].contents()


reader = GGUFReader(os.path.join(sys.argv[1], NAME))
tokenizer = gemma3_tokenizer(reader)
BOS = int(number(reader, "tokenizer.ggml.bos_token_id"))
tensors = {t.name: t for t in reader.tensors}


def weight(name, dtype=np.float64):
    t = tensors[name]
    return dequantize(t.data, t.tensor_type).reshape([int(d) for d in reversed(t.shape)]).astype(dtype)


A = "gemma3."
n_layers = int(number(reader, A + "block_count"))
n_heads = int(number(reader, A + "attention.head_count"))
n_kv = int(number(reader, A + "attention.head_count_kv"))
head = int(number(reader, A + "attention.key_length"))
eps = float(number(reader, A + "attention.layer_norm_rms_epsilon"))
theta_global = float(number(reader, A + "rope.freq_base"))
theta_sliding = 10000.0  # llama.cpp's and transformers' rope_local_base_freq
window = int(number(reader, A + "attention.sliding_window"))
embedding = weight("token_embd.weight", np.float32)  # Q8_0 values are exact in float32
vocab, dim = embedding.shape
NORM_SHIFT = 1.0 if "--raw-norm-check" in sys.argv else 0.0  # the other reading: 1 + w on stored w
layers = [{k: weight(f"blk.{i}.{k}.weight") for k in
           ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_q_norm", "attn_k_norm", "attn_output",
            "post_attention_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down", "post_ffw_norm")}
          for i in range(n_layers)]
final_norm = weight("output_norm.weight")


def rmsnorm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (w + NORM_SHIFT)


def rope(x, positions, theta):  # x: (T, heads, head); rotates halves (x[i], x[i + head/2])
    half = head // 2
    freqs = theta ** (-np.arange(0, head, 2, dtype=np.float64) / head)
    angles = positions[:, None] * freqs[None, :]
    cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def is_global(il):
    return (il + 1) % 6 == 0


def hidden_of(ids):
    """The final-normed hidden state of every position, (T, dim) float64."""
    T = len(ids)
    positions = np.arange(T, dtype=np.float64)
    query, key = np.arange(T)[:, None], np.arange(T)[None, :]
    causal = np.where(key <= query, 0.0, -np.inf)
    sliding = np.where((key <= query) & (query - key < window), 0.0, -np.inf)
    x = embedding[ids].astype(np.float64) * math.sqrt(dim)
    for il, L in enumerate(layers):
        theta, mask = (theta_global, causal) if is_global(il) else (theta_sliding, sliding)
        h = rmsnorm(x, L["attn_norm"])
        q = rope(rmsnorm((h @ L["attn_q"].T).reshape(T, n_heads, head), L["attn_q_norm"]), positions, theta)
        k = rope(rmsnorm((h @ L["attn_k"].T).reshape(T, n_kv, head), L["attn_k_norm"]), positions, theta)
        v = (h @ L["attn_v"].T).reshape(T, n_kv, head)
        out = np.empty((T, n_heads, head))
        for hd in range(n_heads):
            kv = hd // (n_heads // n_kv)
            scores = q[:, hd, :] @ k[:, kv, :].T / math.sqrt(head) + mask
            scores = np.exp(scores - scores.max(axis=1, keepdims=True))
            out[:, hd, :] = (scores / scores.sum(axis=1, keepdims=True)) @ v[:, kv, :]
        x = x + rmsnorm(out.reshape(T, n_heads * head) @ L["attn_output"].T, L["post_attention_norm"])
        h = rmsnorm(x, L["ffn_norm"])
        f = (gelu_tanh(h @ L["ffn_gate"].T) * (h @ L["ffn_up"].T)) @ L["ffn_down"].T
        x = x + rmsnorm(f, L["post_ffw_norm"])
    return rmsnorm(x, final_norm)


def logits_of(hidden):  # (R, dim) -> (R, vocab), the tied embedding in slices of float64
    out = np.empty((hidden.shape[0], vocab))
    for start in range(0, vocab, 16384):
        out[:, start:start + 16384] = hidden @ embedding[start:start + 16384].astype(np.float64).T
    return out


def encode(text):
    return [BOS] + tokenizer.encode(text, add_special_tokens=False).ids


def summary(row):
    """What a test compares of one logit row: the 16 largest, 64 fixed ids, sum and sum of squares."""
    top = np.argsort(-row, kind="stable")[:16]
    probe = list(range(0, vocab, vocab // 64))
    return {"top_ids": [int(i) for i in top], "top_logits": [float(row[i]) for i in top],
            "probe_ids": probe, "probe_logits": [float(row[i]) for i in probe],
            "sum": float(row.sum()), "sum_squares": float((row * row).sum())}


def greedy(ids, n):
    ids, margins = list(ids), []
    for _ in range(n):
        row = logits_of(hidden_of(ids)[-1:])[0]
        first, second = np.sort(row)[-2:][::-1]
        margins.append(float(first - second))
        ids.append(int(np.argmax(row)))
    return ids[-n:], margins


def perplexity(ids):
    """exp(mean NLL) of every token after the first (BOS), in one window."""
    logits = logits_of(hidden_of(ids)[:-1])
    top = logits.max(axis=1, keepdims=True)
    log_z = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
    nll = log_z - logits[np.arange(len(ids) - 1), ids[1:]]
    return math.exp(nll.mean()), len(ids) - 1, logits[-1]


if "--raw-norm-check" in sys.argv:
    print("perplexity with 1 + w on the stored norms:", perplexity(encode(PERPLEXITY_TEXT))[0], file=sys.stderr)
    sys.exit(0)

out = {"script": "tools/oracles/gemma3_oracle.py", "file": NAME, "bos": BOS, "sliding_window": window, "logits": [],
       "greedy": []}
for text in LOGIT_PROMPTS:
    ids = encode(text)
    out["logits"].append(dict({"prompt": text, "ids": ids}, **summary(logits_of(hidden_of(ids)[-1:])[0])))
    print("logits:", repr(text), out["logits"][-1]["top_ids"][:4], file=sys.stderr)
for text in GREEDY_PROMPTS:
    ids = encode(text)
    tokens, margins = greedy(ids, GREEDY_TOKENS)
    out["greedy"].append({"prompt": text, "ids": ids, "tokens": tokens, "margins": margins,
                          "text": tokenizer.decode(tokens)})
    print("greedy:", repr(text), repr(out["greedy"][-1]["text"]), min(margins), file=sys.stderr)
ids = encode(PERPLEXITY_TEXT)
ppl, scored, last = perplexity(ids)
out["perplexity"] = {"text": PERPLEXITY_TEXT, "ids": ids, "context": len(ids), "scored": scored, "perplexity": ppl,
                     "last_logits": summary(last)}
print("perplexity:", ppl, "over", scored, "tokens", file=sys.stderr)
json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
print()
