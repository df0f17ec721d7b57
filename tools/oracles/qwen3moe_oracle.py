#!/usr/bin/env python3
"""A tiny random-weight `qwen3moe` model (the architecture of Qwen3-30B-A3B and
Qwen3-Coder-30B-A3B) written as GGUF by the `gguf` package, with reference outputs from an
independent float64 numpy forward.

The model: 2 layers, d_model 64, 4 query heads and 2 KV heads of 32 values (q is 128 wide in
a 64-wide model, as Qwen3-30B-A3B's 32 x 128 in 2048), per-head q/k RMSNorm, RoPE on halves
with base 1e6, and in every layer a mixture of 8 experts of feed-forward width 32 of which
each token uses 2, vocabulary 96, separate output matrix. The keys and tensors are the ones
llama.cpp's convert_hf_to_gguf.py writes for Qwen3MoeForCausalLM: `qwen3moe.expert_count`,
`expert_used_count`, `expert_feed_forward_length` (the dense `feed_forward_length` is
written too and unused), `blk.N.ffn_gate_inp.weight` (n_expert, d) and the 3-D
`blk.N.ffn_{gate,up}_exps.weight` (n_expert, ff, d), `ffn_down_exps.weight` (n_expert, d,
ff) in numpy order (GGUF ne reversed).

The reference is transformers' Qwen3MoeSparseMoeBlock (norm_topk_prob true) in float64:
router logits h . W_gate_inp^T, softmax over all experts, the top 2 by probability (a
stable sort: equal values to the lower id), their probabilities divided by their sum, the
output sum_j w_j * down_j(silu(gate_j h) * up_j h); attention as Qwen3 (RMSNorm of each
head of q and k before RoPE).

Two files: `qwen3moe-f32.gguf` (every tensor f32) and `qwen3moe-q8_0.gguf` (every matrix
but the router Q8_0, quantized by `gguf.quants`, as llama-quantize leaves ffn_gate_inp f32);
each file's reference runs on its own weights as `gguf.quants.dequantize` reads them.
`reference.json` holds, per file, the logits of every position of fixed token sequences,
32 greedy tokens after a fixed prompt, and the smallest margins met: between the two largest
logits of any argmax, and between the 2nd and 3rd router logits of any token in any layer
(a near tie there would let float32 rounding pick another expert). Seeds are tried in order
until both margins are clear for the f32 file; the Q8_0 file's are recorded.

Usage: python3 tools/oracles/qwen3moe_oracle.py tests/data/qwen3moe
Needs `gguf` and `numpy`.
"""
import importlib.metadata
import json
import math
import sys
from pathlib import Path

import gguf
import numpy as np
from gguf.quants import dequantize, quantize

SEED = 4800
N_LAYERS, DIM, N_HEADS, N_KV, HEAD = 2, 64, 4, 2, 32
N_EXPERTS, N_USED, EXPERT_FF, DENSE_FF = 8, 2, 32, 96
VOCAB, CONTEXT, THETA, EPS = 96, 256, 1e6, 1e-6
CASES = [[1, 17, 42, 3, 9], [5, 60, 2, 33, 33, 8, 14, 27, 50, 1, 0, 95, 12, 19, 44, 7, 30, 22, 9, 41, 88, 70, 61, 3]]
PROMPT = [3, 14, 15, 9, 26, 5, 35, 8, 90, 79]
NEW_TOKENS = 32
# Smallest gap between the two largest logits of an argmax, relative to the largest |logit|,
# and between the 2nd and 3rd router logits of a token, relative to the largest |router logit|
# of that token: a hundred times and more the engine's float32 error.
MIN_MARGIN = 1e-4
MIN_ROUTER_MARGIN = 1e-3


