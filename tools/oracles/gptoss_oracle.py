#!/usr/bin/env python3
"""A tiny random-weight `gpt-oss` model (GptOssForCausalLM, the architecture of gpt-oss-20b)
and its reference outputs from Hugging Face transformers (float32, CPU, eager attention).

The model: 4 layers (sliding, full, sliding, full: transformers' and llama.cpp's
alternation), dim 64, 4 query heads of 16 over 2 KV heads, q/k/v/o biases, a learned sink
logit per head, a sliding window of 8 positions (the cases and the greedy run are 20 and 40
positions long), YaRN RoPE as gpt-oss-20b has it (theta 150 000, factor 32, beta 32/1,
original context 4096, truncate false, so the ramp between interpolated and extrapolated
frequencies falls between the 8 rotary pairs of a head, not on them), 8 experts of width 32
with 3 used per token (router with a bias, top 3 of the logits then softmax over them),
experts with biases and the clamped SwiGLU (alpha 1.702, limit 7; the gate and up weights
are drawn wide enough that the clamps act on many values), RMSNorm, a separate output.

Weights are drawn from a fixed seed and rounded to bf16 values that f16 holds exactly, so
every file below holds the numbers the float32 reference ran on. The GGUF files are what
llama.cpp's convert_hf_to_gguf.py (GptOssModel) writes: the interleaved gate_up_proj split
into ffn_gate_exps and ffn_up_exps (columns 0, 2, 4, ... and 1, 3, 5, ...), experts stored
(n_experts, rows, cols), biases as ffn_*_exps.bias, the router as ffn_gate_inp(.bias), the
sinks as attn_sinks.weight, post_attention_layernorm as post_attention_norm; rope.scaling.*
keys; a small GPT-2 style byte-level BPE vocabulary (256 bytes + 16 merges) so that the
file carries a tokenizer:

- gptoss-f32.gguf: every tensor f32.
- gptoss-f16.gguf: matrices (and the 3-D experts) f16, 1-D tensors, the router and the
  expert biases f32 (--outtype f16).
- gptoss-mxfp4.gguf: as f16, but the expert matrices MXFP4 as in the released files; its
  reference is the same transformers model with the experts replaced by the MXFP4 values.

reference.json holds, per weight set, the last position's logits and every position's
argmax of fixed token sequences, and 32 tokens of greedy `generate` after a fixed prompt;
the script refuses a seed where any of those argmaxes is a near tie.

Usage: python3 tools/oracles/gptoss_oracle.py tests/data/gptoss
(development only: pip install torch transformers gguf numpy)
"""
import importlib.metadata
import json
import math
import sys
from pathlib import Path

import gguf
import numpy as np
import torch
import transformers
from gguf.quants import dequantize, quantize
from transformers import GptOssConfig, GptOssForCausalLM

SEED = 4321
N_LAYERS, DIM, N_HEADS, N_KV, HEAD, EXPERTS, USED, EXPERT_FF, WINDOW = 4, 64, 4, 2, 16, 8, 3, 32, 8
ROPE = {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
        "original_max_position_embeddings": 4096, "rope_theta": 150000.0}
CONTEXT = 131072
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("e", "r"), ("Ġ", "a"), ("o", "n"), ("r", "e"),
          ("Ġ", "s"), ("e", "n"), ("a", "t"), ("o", "r"), ("Ġ", "c"), ("e", "s"), ("Ġ", "w"), ("Ġ", "o")]
VOCAB = 256 + len(MERGES)
CASES = [[1, 17, 42, 3, 9], [5, 260, 2, 33, 33, 8, 14, 27, 50, 1, 0, 263, 12, 19, 44, 7, 30, 22, 9, 41]]
PROMPT = [3, 14, 15, 9, 26, 5, 35, 8]
NEW_TOKENS = 32
MIN_MARGIN = 1e-4  # smallest gap between the two largest logits of an argmax, relative to the largest |logit|


