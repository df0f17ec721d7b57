#!/usr/bin/env python3
"""Byte-level BPE reference ids from Hugging Face `tokenizers`, `tiktoken` and `sentencepiece`.

Writes tests/data/bpe_oracle.json for test_tokenizer_bpe:

- "texts": the llama.cpp tokenizer inputs (bpe-vocab/*.inp) plus cases that tell the
  pre-tokenizer rules apart (digit runs, contractions, Unicode spaces, CJK, decomposed
  accents).
- "pre_tokenizers": for each GGUF pre-tokenizer name, the pipeline of the family's own
  tokenizer.json (normalizer, pre-tokenizer, BPE options) serialized by `tokenizers` with an
  empty vocabulary ("skeleton"; the test fills in the vocabulary and merges), and the ids that
  pipeline gives every text over the GPT-2 vocabulary (bpe-vocab/ggml-vocab-gpt-2.gguf, read
  with the `gguf` package). One vocabulary under six rule sets: the ids differ exactly where the
  rules split differently. "nfc_changes" marks the texts that NFC normalization changes.
- "fim": fill-in-the-middle prompts in each family's documented layout, encoded by the
  family's reference: Qwen2.5-Coder's "<|fim_prefix|>{p}<|fim_suffix|>{s}<|fim_middle|>" by
  tiktoken over qwen.tiktoken with Qwen2.5's special tokens; DeepSeek-Coder's
  "<｜fim▁begin｜>{p}<｜fim▁hole｜>{s}<｜fim▁end｜>" with BOS and StarCoder's
  "<fim_prefix>{p}<fim_suffix>{s}<fim_middle>" by `tokenizers` over their GGUF vocabularies;
  CodeLlama's by Meta's infilling_prompt_tokens (codellama/llama/generation.py) over the
  Llama 2 tokenizer.model with SentencePiece, infill ids 32007..32009.

    pip install tokenizers tiktoken sentencepiece gguf
    python3 tools/oracles/bpe_oracle.py [path/to/shared]
"""
import base64
import json
import pathlib
import sys
import unicodedata

import gguf
import sentencepiece
import tiktoken
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared"
BPE = SHARED / "tokenizers" / "bpe-vocab"

EXTRA_TEXTS = [
    "12345678901 and 3.14159 and 1,000,000",
    "It'S THEY'LL we'Re I'M you'D she'LL it's",
    "\u017f's and K's",                            # ſ and the Kelvin sign fold to s and k
    "a\u3000b\u00a0c\u2009d\u180ee\u0085f\u2028g",  # ideographic, no-break, thin spaces; U+180E is not a space
    "   \n\n  x\r\n\r\n\ty  \t z",
    "def f(x):\n    return x  \n\n\n# done  ",
    "e\u0301te\u0301 caf\u00e9 \u212b",          # decomposed accents, the angstrom sign
    "\u4e2d\u6587\u5b57 \ud55c\uad6d\uc5b4 \u65e5\u672c\u8a9e \u0421\u043b\u043e\u0432\u043e",
    "!!!??? ...;;; ((()))",
    "\U0001f999\U0001f600 x\U0001f44d",
    "\u00b5 \u01c4 \u1f7d \u2126",               # letters named one by one in deepseek-llm's class
]

GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# tiktoken's o200k_base pat_str (tiktoken_ext/openai_public.py): GPT-4o's and gpt-oss's rules,
# llama.cpp's "gpt-4o" pre-tokenizer.
O200K_REGEX = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])
CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
DEEPSEEK_LLM_LETTERS = (
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af"
    "\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5"
    "\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba"
    "\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45"
    "\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe"
    "\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc"
    "\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3"
    "\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06"
    "\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3"
    "\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df"
    "\U0001e900-\U0001e943]+")
DEEPSEEK_LLM_PUNCT = "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"


def split(regex):
    return pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False)


def byte_level(use_regex):
    return pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=use_regex)


# Each family as its published tokenizer.json builds it.
FAMILIES = {
    "gpt-2": dict(pre=byte_level(True)),
    "starcoder": dict(pre=pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level(True)])),
    "qwen2": dict(pre=pre_tokenizers.Sequence([split(QWEN2_REGEX), byte_level(False)]), nfc=True),
    "llama-bpe": dict(pre=pre_tokenizers.Sequence([split(LLAMA3_REGEX), byte_level(False)]), ignore_merges=True),
    "gpt-4o": dict(pre=pre_tokenizers.Sequence([split(O200K_REGEX), byte_level(False)])),
    "deepseek-coder": dict(pre=pre_tokenizers.Sequence(
        [split("[\r\n]"), split(r"\s?\p{L}+"), split(r"\s?\p{P}+"), split(CJK), split(r"\p{N}"), byte_level(False)])),
    "deepseek-llm": dict(pre=pre_tokenizers.Sequence(
        [split("[\r\n]"), split(DEEPSEEK_LLM_LETTERS), split(DEEPSEEK_LLM_PUNCT), split(r"\s+$"), split(CJK),
         split(r"\p{N}+"), byte_level(False)])),
}

QWEN25_SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>",
]

