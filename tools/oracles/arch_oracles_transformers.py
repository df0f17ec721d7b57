#!/usr/bin/env python3
"""Tiny random-weight models of the starcoder2, gemma3 and qwen3moe architectures, with
their reference outputs from Hugging Face transformers (float32, CPU).

The sibling of arch_oracles.py for the architectures whose Hugging Face directories the
engine does not read: each model is made by transformers (Starcoder2ForCausalLM,
Gemma3ForCausalLM with a text-only config, Qwen3MoeForCausalLM) and written as the GGUF
llama.cpp's convert_hf_to_gguf.py --outtype f16 writes for it, with the `gguf` package:
matrices f16, norms and biases f32, the tensor names and metadata keys of the converter.

- starcoder2: LayerNorm with biases, q/k/v/o biases, the ungated c_fc -> gelu_pytorch_tanh
  -> c_proj feed-forward with biases, tied output, sliding_window 8 on every layer. The
  converter writes no window for starcoder2 (llama.cpp attends to every position); this
  file adds `starcoder2.attention.sliding_window`, which is what transformers applies.
- starcoder2-full: the same without a sliding window and with a separate output matrix,
  the file exactly as the converter writes it.
- gemma3: 6 layers (5 sliding with window 8 and RoPE base 10 000, the sixth global with
  base 1 000 000), query_pre_attn_scalar = head_dim as llama.cpp assumes but for the 27B,
  norm weights written with Gemma's 1 added as the converter does, tied output.
- qwen3moe: 8 experts of width 16, 2 used per token, norm_topk_prob; transformers 5's fused
  experts.gate_up_proj split into the converter's 3-D ffn_gate_exps and ffn_up_exps.

Weights are drawn from a fixed seed and rounded to bf16 values that f16 holds exactly, so
the GGUF holds what the float32 reference ran on. reference.json holds per model the
last-position logits and every position's argmax of two fixed sequences (the longer one
past the sliding window), and 32 tokens of greedy `generate` after a fixed prompt (prompt
and output 40 positions, five windows); seeds are tried in order until no argmax is a near
tie and, for qwen3moe, no router's k-th and (k+1)-th probabilities are either. For the
windowed models `window_effect` records how much the window changes the longer sequence's
last logits (the same weights with an unbounded window; the script insists on 1 %).

Usage: python3 tools/oracles/arch_oracles_transformers.py tests/data/arch_oracles_transformers
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
from transformers import (Gemma3ForCausalLM, Gemma3TextConfig, Qwen3MoeConfig, Qwen3MoeForCausalLM,
                          Starcoder2Config, Starcoder2ForCausalLM)

SEED = 4321
CASES = [[1, 17, 42, 3, 9], [5, 60, 2, 33, 33, 8, 14, 27, 50, 1, 0, 63, 12, 19, 44, 7, 30, 22, 9, 41]]
PROMPT = [3, 14, 15, 9, 26, 5, 35, 8]
NEW_TOKENS = 32
WINDOW = 8
MIN_MARGIN = 1e-4         # of an argmax's best two logits, relative to the largest |logit|
MIN_ROUTER_MARGIN = 1e-3  # of a router's k-th and (k+1)-th probabilities, relative to its largest

COMMON = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, vocab_size=64,
              max_position_embeddings=256)

MODELS = {
    "starcoder2": dict(
        cls=Starcoder2ForCausalLM,
        config=lambda: Starcoder2Config(**COMMON, intermediate_size=64, num_hidden_layers=2, norm_epsilon=1e-5,
                                        use_bias=True, sliding_window=WINDOW, tie_word_embeddings=True,
                                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    "starcoder2-full": dict(
        cls=Starcoder2ForCausalLM,
        config=lambda: Starcoder2Config(**COMMON, intermediate_size=64, num_hidden_layers=2, norm_epsilon=1e-5,
                                        use_bias=True, sliding_window=None, tie_word_embeddings=False,
                                        rope_parameters={"rope_type": "default", "rope_theta": 100000.0})),
    "gemma3": dict(
        cls=Gemma3ForCausalLM,
        config=lambda: Gemma3TextConfig(**COMMON, intermediate_size=16, num_hidden_layers=6, head_dim=8,
                                        query_pre_attn_scalar=8, sliding_window=WINDOW, rms_norm_eps=1e-6,
                                        tie_word_embeddings=True)),
    "qwen3moe": dict(
        cls=Qwen3MoeForCausalLM,
        config=lambda: Qwen3MoeConfig(**COMMON, intermediate_size=64, moe_intermediate_size=16, num_experts=8,
                                      num_experts_per_tok=2, norm_topk_prob=True, num_hidden_layers=2, head_dim=8,
                                      rms_norm_eps=1e-6, tie_word_embeddings=False,
                                      rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
}


def exact_in_bf16_and_f16(t: torch.Tensor) -> torch.Tensor:
    t = t.to(torch.bfloat16).to(torch.float32)
    return torch.where(t.abs() < 2.0 ** -14, torch.zeros_like(t), t)


def randomize(model: torch.nn.Module, generator: torch.Generator, gemma: bool) -> None:
    """Embeddings ~ N(0, 1), matrices ~ N(0, 1 / fan_in) * 1.5, norms 1 ± 0.2 (Gemma's stored
    offsets ± 0.2), biases ~ N(0, 0.5)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator)
            if "embed_tokens" in name:
                value = noise
            elif name.endswith("norm.weight"):
                value = 0.2 * noise if gemma else 1.0 + 0.2 * noise
            elif name.endswith(".bias"):
                value = 0.5 * noise
            else:
                value = 1.5 * noise / math.sqrt(p.shape[-1])
            p.copy_(exact_in_bf16_and_f16(value))


