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

from smollm2_vocabulary import smollm2_tokenizer

NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXTS = [
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
    "Hello world, 12345 tokens!",
    "  indented\tand\n\nnewlines  ",
    "café naïve — ünïcödé 🚀 日本語",
    "<|im_start|>user\nhi<|im_end|>",
]


reader = GGUFReader(os.path.join(sys.argv[1], NAME))
tok = smollm2_tokenizer(reader)
out = {"script": "tools/oracles/real_models_oracle.py", "file": NAME,
       "cases": [{"text": t, "ids": tok.encode(t).ids} for t in TEXTS]}
json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
print()