def random_weights(rng):
    """Numpy-order float32 weights: embeddings ~ N(0, 1), matrices ~ 1.5 N(0, 1 / fan_in), norms 1 +- 0.2."""
    def matrix(*shape):
        return (1.5 * rng.standard_normal(shape) / math.sqrt(shape[-1])).astype(np.float32)

    def norm(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    w = {"token_embd.weight": rng.standard_normal((VOCAB, DIM)).astype(np.float32)}
    for il in range(N_LAYERS):
        p = f"blk.{il}."
        w[p + "attn_norm.weight"] = norm(DIM)
        w[p + "attn_q.weight"] = matrix(N_HEADS * HEAD, DIM)
        w[p + "attn_k.weight"] = matrix(N_KV * HEAD, DIM)
        w[p + "attn_v.weight"] = matrix(N_KV * HEAD, DIM)
        w[p + "attn_q_norm.weight"] = norm(HEAD)
        w[p + "attn_k_norm.weight"] = norm(HEAD)
        w[p + "attn_output.weight"] = matrix(DIM, N_HEADS * HEAD)
        w[p + "ffn_norm.weight"] = norm(DIM)
        w[p + "ffn_gate_inp.weight"] = matrix(N_EXPERTS, DIM)
        w[p + "ffn_gate_exps.weight"] = matrix(N_EXPERTS, EXPERT_FF, DIM)
        w[p + "ffn_up_exps.weight"] = matrix(N_EXPERTS, EXPERT_FF, DIM)
        w[p + "ffn_down_exps.weight"] = matrix(N_EXPERTS, DIM, EXPERT_FF)
    w["output_norm.weight"] = norm(DIM)
    w["output.weight"] = matrix(VOCAB, DIM)
    return w


def quantized(name, array):
    """Q8_0 for every matrix but the router and the norms, as llama-quantize's Q8_0 does."""
    return array.ndim >= 2 and "ffn_gate_inp" not in name


def write_gguf(path, weights, q8):
    w = gguf.GGUFWriter(str(path), "qwen3moe")
    w.add_name(path.stem)
    w.add_block_count(N_LAYERS)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(DENSE_FF)
    w.add_head_count(N_HEADS)
    w.add_head_count_kv(N_KV)
    w.add_key_length(HEAD)
    w.add_value_length(HEAD)
    w.add_rope_freq_base(THETA)
    w.add_layer_norm_rms_eps(EPS)
    w.add_expert_count(N_EXPERTS)
    w.add_expert_used_count(N_USED)
    w.add_expert_feed_forward_length(EXPERT_FF)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if q8 else gguf.LlamaFileType.ALL_F32)
    stored = {}
    for name, array in weights.items():
        if q8 and quantized(name, array):
            data = quantize(array, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(name, data, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            stored[name] = dequantize(data, gguf.GGMLQuantizationType.Q8_0).reshape(array.shape)
        else:
            w.add_tensor(name, array)
            stored[name] = array
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {name: a.astype(np.float64) for name, a in stored.items()}


def read_back(path):
    """The file's tensors as the gguf package reads and dequantizes them, float64, numpy order."""
    reader = gguf.GGUFReader(str(path))
    return {t.name: dequantize(t.data, t.tensor_type).reshape([int(d) for d in reversed(t.shape)]).astype(np.float64)
            for t in reader.tensors}


def rmsnorm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def rope(x, positions):  # x: (T, heads, HEAD); rotates halves (x[i], x[i + HEAD/2])
    half = HEAD // 2
    freqs = THETA ** (-np.arange(0, HEAD, 2, dtype=np.float64) / HEAD)
    angles = positions[:, None] * freqs[None, :]
    cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)


def silu(x):
    return x / (1.0 + np.exp(-x))


def experts(w, p, h, router_margins):
    """Qwen3MoeSparseMoeBlock on the rows of h (T, DIM)."""
    logits = h @ w[p + "ffn_gate_inp.weight"].T
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        order = np.argsort(-probs[t], kind="stable")
        ranked = np.sort(logits[t])[::-1]
        router_margins.append((ranked[N_USED - 1] - ranked[N_USED]) / np.abs(logits[t]).max())
        chosen = order[:N_USED]
        weights = probs[t, chosen] / probs[t, chosen].sum()
        for e, weight in zip(chosen, weights):
            gate = w[p + "ffn_gate_exps.weight"][e] @ h[t]
            up = w[p + "ffn_up_exps.weight"][e] @ h[t]
            out[t] += weight * (w[p + "ffn_down_exps.weight"][e] @ (silu(gate) * up))
    return out


def forward(w, ids, router_margins):
    """Logits of every position, (T, VOCAB) float64."""
    T = len(ids)
    positions = np.arange(T, dtype=np.float64)
    mask = np.where(np.arange(T)[None, :] <= np.arange(T)[:, None], 0.0, -np.inf)
    x = w["token_embd.weight"][ids]
    for il in range(N_LAYERS):
        p = f"blk.{il}."
        h = rmsnorm(x, w[p + "attn_norm.weight"])
        q = rope(rmsnorm((h @ w[p + "attn_q.weight"].T).reshape(T, N_HEADS, HEAD), w[p + "attn_q_norm.weight"]), positions)
        k = rope(rmsnorm((h @ w[p + "attn_k.weight"].T).reshape(T, N_KV, HEAD), w[p + "attn_k_norm.weight"]), positions)
        v = (h @ w[p + "attn_v.weight"].T).reshape(T, N_KV, HEAD)
        out = np.empty((T, N_HEADS, HEAD))
        for hd in range(N_HEADS):
            kv = hd // (N_HEADS // N_KV)
            scores = q[:, hd, :] @ k[:, kv, :].T / math.sqrt(HEAD) + mask
            scores = np.exp(scores - scores.max(axis=1, keepdims=True))
            out[:, hd, :] = (scores / scores.sum(axis=1, keepdims=True)) @ v[:, kv, :]
        x = x + out.reshape(T, N_HEADS * HEAD) @ w[p + "attn_output.weight"].T
        x = x + experts(w, p, rmsnorm(x, w[p + "ffn_norm.weight"]), router_margins)
    return rmsnorm(x, w["output_norm.weight"]) @ w["output.weight"].T


def margin(rows):
    top = np.sort(rows, axis=-1)[..., -2:]
    return float(((top[..., 1] - top[..., 0]) / np.abs(rows).max(axis=-1)).min())


def reference(w):
    """Cases, greedy tokens and the smallest margins met on the way."""
    router_margins, logit_margins, cases = [], [], []
    for tokens in CASES:
        logits = forward(w, tokens, router_margins)
        logit_margins.append(margin(logits))
        cases.append({"tokens": tokens, "argmax": [int(i) for i in logits.argmax(axis=1)],
                      "logits": [[float(f"{x:.9g}") for x in row] for row in logits]})
    ids, greedy = list(PROMPT), []
    for _ in range(NEW_TOKENS):  # the whole sequence each step: no cache to get wrong
        row = forward(w, ids, router_margins)[-1]
        logit_margins.append(margin(row))
        greedy.append(int(np.argmax(row)))
        ids.append(greedy[-1])
    return {"cases": cases, "prompt": PROMPT, "greedy": greedy,
            "min_logit_margin": min(logit_margins), "min_router_margin": float(min(router_margins))}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for attempt in range(200):
        seed = SEED + attempt
        weights = random_weights(np.random.default_rng(seed))
        f32 = write_gguf(out / "qwen3moe-f32.gguf", weights, q8=False)
        result = reference(f32)
        print(f"seed {seed}: margins logit {result['min_logit_margin']:.2e} router {result['min_router_margin']:.2e}",
              file=sys.stderr)
        if result["min_logit_margin"] >= MIN_MARGIN and result["min_router_margin"] >= MIN_ROUTER_MARGIN:
            break
    else:
        sys.exit("no seed without near ties")
    references = {"qwen3moe-f32.gguf": result}
    q8 = write_gguf(out / "qwen3moe-q8_0.gguf", weights, q8=True)
    references["qwen3moe-q8_0.gguf"] = reference(q8)
    # the files hold what the references ran on
    for name, stored in (("qwen3moe-f32.gguf", f32), ("qwen3moe-q8_0.gguf", q8)):
        back = read_back(out / name)
        assert all(np.array_equal(back[k], stored[k]) for k in stored), name
    json.dump({"source": f"tools/oracles/qwen3moe_oracle.py, numpy {np.__version__} float64, "
                         f"gguf {importlib.metadata.version('gguf')}",
               "seed": seed, "n_experts": N_EXPERTS, "n_experts_used": N_USED, "expert_feed_forward_length": EXPERT_FF,
               "files": references}, (out / "reference.json").open("w"), indent=1)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