def margin(logits: torch.Tensor) -> float:
    top = torch.topk(logits, 2, dim=-1).values
    return ((top[..., 0] - top[..., 1]) / logits.abs().max(dim=-1).values).min().item()


class RouterWatch:
    """Records the smallest gap between the k-th and (k+1)-th router probabilities seen."""

    def __init__(self, model: torch.nn.Module):
        self.smallest = math.inf
        for layer in model.model.layers:
            if hasattr(layer.mlp, "gate") and hasattr(layer.mlp.gate, "top_k"):
                layer.mlp.gate.register_forward_hook(self.hook)

    def hook(self, module, inputs, outputs):
        probs = torch.softmax(outputs[0].float(), dim=-1)
        top = torch.sort(probs, dim=-1, descending=True).values
        k = module.top_k
        gap = ((top[:, k - 1] - top[:, k]) / top[:, 0]).min().item()
        self.smallest = min(self.smallest, gap)


def reference(model: torch.nn.Module) -> dict | None:
    """The model's reference outputs, or None when an argmax or a routing among them is a near tie."""
    watch = RouterWatch(model)
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
    greedy_margin = margin(torch.stack(out.scores)[:, 0])
    if greedy_margin < MIN_MARGIN or watch.smallest < MIN_ROUTER_MARGIN:
        return None
    result = {"cases": cases, "prompt": PROMPT, "greedy": [int(t) for t in out.sequences[0, len(PROMPT):]],
              "greedy_margin": float(f"{greedy_margin:.4g}")}
    if math.isfinite(watch.smallest):
        result["router_margin"] = float(f"{watch.smallest:.4g}")
    return result


def window_effect(model, spec) -> float:
    """How much the sliding window changes the longer case's last logits (relative): the
    same weights with the window widened past every position."""
    config = spec["config"]()
    config.sliding_window = 1024
    wide = spec["cls"](config).eval()
    wide.set_attn_implementation("eager")
    wide.load_state_dict(model.state_dict())
    with torch.no_grad():
        a = model(torch.tensor([CASES[1]])).logits[0, -1]
        b = wide(torch.tensor([CASES[1]])).logits[0, -1]
    return ((a - b).abs().max() / a.abs().max()).item()


def common_keys(w: gguf.GGUFWriter, config, name: str) -> None:
    """TextModel.set_gguf_parameters of the converter."""
    w.add_name(name)
    w.add_block_count(config.num_hidden_layers)
    w.add_context_length(config.max_position_embeddings)
    w.add_embedding_length(config.hidden_size)
    w.add_feed_forward_length(config.intermediate_size)
    w.add_head_count(config.num_attention_heads)
    w.add_head_count_kv(config.num_key_value_heads)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)


def rope_theta(config, layer_type: str = "full_attention") -> float:
    rope = config.rope_parameters
    return rope.get(layer_type, rope)["rope_theta"]


def add(w: gguf.GGUFWriter, name: str, t: torch.Tensor) -> None:
    """Matrices (2-D and 3-D) as f16, vectors as f32, as --outtype f16 writes them."""
    data = t.detach().to(torch.float32).numpy()
    w.add_tensor(name, data.astype(np.float16) if data.ndim >= 2 else data)


def write_starcoder2(model, w: gguf.GGUFWriter, name: str) -> None:
    c = model.config
    common_keys(w, c, name)
    w.add_rope_freq_base(rope_theta(c))
    w.add_layer_norm_eps(c.norm_epsilon)
    if c.sliding_window is not None:
        w.add_sliding_window(c.sliding_window)  # not written by the converter: see the docstring
    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down",
             "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    state = model.state_dict()
    add(w, "token_embd.weight", state["model.embed_tokens.weight"])
    for l in range(c.num_hidden_layers):
        for hf, gg in names.items():
            for kind in ("weight", "bias"):
                add(w, f"blk.{l}.{gg}.{kind}", state[f"model.layers.{l}.{hf}.{kind}"])
    add(w, "output_norm.weight", state["model.norm.weight"])
    add(w, "output_norm.bias", state["model.norm.bias"])
    if not c.tie_word_embeddings:
        add(w, "output.weight", state["lm_head.weight"])