FIM_CASES = [
    ("def fib(n):\n    ", "\n    return fib(n - 1) + fib(n - 2)\n"),
    ("import os\n\nclass Store:\n    def __init__(self, path):\n        self.path = ", "\n\n    def load(self):\n        pass\n"),
    ("x = [1, 2, 3]\ntotal = ", "  # sum of x\nprint(total)\n"),
]


def read_cases(path):
    text = path.read_text(encoding="utf-8")
    cases = text.split("\n__ggml_vocab_test__\n")
    return cases[:-1]


def gguf_vocab(path):
    reader = gguf.GGUFReader(str(path))

    def strings(key):
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    def ints(key):
        field = reader.fields[key]
        return [int(field.parts[i][0]) for i in field.data]

    return strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges"), ints("tokenizer.ggml.token_type")


def hf_tokenizer(family, tokens=None, merges=None):
    spec = FAMILIES[family]
    vocab = {piece: i for i, piece in enumerate(tokens)} if tokens else {}
    pairs = [tuple(m.split(" ")) for m in merges] if merges else []
    tok = Tokenizer(models.BPE(vocab, pairs, ignore_merges=spec.get("ignore_merges", False)))
    if spec.get("nfc"):
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = spec["pre"]
    tok.decoder = decoders.ByteLevel()
    return tok


def with_added_tokens(tok, tokens, types):
    """The GGUF's control (special) and user-defined (not special) tokens as added tokens."""
    from tokenizers import AddedToken
    for i, (piece, kind) in enumerate(zip(tokens, types)):
        if kind in (3, 4):
            tok.add_tokens([AddedToken(piece, special=kind == 3, normalized=False)])
            assert tok.token_to_id(piece) == i, (piece, i)
    return tok


def fim_qwen():
    ranks = {}
    for line in (SHARED / "tokenizers" / "qwen" / "qwen.tiktoken").read_text().splitlines():
        if line:
            b64, rank = line.split()
            ranks[base64.b64decode(b64)] = int(rank)
    specials = {name: len(ranks) + i for i, name in enumerate(QWEN25_SPECIALS)}
    enc = tiktoken.Encoding("qwen", pat_str=QWEN2_REGEX, mergeable_ranks=ranks, special_tokens=specials)
    return [enc.encode(f"<|fim_prefix|>{p}<|fim_suffix|>{s}<|fim_middle|>", allowed_special="all") for p, s in FIM_CASES]


def fim_bpe(name, family, layout, bos):
    tokens, merges, types = gguf_vocab(BPE / f"ggml-vocab-{name}.gguf")
    tok = with_added_tokens(hf_tokenizer(family, tokens, merges), tokens, types)
    out = []
    for p, s in FIM_CASES:
        ids = tok.encode(layout.format(p=p, s=s), add_special_tokens=False).ids
        out.append(([bos] if bos is not None else []) + ids)
    return out


def fim_codellama():
    sp = sentencepiece.SentencePieceProcessor(model_file=str(SHARED / "tokenizers" / "llama2" / "tokenizer.model"))
    assert len(sp.encode("\u263a")) == 2  # encode_infilling's premise: "☺" is "▁" and one piece
    bos, pre, suf, mid = 1, 32007, 32008, 32009
    return [[bos, pre] + sp.encode(p) + [suf] + sp.encode("\u263a" + s)[2:] + [mid] for p, s in FIM_CASES]


def main():
    texts = read_cases(BPE / "ggml-vocab-gpt-2.gguf.inp") + EXTRA_TEXTS
    tokens, merges, _ = gguf_vocab(BPE / "ggml-vocab-gpt-2.gguf")
    families = {}
    for family in FAMILIES:
        tok = hf_tokenizer(family, tokens, merges)
        skeleton = json.loads(hf_tokenizer(family).to_str())
        ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
        for t, i in zip(texts, ids):
            assert tok.decode(i) == (unicodedata.normalize("NFC", t) if FAMILIES[family].get("nfc") else t)
        families[family] = {"skeleton": skeleton, "ids": ids}
    oracle = {
        "made_by": "tools/oracles/bpe_oracle.py",
        "vocabulary": "tokenizers/bpe-vocab/ggml-vocab-gpt-2.gguf",
        "texts": texts,
        "nfc_changes": [unicodedata.normalize("NFC", t) != t for t in texts],
        "pre_tokenizers": families,
        "fim": {
            "cases": [{"prefix": p, "suffix": s} for p, s in FIM_CASES],
            "qwen": fim_qwen(),
            "deepseek-coder": fim_bpe("deepseek-coder", "deepseek-coder",
                                      "<\uff5cfim\u2581begin\uff5c>{p}<\uff5cfim\u2581hole\uff5c>{s}<\uff5cfim\u2581end\uff5c>", 32013),
            "starcoder": fim_bpe("starcoder", "starcoder", "<fim_prefix>{p}<fim_suffix>{s}<fim_middle>", None),
            "codellama": fim_codellama(),
        },
    }
    out = ROOT / "tests" / "data" / "bpe_oracle.json"
    out.write_text(json.dumps(oracle, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}: {len(texts)} texts, {len(families)} pre-tokenizers")


if __name__ == "__main__":
    main()
