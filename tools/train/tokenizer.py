"""Trains the demo SentencePiece BPE tokenizer on the corpus and checks exact round trips.

Whitespace is code here: no normalization, no collapsing of spaces, whitespace-only pieces
so that indentation compresses, and sentences that keep their newlines (the trainer reads
chunks of whole lines from an iterator instead of one line per sentence from a file).
Byte fallback makes every input encodable.

    python3 tokenizer.py        # reads work/corpus/documents.json, writes work/tokenizer.model
"""
import argparse
import json
import os
import random

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
CHUNK_BYTES = 2000  # below SentencePiece's max_sentence_length (4192)


def chunks(text):
    """Splits text into runs of whole lines of at most CHUNK_BYTES bytes."""
    current = ""
    for line in text.splitlines(keepends=True):
        if len(current) + len(line) > CHUNK_BYTES and current:
            yield current
            current = ""
        current += line[:CHUNK_BYTES]
    if current:
        yield current


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=os.path.join(HERE, "work/corpus/documents.json"))
    parser.add_argument("--out", default=os.path.join(HERE, "work/tokenizer"))
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--sentences", type=int, default=60000)
    parser.add_argument("--seed", type=int, default=1234)
    options = parser.parse_args()

    with open(options.corpus, encoding="utf-8") as f:
        documents = json.load(f)
    sentences = [c for d in documents if d["split"] == "train" for c in chunks(d["text"])]
    random.Random(options.seed).shuffle(sentences)
    sentences = sentences[:options.sentences]

    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_prefix=options.out,
        model_type="bpe",
        vocab_size=options.vocab,
        byte_fallback=True,
        character_coverage=0.9999,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=True,
        split_digits=True,
        allow_whitespace_only_pieces=True,
        max_sentence_length=4192,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        num_threads=1,
        minloglevel=2,
    )

    processor = spm.SentencePieceProcessor(model_file=options.out + ".model")
    failures = [d["name"] for d in documents
                if processor.decode(processor.encode(d["text"])) != d["text"]]
    if failures:
        raise SystemExit(f"tokenizer does not round-trip {len(failures)} documents, e.g. {failures[:5]}")
    total_bytes = sum(len(d["text"].encode()) for d in documents)
    total_tokens = sum(len(processor.encode(d["text"])) for d in documents[:2000])
    sample_bytes = sum(len(d["text"].encode()) for d in documents[:2000])
    print(f"round trip ok on {len(documents)} documents ({total_bytes} bytes); "
          f"{sample_bytes / total_tokens:.2f} bytes per token on a sample")


if __name__ == "__main__":
    main()
