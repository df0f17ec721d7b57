"""Encodes the corpus with the demo tokenizer into token streams for training.

Every document becomes BOS, its tokens, EOS, so the model learns to stop after a function.
Writes work/tokens/{train,val}_{stdlib,tasks}.npy (uint16) and adds the token counts to the
corpus manifest.
"""
import json
import os

import numpy as np
import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")


def main():
    processor = spm.SentencePieceProcessor(model_file=os.path.join(WORK, "tokenizer.model"))
    with open(os.path.join(WORK, "corpus/documents.json"), encoding="utf-8") as f:
        documents = json.load(f)
    os.makedirs(os.path.join(WORK, "tokens"), exist_ok=True)
    counts = {}
    for source in ("stdlib", "tasks"):
        for split in ("train", "val"):
            texts = [d["text"] for d in documents if d["source"] == source and d["split"] == split]
            stream = []
            for ids in processor.encode(texts):
                stream += [processor.bos_id()] + ids + [processor.eos_id()]
            np.save(os.path.join(WORK, f"tokens/{split}_{source}.npy"), np.array(stream, dtype=np.uint16))
            counts[f"{split}_{source}"] = len(stream)
    manifest_path = os.path.join(WORK, "corpus/manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    manifest["tokens"] = counts
    manifest["tokens_total"] = sum(counts.values())
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
