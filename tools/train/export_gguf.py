"""Exports a trained demo model with its tokenizer as a GGUF file (architecture llama).

Weights keep the model's layout: rows are output features, and rotary pairs are adjacent
as GGUF expects, so wq and wk are written without permutation. The classifier is tied to
the embedding, so no output.weight tensor is written. Matrices are F16 or F32 as asked;
norm weights are always F32.

    python3 export_gguf.py --name target --type f16 --out ../../resources/models/specula-demo-target.gguf
"""
import argparse
import os

import gguf
import numpy as np
import sentencepiece as spm
import torch

from model import Config

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")

# model.py parameter name -> GGUF tensor name ({} is the layer index)
TENSOR_NAMES = {
    "token_embedding.weight": "token_embd.weight",
    "final_norm.weight": "output_norm.weight",
    "layers.{}.attn_norm.weight": "blk.{}.attn_norm.weight",
    "layers.{}.attn.wq.weight": "blk.{}.attn_q.weight",
    "layers.{}.attn.wk.weight": "blk.{}.attn_k.weight",
    "layers.{}.attn.wv.weight": "blk.{}.attn_v.weight",
    "layers.{}.attn.wo.weight": "blk.{}.attn_output.weight",
    "layers.{}.ffn_norm.weight": "blk.{}.ffn_norm.weight",
    "layers.{}.ffn.w_gate.weight": "blk.{}.ffn_gate.weight",
    "layers.{}.ffn.w_up.weight": "blk.{}.ffn_up.weight",
    "layers.{}.ffn.w_down.weight": "blk.{}.ffn_down.weight",
}


def gguf_name(parameter):
    parts = parameter.split(".")
    if parts[0] == "layers":
        return TENSOR_NAMES["layers.{}." + ".".join(parts[2:])].format(parts[1])
    return TENSOR_NAMES[parameter]


def token_type(processor, i):
    if processor.is_unknown(i):
        return gguf.TokenType.UNKNOWN
    if processor.is_control(i):
        return gguf.TokenType.CONTROL
    if processor.is_byte(i):
        return gguf.TokenType.BYTE
    if processor.is_unused(i):
        return gguf.TokenType.UNUSED
    return gguf.TokenType.NORMAL


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="work/<name>/ckpt.pt")
    parser.add_argument("--type", choices=("f16", "f32"), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--tokenizer", default="tokenizer.model",
                        help="in work/: tokenizer_fim.model for a model with fim.py's sentinels")
    options = parser.parse_args()

    checkpoint = torch.load(os.path.join(WORK, options.name, "ckpt.pt"), weights_only=False)
    config = Config(**checkpoint["config"])
    processor = spm.SentencePieceProcessor(model_file=os.path.join(WORK, options.tokenizer))
    assert processor.vocab_size() == config.vocab_size

    writer = gguf.GGUFWriter(options.out, "llama")
    title = os.path.splitext(os.path.basename(options.out))[0]
    writer.add_name(title)
    writer.add_description(f"{title}: a demo code model trained on the Python standard library "
                           f"and generated function tasks ({options.name}, step {checkpoint['step']})")
    writer.add_context_length(config.context_length)
    writer.add_embedding_length(config.dim)
    writer.add_block_count(config.n_layers)
    writer.add_feed_forward_length(config.hidden_dim)
    writer.add_head_count(config.n_heads)
    writer.add_head_count_kv(config.n_kv_heads)
    writer.add_rope_dimension_count(config.dim // config.n_heads)
    writer.add_rope_freq_base(config.rope_theta)
    writer.add_layer_norm_rms_eps(config.norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if options.type == "f16" else gguf.LlamaFileType.ALL_F32)

    writer.add_tokenizer_model("llama")
    writer.add_token_list([processor.id_to_piece(i).encode("utf-8") for i in range(config.vocab_size)])
    writer.add_token_scores([processor.get_score(i) for i in range(config.vocab_size)])
    writer.add_token_types([token_type(processor, i) for i in range(config.vocab_size)])
    writer.add_bos_token_id(processor.bos_id())
    writer.add_eos_token_id(processor.eos_id())
    writer.add_unk_token_id(processor.unk_id())
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(True)
    # StarCoder's fill-in-the-middle sentinels (fim.py), named as llama.cpp names them, and
    # the order fim.py trains: suffix first (SPM; llama.cpp's server needs --spm-infill for it)
    if processor.piece_to_id("<fim_middle>") != processor.unk_id():
        for key, piece in (("fim_pre", "<fim_prefix>"), ("fim_suf", "<fim_suffix>"), ("fim_mid", "<fim_middle>")):
            writer.add_uint32(f"tokenizer.ggml.{key}_token_id", processor.piece_to_id(piece))
        writer.add_string("specula.fim.order", "spm")

    for parameter, tensor in checkpoint["model"].items():
        array = tensor.float().numpy()
        if array.ndim == 2 and options.type == "f16":
            array = array.astype(np.float16)
        writer.add_tensor(gguf_name(parameter), array)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {options.out} ({os.path.getsize(options.out)} bytes, step {checkpoint['step']})")


if __name__ == "__main__":
    main()
