#!/usr/bin/env python3
"""Reference logits of TinyStories-656K from Hugging Face transformers (float32, CPU).

For three fixed token sequences, records the full logits of the last position and the
argmax at every position, for checking the engine's forward pass on the Hugging Face
loader's weights (which permute wq/wk for the engine's rotary layout).

Usage: python3 tools/oracles/hf_logits.py MODEL_DIR > tests/data/tinystories656k_logits.json
(MODEL_DIR is the shared models/tinystories656k directory).
"""
import json
import sys

import torch
from transformers import AutoTokenizer, LlamaForCausalLM

TEXTS = [
    "Once upon a time, there was a little girl named Lily.",
    "The dog ran to the park and saw a big red ball. He was very happy",
    "Tom",
]


def main(model_dir: str) -> None:
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = LlamaForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    cases = []
    for text in TEXTS:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"][:19]
        ids = [tokenizer.bos_token_id] + ids
        if len(ids) < 5:  # pad short prompts with a fixed continuation so every case has 5..20 tokens
            ids += tokenizer(" and his cat", add_special_tokens=False)["input_ids"][: 5 - len(ids)]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()
        cases.append({
            "text": text,
            "tokens": ids,
            "argmax": [int(i) for i in logits.argmax(dim=-1)],
            "last_logits": [float(x) for x in logits[-1]],
        })
    json.dump({
        "model": "tinystories656k",
        "source": "transformers LlamaForCausalLM, float32, " + "transformers " + __import__("transformers").__version__,
        "cases": cases,
    }, sys.stdout)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
