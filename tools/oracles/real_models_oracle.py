#!/usr/bin/env python3
"""Token ids of the real SmolLM2-135M-Instruct Q4_1 file's vocabulary, made by Hugging Face
`tokenizers` from the file's own tokenizer.ggml.tokens and merges with SmolLM2's published
pipeline (pre-tokenizer: every digit alone, then GPT-2's byte-level split; llama.cpp calls
it `smollm`), for test_cli_tokenize.

Usage: python3 tools/oracles/real_models_oracle.py REAL_MODELS_DIR > tests/data/real_models_oracle.json
(REAL_MODELS_DIR: the folder the shared data's models/real/fetch.sh fills). Needs `gguf` and
`tokenizers`.
"""
import json
import os
import sys

from gguf import GGUFReader
from tokenizers import Tokenizer, models, pre_tokenizers

NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXTS = [
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
    "Hello world, 12345 tokens!",
    "  indented\tand\n\nnewlines  ",
    "café naïve — ünïcödé 🚀 日本語",
    "<|im_start|>user\nhi<|im_end|>",
]


def strings(reader, key):
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


reader = GGUFReader(os.path.join(sys.argv[1], NAME))
tokens = strings(reader, "tokenizer.ggml.tokens")
merges = [tuple(m.split(" ", 1)) for m in strings(reader, "tokenizer.ggml.merges")]
tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
tok.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Digits(individual_digits=True),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
])
out = {"script": "tools/oracles/real_models_oracle.py", "file": NAME,
       "cases": [{"text": t, "ids": tok.encode(t).ids} for t in TEXTS]}
json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
print()
