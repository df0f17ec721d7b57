#!/usr/bin/env python3
"""Token ids of the real Gemma 3 270M file's 262,144-piece SentencePiece vocabulary, made by
Hugging Face `transformers`' tokenizer built from the file (gemma3_vocabulary.py), for
test_cli_tokenize: code, runs of spaces (Gemma stores pieces of 2-31 spaces as user-defined
pieces spelled with real spaces), tabs and newlines, digits, accents, emoji and CJK (byte
fallback), and control-token spellings: `ids` as plain text (the CLI's default, no special
parsing; `tokenizers`' encode_special_tokens), `special_ids` with control tokens matched
(`--parse-special`, transformers' default).

Usage: python3 tools/oracles/gemma3_tokenizer_oracle.py REAL_MODELS_DIR > tests/data/gemma3_tokenizer_oracle.json
Needs `gguf`, `transformers` and `tokenizers` (not torch).
"""
import json
import os
import sys

from gguf import GGUFReader

from gemma3_vocabulary import gemma3_tokenizer

NAME = "gemma-3-270m-q4_k_m.gguf"
TEXTS = [
    "def f():",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
    "Hello world, 12345 tokens!",
    "  indented\tand\n\nnewlines  ",
    "class A:\n    def __init__(self):\n        self.x = [1, 2, 3]\n\n\n\n",
    " " * 40 + "x" + "\t\t\ty\n" + " " * 7,
    "café naïve — ünïcödé 🚀 日本語 \u00a0nbsp",
    "<start_of_turn>user\nhi<end_of_turn> <bos>",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); }\n",
    "\u0000\u0001 \x7f \ud7ff \U0001f600\U0001f601",
]


reader = GGUFReader(os.path.join(sys.argv[1], NAME))
tok = gemma3_tokenizer(reader)


def ids(text, parse_special):
    tok.encode_special_tokens = not parse_special
    return tok.encode(text, add_special_tokens=False).ids


out = {"script": "tools/oracles/gemma3_tokenizer_oracle.py", "file": NAME,
       "bos": reader.fields["tokenizer.ggml.bos_token_id"].contents(),
       "cases": [{"text": t, "ids": ids(t, False), "special_ids": ids(t, True)} for t in TEXTS]}
json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
print()
