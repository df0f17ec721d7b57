#!/usr/bin/env python3
"""Tiny random-weight models of the llama, qwen2 and qwen3 architectures, with their
reference outputs from Hugging Face transformers (float32, CPU).

Four models, each a Hugging Face directory (config.json + model.safetensors, bf16 as the
real checkpoints are) and a GGUF file written by the `gguf` package the way llama.cpp's
convert_hf_to_gguf.py writes these architectures (--outtype f16: matrices f16, norms and
biases f32; llama's q/k rows and biases permuted, Qwen's not; llama3 scaling as the
rope_freqs.weight tensor; tied output as a missing output.weight):

- llama-linear: attention biases on q, k, v and o, linear RoPE scaling with factor 4 as
  in DeepSeek-Coder, separate output matrix; config.json in the classic form
  (rope_theta + rope_scaling {"type": "linear"}) of the files people download.
- llama3: llama3 RoPE scaling (factor 8, low/high frequency factors 1 and 4, original
  context 128, so the 4 rotary pairs of a head fall on both sides of the blend and in
  it), tied output; classic config.json ({"rope_type": "llama3", ...}).
- qwen2: q, k, v biases, tied output; config.json as transformers 5 writes it
  (rope_parameters).
- qwen3: per-head q/k RMSNorm, heads 16 wide where dim / n_heads is 8 (q is 64 wide in a
  32-wide model), separate output matrix; transformers 5's config.json.

Weights are drawn from a fixed seed at a scale that gives logits with clear maxima, then
rounded to bf16 values that f16 holds exactly, so the safetensors (bf16) and GGUF (f16)
files hold the same numbers the float32 reference ran on. For each model, reference.json
holds, for fixed token sequences, the last position's logits and every position's argmax,
and 32 tokens of greedy `generate` after a fixed prompt; the script refuses (asks for
another seed) when any of those argmaxes is a near tie.

Usage: python3 tools/oracles/arch_oracles.py tests/data/arch_oracles
(development only: pip install torch transformers gguf safetensors numpy)
"""
import importlib.metadata
import json
import math
import shutil
import sys
from pathlib import Path

import gguf
import numpy as np
import torch
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)

SEED = 1234
SIZES = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=64, max_position_embeddings=256, rms_norm_eps=1e-6)
CASES = [[1, 17, 42, 3, 9], [5, 60, 2, 33, 33, 8, 14, 27, 50, 1, 0, 63, 12, 19, 44, 7, 30, 22, 9, 41]]
PROMPT = [3, 14, 15, 9, 26, 5, 35, 8]
NEW_TOKENS = 32
# Smallest gap allowed between the two largest logits of any argmax, relative to the
# largest |logit|: a hundred times the engine's float32 error, so argmaxes are not ties.
MIN_MARGIN = 1e-4