def write_gemma3(model, w: gguf.GGUFWriter, name: str) -> None:
    c = model.config
    common_keys(w, c, name)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_rope_freq_base(rope_theta(c, "full_attention"))
    w.add_sliding_window(c.sliding_window)
    names = {"self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
             "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
             "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
             "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
             "mlp.down_proj.weight": "ffn_down.weight", "input_layernorm.weight": "attn_norm.weight",
             "post_attention_layernorm.weight": "post_attention_norm.weight",
             "pre_feedforward_layernorm.weight": "ffn_norm.weight",
             "post_feedforward_layernorm.weight": "post_ffw_norm.weight"}
    state = model.state_dict()
    # Gemma3Model.modify_tensors: every norm weight + 1
    plus_one = lambda t: t + 1.0
    add(w, "token_embd.weight", state["model.embed_tokens.weight"])
    for l in range(c.num_hidden_layers):
        for hf, gg in names.items():
            t = state[f"model.layers.{l}.{hf}"]
            add(w, f"blk.{l}.{gg}", plus_one(t) if hf.endswith("norm.weight") else t)
    add(w, "output_norm.weight", plus_one(state["model.norm.weight"]))


def write_qwen3moe(model, w: gguf.GGUFWriter, name: str) -> None:
    c = model.config
    common_keys(w, c, name)
    w.add_rope_freq_base(rope_theta(c))
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_expert_count(c.num_experts)
    w.add_expert_used_count(c.num_experts_per_tok)
    w.add_expert_feed_forward_length(c.moe_intermediate_size)
    names = {"self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
             "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
             "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
             "mlp.gate.weight": "ffn_gate_inp.weight", "input_layernorm.weight": "attn_norm.weight",
             "post_attention_layernorm.weight": "ffn_norm.weight"}
    state = model.state_dict()
    add(w, "token_embd.weight", state["model.embed_tokens.weight"])
    inter = c.moe_intermediate_size
    for l in range(c.num_hidden_layers):
        p = f"model.layers.{l}."
        for hf, gg in names.items():
            add(w, f"blk.{l}.{gg}", state[p + hf])
        gate_up = state[p + "mlp.experts.gate_up_proj"]  # (experts, 2 * inter, dim): gate rows, then up rows
        add(w, f"blk.{l}.ffn_gate_exps.weight", gate_up[:, :inter])
        add(w, f"blk.{l}.ffn_up_exps.weight", gate_up[:, inter:])
        add(w, f"blk.{l}.ffn_down_exps.weight", state[p + "mlp.experts.down_proj"])
    add(w, "output_norm.weight", state["model.norm.weight"])
    add(w, "output.weight", state["lm_head.weight"])


WRITERS = {"starcoder2": (gguf.MODEL_ARCH.STARCODER2, write_starcoder2),
           "gemma3": (gguf.MODEL_ARCH.GEMMA3, write_gemma3),
           "qwen3moe": (gguf.MODEL_ARCH.QWEN3MOE, write_qwen3moe)}


def write_gguf(model, path: Path, name: str) -> None:
    arch, writer = WRITERS[name.split("-")[0]]
    w = gguf.GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[arch])
    writer(model, w, name)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    references = {}
    for index, (name, spec) in enumerate(MODELS.items()):
        for attempt in range(200):
            seed = SEED + 1000 * index + attempt
            model = spec["cls"](spec["config"]()).eval()
            model.set_attn_implementation("eager")
            randomize(model, torch.Generator().manual_seed(seed), gemma=name.startswith("gemma"))
            result = reference(model)
            if result is not None:
                break
        else:
            sys.exit(f"{name}: no seed without near ties")
        references[name] = {"seed": seed, **result}
        if getattr(model.config, "sliding_window", None):
            effect = window_effect(model, spec)
            if effect < 1e-2:
                sys.exit(f"{name}: the sliding window changes the logits by only {effect}")
            references[name]["window_effect"] = float(f"{effect:.4g}")
        write_gguf(model, out / f"{name}.gguf", name)
        print(name, "seed", seed, "margin", result["greedy_margin"], result.get("router_margin", ""))
    json.dump({"source": f"tools/oracles/arch_oracles_transformers.py, transformers {transformers.__version__}, "
                         f"torch {torch.__version__}, gguf {importlib.metadata.version('gguf')}",
               "window": WINDOW, "models": references}, (out / "reference.json").open("w"), indent=1)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
