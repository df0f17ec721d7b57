#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_gguf with the `gguf` package (llama.cpp's writer):
small files with every metadata value type, a vocabulary, and one tensor of each type.
Usage: python3 tests/fuzz/make_corpus.py tests/fuzz/corpus"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter, quants


def write(path: str, alignment: int, with_tensors: bool) -> None:
    w = GGUFWriter(path, "llama")
    if alignment != 32:
        w.add_custom_alignment(alignment)
    w.add_uint8("t.u8", 7)
    w.add_int16("t.i16", -3)
    w.add_uint64("t.u64", 1 << 40)
    w.add_float64("t.f64", 0.5)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "▁hello")
    w.add_array("t.nested", [[1, 2], [3]])
    w.add_tokenizer_model("llama")
    w.add_token_list(["<unk>", "<s>", "</s>", "▁a", "b"])
    w.add_token_scores([0.0, 0.0, 0.0, -1.0, -2.0])
    w.add_token_types([2, 3, 3, 1, 1])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    if with_tensors:
        x = np.linspace(-1, 1, 256, dtype=np.float32).reshape(1, 256)
        w.add_tensor("f32", x[:, :8].copy())
        w.add_tensor("f16", x[:, :8].astype(np.float16))
        for t in (GGMLQuantizationType.Q8_0, GGMLQuantizationType.Q4_0):
            w.add_tensor(t.name.lower(), quants.quantize(x[:, :64].copy(), t), raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


out = sys.argv[1]
os.makedirs(out, exist_ok=True)
write(os.path.join(out, "tensors.gguf"), 32, True)
write(os.path.join(out, "align8.gguf"), 8, True)
write(os.path.join(out, "vocab_only.gguf"), 32, False)