MODELS = {
    "llama-linear": dict(
        arch=gguf.MODEL_ARCH.LLAMA, cls=LlamaForCausalLM,
        config=lambda: LlamaConfig(**SIZES, attention_bias=True, tie_word_embeddings=False,
                                   rope_parameters={"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}),
        classic_rope={"rope_theta": 10000.0, "rope_scaling": {"factor": 4.0, "type": "linear"}}),
    "llama3": dict(
        arch=gguf.MODEL_ARCH.LLAMA, cls=LlamaForCausalLM,
        config=lambda: LlamaConfig(**SIZES, tie_word_embeddings=True, rope_parameters={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 128, "rope_theta": 10000.0}),
        classic_rope={"rope_theta": 10000.0, "rope_scaling": {
            "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 128, "rope_type": "llama3"}}),
    "qwen2": dict(
        arch=gguf.MODEL_ARCH.QWEN2, cls=Qwen2ForCausalLM,
        config=lambda: Qwen2Config(**SIZES, tie_word_embeddings=True,
                                   rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "qwen3": dict(
        arch=gguf.MODEL_ARCH.QWEN3, cls=Qwen3ForCausalLM,
        config=lambda: Qwen3Config(**SIZES, head_dim=16, tie_word_embeddings=False,
                                   rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
}


def exact_in_bf16_and_f16(t: torch.Tensor) -> torch.Tensor:
    t = t.to(torch.bfloat16).to(torch.float32)
    return torch.where(t.abs() < 2.0 ** -14, torch.zeros_like(t), t)


def randomize(model: torch.nn.Module, generator: torch.Generator) -> None:
    """Embeddings ~ N(0, 1), matrices ~ N(0, 1 / fan_in) * 1.5, norms 1 ± 0.2, biases ~ N(0, 0.5)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator)
            if "embed_tokens" in name:
                value = noise
            elif name.endswith("norm.weight"):
                value = 1.0 + 0.2 * noise
            elif name.endswith(".bias"):
                value = 0.5 * noise
            else:
                value = 1.5 * noise / math.sqrt(p.shape[1])
            p.copy_(exact_in_bf16_and_f16(value))


def margin(logits: torch.Tensor) -> float:
    top = torch.topk(logits, 2, dim=-1).values
    return ((top[..., 0] - top[..., 1]) / logits.abs().max(dim=-1).values).min().item()


def reference(model: torch.nn.Module) -> dict | None:
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
    return {"cases": cases, "prompt": PROMPT, "greedy": [int(t) for t in out.sequences[0, len(PROMPT):]]}


def classic_config(directory: Path, rope: dict) -> None:
    """Rewrites config.json with rope_theta + rope_scaling, as older checkpoints have it."""
    path = directory / "config.json"
    config = json.loads(path.read_text())
    config.pop("rope_parameters", None)
    config.update(rope)
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's LlamaModel.permute: HF's rotate-halves rows to adjacent pairs."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def llama3_rope_factors(hparams: dict) -> np.ndarray:
    """llama.cpp's LlamaModel.generate_extra_tensors for rope_type llama3."""
    scaling = hparams.get("rope_scaling") or hparams["rope_parameters"]
    base = hparams.get("rope_theta", scaling.get("rope_theta", 10000.0))
    dim = hparams.get("head_dim", hparams["hidden_size"] // hparams["num_attention_heads"])
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor = scaling.get("factor", 8.0)
    low_freq_factor = scaling.get("low_freq_factor", 1.0)
    high_freq_factor = scaling.get("high_freq_factor", 4.0)
    old_context_len = scaling.get("original_max_position_embeddings", 8192)
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            factors.append(1)
        elif wavelen > low_freq_wavelen:
            factors.append(factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(factors, dtype=torch.float32).numpy()


def write_gguf(directory: Path, path: Path, arch: gguf.MODEL_ARCH, name: str) -> None:
    """What convert_hf_to_gguf.py --outtype f16 writes for these models, from the saved directory."""
    from safetensors.torch import load_file
    hparams = json.loads((directory / "config.json").read_text())
    tensors = load_file(directory / "model.safetensors")
    n_head, n_kv_head = hparams["num_attention_heads"], hparams["num_key_value_heads"]
    w = gguf.GGUFWriter(str(path), gguf.MODEL_ARCH_NAMES[arch])
    w.add_name(name)
    w.add_block_count(hparams["num_hidden_layers"])
    w.add_context_length(hparams["max_position_embeddings"])
    w.add_embedding_length(hparams["hidden_size"])
    w.add_feed_forward_length(hparams["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv_head)
    rope = hparams.get("rope_scaling") or hparams.get("rope_parameters") or {}
    w.add_rope_freq_base(hparams.get("rope_theta", rope.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(hparams["rms_norm_eps"])
    if hparams.get("head_dim") is not None:
        w.add_key_length(hparams["head_dim"])
        w.add_value_length(hparams["head_dim"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    if arch == gguf.MODEL_ARCH.LLAMA:
        w.add_vocab_size(hparams["vocab_size"])
        w.add_rope_dimension_count(hparams.get("head_dim", hparams["hidden_size"] // n_head))
        if rope.get("type", rope.get("rope_type")) == "linear":
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(rope["factor"])
        if rope.get("rope_type") == "llama3":
            w.add_tensor("rope_freqs.weight", llama3_rope_factors(hparams))
    names = gguf.get_tensor_name_map(arch, hparams["num_hidden_layers"])
    for hf_name, data in tensors.items():
        data = data.to(torch.float32).numpy()
        if arch == gguf.MODEL_ARCH.LLAMA and hf_name.endswith(("q_proj.weight", "q_proj.bias")):
            data = permute(data, n_head)
        if arch == gguf.MODEL_ARCH.LLAMA and hf_name.endswith(("k_proj.weight", "k_proj.bias")):
            data = permute(data, n_kv_head)
        gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        w.add_tensor(gguf_name, data.astype(np.float16) if data.ndim == 2 else data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    references = {}
    for index, (name, spec) in enumerate(MODELS.items()):
        # seeds SEED + 100 * index + attempt, until no argmax of the reference is a near tie
        for attempt in range(100):
            seed = SEED + 100 * index + attempt
            model = spec["cls"](spec["config"]()).eval()
            randomize(model, torch.Generator().manual_seed(seed))
            directory = out / name
            shutil.rmtree(directory, ignore_errors=True)
            model.to(torch.bfloat16).save_pretrained(directory, safe_serialization=True)
            (directory / "generation_config.json").unlink(missing_ok=True)
            if "classic_rope" in spec:
                classic_config(directory, spec["classic_rope"])
            # the reference runs on the model as read back from the directory, in float32
            model = spec["cls"].from_pretrained(directory, dtype=torch.float32).eval()
            result = reference(model)
            if result is not None:
                break
        else:
            sys.exit(f"{name}: no seed without near ties")
        references[name] = {"seed": seed, **result}
        write_gguf(directory, out / f"{name}.gguf", spec["arch"], name)
    json.dump({"source": f"tools/oracles/arch_oracles.py, transformers {transformers.__version__}, "
                         f"torch {torch.__version__}, gguf {importlib.metadata.version('gguf')}",
               "models": references}, (out / "reference.json").open("w"), indent=1)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
