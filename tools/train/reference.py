"""Writes tests/data/demo_reference.json: what the exported demo GGUF files must compute.

The weights are read back from the GGUF files themselves (so the F16 target is checked
with its F16-rounded weights) and the forward pass runs in float64. For each fixed input:
the token ids SentencePiece gives (BOS first), the full logits at the last position, the
logits of every position at a fixed set of token ids, and a greedy continuation with the
margin of each choice over the runner-up. The engine should match logits with relative
error below 1e-3, measured per vector as max |engine - reference| / max |reference|. The "tokenizer" list
holds texts with the ids SentencePiece gives them (no BOS); each decodes back exactly.
The "fim" list, for files with fim.py's sentinels: holes laid out as fim.py trains them
(BOS <fim_suffix> suffix <fim_prefix> prefix <fim_middle>), with the greedy middle up to EOS.
"""
import argparse
import hashlib
import json
import os

import gguf
import numpy as np
import sentencepiece as spm
import torch

import tasks
from export_gguf import TENSOR_NAMES
from model import Config, Llama

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

INPUTS = [
    'def add(a, b):\n    """Return the sum of a and b."""\n',
    'def count_even(nums):\n    """Count the even numbers in nums.\n    >>> count_even([1, 2, 4])\n    2\n    """\n',
    "import os\n\n\nclass Store:\n\tdef __init__(self, path):\n        self.path = path  # café, 10 ≤ n\n",
]
# Holes in the middle of code: the prefix, the suffix (fill-in-the-middle, fim.py).
FIM_HOLES = [
    ('def add(a, b):\n    """Return the sum of a and b."""\n    return ', "\n"),
    ('def mean(values):\n    """Return the arithmetic mean of a list of numbers."""\n    total = 0\n',
     "\n    return total / len(values)\n"),
    ("def is_even(n):\n    ", "\n\n\ndef is_odd(n):\n    return not is_even(n)\n"),
]
SAMPLED_IDS = list(range(0, 4096, 64)) + [4095]
GREEDY_TOKENS = 24
# Texts whose SentencePiece ids the engine's tokenizer must reproduce and decode back exactly:
# whitespace in every form code has it, byte fallback, and a sample of generated corpus tasks.
TOKENIZER_TEXTS = [
    "", " ", "\n", "\n\n\n", "    ", "\t\tx = 1\n", "a\r\nb\r\n", "  leading and trailing  ",
    "x=1;y = 2 ;  z  =  3", "12345 + 678.9e-10", "naïve café — 10 ≤ n ≥ 0 ✓ 😀",
    "class A:\n    def f(self):\n        return {'k': [1, 2]}\n\n\nif __name__ == '__main__':\n    A().f()\n",
] + [prompt + body for prompt, body, _ in tasks.generate(20260101, 12)]


def field_value(reader, key):
    field = reader.fields[key]
    return field.parts[field.data[0]][0]


def load_gguf(path):
    """Builds the PyTorch model from a GGUF file's keys and tensors, in float64."""
    reader = gguf.GGUFReader(path)
    config = Config(
        dim=int(field_value(reader, "llama.embedding_length")),
        hidden_dim=int(field_value(reader, "llama.feed_forward_length")),
        n_layers=int(field_value(reader, "llama.block_count")),
        n_heads=int(field_value(reader, "llama.attention.head_count")),
        n_kv_heads=int(field_value(reader, "llama.attention.head_count_kv")),
        vocab_size=int(field_value(reader, "llama.vocab_size")),
        context_length=int(field_value(reader, "llama.context_length")),
        rope_theta=float(field_value(reader, "llama.rope.freq_base")),
        norm_eps=float(field_value(reader, "llama.attention.layer_norm_rms_epsilon")),
    )
    tensors = {t.name: torch.from_numpy(np.array(t.data, dtype=np.float64)) for t in reader.tensors}
    state = {}
    for parameter, name in TENSOR_NAMES.items():
        if "{}" in parameter:
            for layer in range(config.n_layers):
                state[parameter.format(layer)] = tensors[name.format(layer)]
        else:
            state[parameter] = tensors[name]
    model = Llama(config).double()
    model.load_state_dict(state)
    model.eval()
    return model, config