def byte_tokens():
    """GPT-2's bytes_to_unicode: the printable character standing for each byte, by byte value."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def config():
    return GptOssConfig(vocab_size=VOCAB, hidden_size=DIM, intermediate_size=EXPERT_FF, num_hidden_layers=N_LAYERS,
                        num_attention_heads=N_HEADS, num_key_value_heads=N_KV, head_dim=HEAD,
                        num_local_experts=EXPERTS, num_experts_per_tok=USED, sliding_window=WINDOW,
                        max_position_embeddings=CONTEXT, rms_norm_eps=1e-5, rope_parameters=dict(ROPE),
                        tie_word_embeddings=False, attention_bias=True, attn_implementation="eager")


def exact_in_bf16_and_f16(t):
    t = t.to(torch.bfloat16).to(torch.float32)
    return torch.where(t.abs() < 2.0 ** -14, torch.zeros_like(t), t)


def randomize(model, generator):
    """Embeddings ~ N(0, 1), norms 1 ± 0.2, biases ~ N(0, 0.5), sinks ~ N(0, 1), matrices
    ~ N(0, 1 / fan_in) * 1.5 (the experts' gate_up * 4, so that |gate| and |up| pass 7)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator)
            if "embed_tokens" in name or name.endswith("sinks"):
                value = noise
            elif name.endswith("norm.weight"):
                value = 1.0 + 0.2 * noise
            elif name.endswith("bias"):
                value = 0.5 * noise
            elif name.endswith("gate_up_proj"):
                value = 4.0 * noise / math.sqrt(p.shape[1])
            else:
                value = 1.5 * noise / math.sqrt(p.shape[1])
            p.copy_(exact_in_bf16_and_f16(value))


def margin(logits):
    top = torch.topk(logits, 2, dim=-1).values
    return ((top[..., 0] - top[..., 1]) / logits.abs().max(dim=-1).values).min().item()


def clamped_fraction(model, tokens):
    """The fraction of the experts' gate and up values that the clamps change, over a case."""
    counts = []

    def counting(experts, gate_up):
        gate, up = gate_up[..., ::2], gate_up[..., 1::2]
        counts.append((int((gate > 7).sum() + (up.abs() > 7).sum()), gate.numel() + up.numel()))
        return type(experts)._apply_gate(experts, gate_up)

    for layer in model.model.layers:
        layer.mlp.experts._apply_gate = lambda gate_up, e=layer.mlp.experts: counting(e, gate_up)
    with torch.no_grad():
        model(torch.tensor([tokens]))
    for layer in model.model.layers:
        del layer.mlp.experts._apply_gate
    return sum(c for c, _ in counts) / sum(n for _, n in counts)


def reference(model):
    """The model's reference outputs, or None when an argmax among them is a near tie."""
    cases = []
    for tokens in CASES:
        with torch.no_grad():
            logits = model(torch.tensor([tokens])).logits[0].float()
        if margin(logits) < MIN_MARGIN:
            return None
        cases.append({"tokens": tokens, "argmax": [int(i) for i in logits.argmax(dim=-1)],
                      "last_logits": [float(f"{x:.8g}") for x in logits[-1]]})
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        out = model.generate(torch.tensor([PROMPT]), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                             do_sample=False, output_scores=True, return_dict_in_generate=True)
    if margin(torch.stack(out.scores)[:, 0]) < MIN_MARGIN:
        return None
    return {"cases": cases, "prompt": PROMPT, "greedy": [int(t) for t in out.sequences[0, len(PROMPT):]],
            "clamped_fraction": clamped_fraction(model, CASES[1])}


def gguf_tensors(model):
    """(name, float32 array) as GptOssModel.modify_tensors names and lays them out."""
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GPT_OSS, N_LAYERS)
    out = []
    for hf_name, t in model.state_dict().items():
        data = t.to(torch.float32)
        if hf_name.endswith("sinks"):
            out.append((names.get_name(hf_name) + ".weight", data))
            continue
        if "gate_up_proj" in hf_name:  # interleaved: gate in even columns, up in odd ones
            if hf_name.endswith("_bias"):
                base = hf_name.replace("gate_up_proj_bias", "")
                out.append((names.get_name(base + "gate_proj") + ".bias", data[..., ::2]))
                out.append((names.get_name(base + "up_proj") + ".bias", data[..., 1::2]))
            else:
                data = data.transpose(-1, -2)  # (experts, 2 * ff, dim)
                base = hf_name.replace("gate_up_proj", "")
                out.append((names.get_name(base + "gate_proj") + ".weight", data[:, ::2, :]))
                out.append((names.get_name(base + "up_proj") + ".weight", data[:, 1::2, :]))
            continue
        if "down_proj" in hf_name:
            if hf_name.endswith("_bias"):
                out.append((names.get_name(hf_name.replace("down_proj_bias", "down_proj")) + ".bias", data))
            else:
                out.append((names.get_name(hf_name) + ".weight", data.transpose(-1, -2)))  # (experts, dim, ff)
            continue
        out.append((names.get_name(hf_name, try_suffixes=(".weight", ".bias")), data))
    return [(name, d.contiguous().numpy()) for name, d in out]


