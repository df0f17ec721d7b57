#!/usr/bin/env python3
"""Token ids of the tinystories656k tokenizer.json as Hugging Face computes them.

Writes tests/data/tinystories656k_tokens.json: [{"text": ..., "ids": [...]}, ...], ids
without special tokens (the engine adds BOS separately). The `tokenizers` library defines
what a tokenizer.json means, and SentencePiece agrees with it. transformers' AutoTokenizer
is not the reference: for this model (LlamaTokenizerFast, legacy=False) it drops one leading
space of the input (" Zoo" -> "▁Zoo", SentencePiece keeps "▁▁Zoo") and drops unknown
characters instead of giving <unk>.

    python3 tools/oracles/tokenizer_json_ids.py [path/to/shared]
"""
import gzip
import json
import pathlib
import sys

from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared"
MODEL_DIR = SHARED / "models" / "tinystories656k"

TEXTS = [
    "Once upon a time, there was a little girl named Lily.",
    "Zoo",
    " Zoo",
    "Hello world",
    "  two leading spaces and   runs   of spaces  ",
    "Tom said, \"Let's go to the park!\" and they went in the park.\nThe end.",
    "line one\nline two\n\nline four\n",
    "def add(a, b):\n    \"\"\"Return a + b.\"\"\"\n    return a + b\n",
    "for i in range(10):\n\tif i % 2 == 0:\n\t\tprint(i)\n",
    "x = [1, 2, 3]; y = {'k': x}  # comment",
    "The cat sat on the mat. The dog ran after the ball, and the bird sang.",
    "She was very happy. She smiled and hugged her mom. They played all day.",
    "Ben and Mia like to play with their toys. One day, they found a big box.",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ abcdefghijklmnopqrstuvwxyz 0123456789",
    "unbelievable!!! wow... really?? yes: no; maybe - perhaps",
]



def humaneval_code(count: int) -> list[str]:
    """The first `count` HumanEval prompts with their canonical solutions: real Python."""
    with gzip.open(SHARED / "data" / "humaneval" / "HumanEval.jsonl.gz", "rt", encoding="utf-8") as f:
        problems = [json.loads(line) for line in f if line.strip()]
    return [t["prompt"] + t["canonical_solution"] for t in problems[:count]]


def main() -> None:
    raw = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    cases = []
    for text in TEXTS + humaneval_code(6):
        ids = raw.encode(text, add_special_tokens=False).ids
        cases.append({"text": text, "ids": ids})
    out = ROOT / "tests" / "data" / "tinystories656k_tokens.json"
    lines = ",\n".join(" " + json.dumps(case, ensure_ascii=False) for case in cases)
    out.write_text("[\n" + lines + "\n]\n", encoding="utf-8")
    print(f"wrote {len(cases)} cases to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