@torch.no_grad()
def cases_for(model, processor):
    cases = []
    for text in INPUTS:
        ids = [processor.bos_id()] + processor.encode(text)
        logits = model(torch.tensor([ids]))[0].double()
        greedy, margins = list(ids), []
        for _ in range(GREEDY_TOKENS):
            top = model(torch.tensor([greedy]))[0, -1].topk(2)
            greedy.append(int(top.indices[0]))
            margins.append(float(top.values[0] - top.values[1]))
        cases.append({
            "text": text,
            "tokens": ids,
            "last_logits": [float(f"{v:.7g}") for v in logits[-1].tolist()],
            "sampled_logits": [[float(f"{v:.7g}") for v in row] for row in logits[:, SAMPLED_IDS].tolist()],
            "greedy_tokens": greedy[len(ids):],
            # How far the chosen logit leads the runner-up: a tiny lead may flip in float32.
            "greedy_margins": [float(f"{m:.4g}") for m in margins],
            # Decoded with the prompt so that the continuation keeps its leading spaces.
            "greedy_text": processor.decode(greedy[1:])[len(text):],
        })
    return cases


@torch.no_grad()
def fim_cases(model, plain, continuation):
    """Each hole's prompt in fim.py's layout and the model's greedy middle, to its EOS."""
    pre, suf, mid = (plain.piece_to_id(p) for p in ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"))
    cases = []
    for prefix, suffix in FIM_HOLES:
        ids = [plain.bos_id(), suf] + continuation.encode(suffix) + [pre] + plain.encode(prefix) + [mid]
        greedy, margins = list(ids), []
        for _ in range(GREEDY_TOKENS):
            top = model(torch.tensor([greedy]))[0, -1].topk(2)
            greedy.append(int(top.indices[0]))
            margins.append(float(top.values[0] - top.values[1]))
            if greedy[-1] == plain.eos_id():
                break
        middle = [t for t in greedy[len(ids):] if t != plain.eos_id()]
        cases.append({"prefix": prefix, "suffix": suffix, "tokens": ids, "greedy_tokens": greedy[len(ids):],
                      "greedy_margins": [float(f"{m:.4g}") for m in margins],
                      "greedy_text": continuation.decode(middle)})
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=os.path.join(REPO, "resources/models"))
    parser.add_argument("--tokenizer", default=os.path.join(HERE, "work/tokenizer.model"))
    parser.add_argument("--out", default=os.path.join(REPO, "tests/data/demo_reference.json"))
    options = parser.parse_args()

    processor = spm.SentencePieceProcessor(model_file=options.tokenizer)
    reference = {
        "about": __doc__.strip().splitlines()[0],
        "metric": "per logits vector: max |engine - reference| / max |reference| < 1e-3",
        "sampled_ids": SAMPLED_IDS,
        "models": {},
        "tokenizer": [{"text": text, "ids": processor.encode(text)} for text in TOKENIZER_TEXTS],
    }
    for case in reference["tokenizer"]:
        assert processor.decode(case["ids"]) == case["text"], case["text"]
    for name in ("target", "draft"):
        path = os.path.join(options.models, f"specula-demo-{name}.gguf")
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        model, config = load_gguf(path)
        reference["models"][name] = {"file": f"resources/models/specula-demo-{name}.gguf",
                                     "sha256": digest, "config": config.as_dict(),
                                     "cases": cases_for(model, processor)}
        print(name, [c["greedy_text"] for c in reference["models"][name]["cases"]])
        if config.vocab_size > processor.vocab_size():  # fim.py's sentinels
            import fim
            reference["models"][name]["fim"] = fim_cases(model, *fim.processors())
            print(name, "fim", [c["greedy_text"] for c in reference["models"][name]["fim"]])
    os.makedirs(os.path.dirname(options.out), exist_ok=True)
    with open(options.out, "w") as f:
        json.dump(reference, f, separators=(",", ":"))
    print(f"wrote {options.out} ({os.path.getsize(options.out)} bytes)")


if __name__ == "__main__":
    main()