def storage_type(name, array, kind):
    """What the file stores a tensor as: --outtype f16 keeps 1-D tensors, the router and the
    2-D expert biases f32; the MXFP4 file also has its expert matrices in MXFP4."""
    if kind == "f32" or array.ndim == 1 or "ffn_gate_inp" in name or name.endswith("exps.bias"):
        return gguf.GGMLQuantizationType.F32
    if kind == "mxfp4" and name.endswith("exps.weight"):
        return gguf.GGMLQuantizationType.MXFP4
    return gguf.GGMLQuantizationType.F16


def write_gguf(path, tensors, kind):
    """Writes the file; returns the tensors as stored (MXFP4 values dequantized)."""
    w = gguf.GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.GPT_OSS])
    w.add_name(path.stem)
    w.add_block_count(N_LAYERS)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(EXPERT_FF)
    w.add_head_count(N_HEADS)
    w.add_head_count_kv(N_KV)
    w.add_rope_freq_base(ROPE["rope_theta"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_expert_count(EXPERTS)
    w.add_expert_used_count(USED)
    w.add_key_length(HEAD)
    w.add_value_length(HEAD)
    w.add_file_type({"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                     "mxfp4": gguf.LlamaFileType.MOSTLY_MXFP4_MOE}[kind])
    w.add_sliding_window(WINDOW)
    w.add_expert_feed_forward_length(EXPERT_FF)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(ROPE["factor"])
    w.add_rope_scaling_orig_ctx_len(ROPE["original_max_position_embeddings"])
    tokens = byte_tokens() + [a + b for a, b in MERGES]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.NORMAL] * len(tokens))
    w.add_token_merges([f"{a} {b}" for a, b in MERGES])
    stored = {}
    for name, array in tensors:
        qtype = storage_type(name, array, kind)
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, array.astype(np.float32))
            stored[name] = array
        elif qtype == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, array.astype(np.float16))
            stored[name] = array
        else:
            data = quantize(array, qtype)
            w.add_tensor(name, data, raw_dtype=qtype)
            stored[name] = dequantize(data, qtype).reshape(array.shape)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return stored


def with_experts_of(model, stored):
    """A copy of the model whose expert matrices are the stored (MXFP4) values."""
    copy = GptOssForCausalLM(config()).eval()
    copy.load_state_dict(model.state_dict())
    with torch.no_grad():
        for il, layer in enumerate(copy.model.layers):
            p = f"blk.{il}."
            gate = torch.from_numpy(stored[p + "ffn_gate_exps.weight"]).transpose(-1, -2)  # (experts, dim, ff)
            up = torch.from_numpy(stored[p + "ffn_up_exps.weight"]).transpose(-1, -2)
            gate_up = torch.empty_like(layer.mlp.experts.gate_up_proj)
            gate_up[..., ::2], gate_up[..., 1::2] = gate, up
            layer.mlp.experts.gate_up_proj.copy_(gate_up)
            layer.mlp.experts.down_proj.copy_(torch.from_numpy(stored[p + "ffn_down_exps.weight"]).transpose(-1, -2))
    return copy


def main(out):
    out.mkdir(parents=True, exist_ok=True)
    for attempt in range(100):
        seed = SEED + attempt
        model = GptOssForCausalLM(config()).eval()
        randomize(model, torch.Generator().manual_seed(seed))
        result = reference(model)
        if result is not None:
            break
    else:
        sys.exit("no seed without near ties")
    tensors = gguf_tensors(model)
    write_gguf(out / "gptoss-f32.gguf", tensors, "f32")
    write_gguf(out / "gptoss-f16.gguf", tensors, "f16")
    stored = write_gguf(out / "gptoss-mxfp4.gguf", tensors, "mxfp4")
    mxfp4 = reference(with_experts_of(model, stored))
    if mxfp4 is None:
        sys.exit("the MXFP4 experts give a near tie; try another seed")
    references = {"gptoss-f32.gguf": result, "gptoss-f16.gguf": result, "gptoss-mxfp4.gguf": mxfp4}
    for name, r in references.items():
        print(name, "greedy", r["greedy"][:8], "clamped", round(r["clamped_fraction"], 3), file=sys.stderr)
    json.dump({"source": f"tools/oracles/gptoss_oracle.py, transformers {transformers.__version__}, "
                         f"torch {torch.__version__}, gguf {importlib.metadata.version('gguf')}",
               "seed": seed, "sliding_window": WINDOW, "files": references},
              (out / "reference.json").open("w"), indent=1)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
