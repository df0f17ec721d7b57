"""Teaches the demo pair fill-in-the-middle: three sentinel pieces, a stream of FIM documents,
and starting weights read back from the shipped GGUF files.

The editor plugins (llama.vim, llama.vscode) send the code before and after the cursor and
want the hole between. The demo pair learns the suffix-first order (SPM, as llama.cpp lays it
out with --spm-infill; the exported files say so with specula.fim.order = "spm"):

    BOS <fim_suffix> suffix <fim_prefix> prefix <fim_middle>   -> the model writes the middle, then EOS

The prefix-first order (PSM) asks a model to find the end of the prefix again across the
suffix; this 3.8 M-parameter model, fine-tuned so for 250 steps (about 2,000 FIM documents),
still put the first token of the middle right 4 % of the time. Suffix first, the middle simply
continues the prefix.

`tokenizer` writes work/tokenizer_fim.model: the demo tokenizer with <fim_prefix>,
<fim_suffix> and <fim_middle> appended as control pieces (ids 4096-4098; every other id and
every piece unchanged, so text tokenizes exactly as before and a control piece is never
matched in text).

`encode` writes work/tokens/{train,val}_fim.npy and, beside each, the offset of every
document in it (_starts.npy: train.py starts each FIM window at a document, so that a window
holds the prefix and suffix its middle depends on). Half of the generated tasks (by hash of
their name) and half of the standard library's chunks of at most 16 lines (whole files do not
fit the 256-token context) become FIM documents, laid out as above (SPM), the prefix tokenized with
the dummy space as the engine tokenizes it, suffix and middle as continuations. Nine holes in
ten are where an editor's cursor is: from a point of a line (its indentation's end, or
anywhere in it) to the line's end, and in a third of them one to three more lines; the others
are StarCoder's: between two random characters of the document.

`init` writes work/<name>/ckpt.pt from a GGUF file of the demo pair, its embedding widened by
the three new rows (the mean embedding plus small noise), so that a stage of train.py can
start from the shipped weights (--init <name>).

    python3 fim.py tokenizer
    python3 fim.py encode
    python3 fim.py init --gguf ../../resources/models/specula-demo-target.gguf --name target_base
"""
import argparse
import hashlib
import json
import os
import random

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")
SENTINELS = ("<fim_prefix>", "<fim_suffix>", "<fim_middle>")
CHUNK_LINES = 16
EDITOR_HOLES = 0.9  # the rest StarCoder's random spans, which end anywhere: at half, the model
                    # learnt to end a line's middle mid-expression
SEED = 1234


def chosen(name, salt):
    """Half of the documents, the same half every run."""
    return hashlib.sha256(f"{salt}:{name}".encode()).digest()[0] < 128


def extend_tokenizer(_options):
    from sentencepiece import sentencepiece_model_pb2 as pb
    model = pb.ModelProto()
    with open(os.path.join(WORK, "tokenizer.model"), "rb") as f:
        model.ParseFromString(f.read())
    if any(p.piece in SENTINELS for p in model.pieces):
        raise SystemExit("work/tokenizer.model already has FIM pieces")
    for piece in SENTINELS:
        model.pieces.add(piece=piece, score=0.0, type=pb.ModelProto.SentencePiece.CONTROL)
    with open(os.path.join(WORK, "tokenizer_fim.model"), "wb") as f:
        f.write(model.SerializeToString())
    print(f"work/tokenizer_fim.model: {len(model.pieces)} pieces, sentinels at "
          f"{len(model.pieces) - len(SENTINELS)}-{len(model.pieces) - 1}")


def processors():
    """The extended tokenizer, with and without SentencePiece's dummy space prefix."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb
    path = os.path.join(WORK, "tokenizer_fim.model")
    with open(path, "rb") as f:
        proto = pb.ModelProto()
        proto.ParseFromString(f.read())
    proto.normalizer_spec.add_dummy_prefix = False
    plain = spm.SentencePieceProcessor(model_file=path)
    continuation = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
    return plain, continuation


def pieces_of(document):
    """A generated task is one piece; a standard-library file is cut into chunks of whole lines."""
    if document["source"] == "tasks":
        return [document["text"]]
    lines = document["text"].splitlines(keepends=True)
    return ["".join(lines[i:i + CHUNK_LINES]) for i in range(0, len(lines), CHUNK_LINES)]


def editor_hole(text, rng):
    """(start, end) of a hole at an editor's cursor: from a point of a non-blank line to the
    line's end, sometimes with one to three more lines; None for a text without such a line."""
    lines = text.splitlines(keepends=True)
    starts = [sum(len(line) for line in lines[:k]) for k in range(len(lines))]
    candidates = [k for k, line in enumerate(lines) if line.strip()]
    if not candidates:
        return None
    k = rng.choice(candidates)
    line = lines[k].rstrip("\n")
    indent = len(line) - len(line.lstrip())
    cursor = indent if rng.random() < 0.5 else rng.randint(indent, len(line) - 1)
    last = min(len(lines) - 1, k + (rng.randint(1, 3) if rng.random() < 1 / 3 else 0))
    end = starts[last] + len(lines[last].rstrip("\n"))
    return starts[k] + cursor, end


def encode(_options):
    plain, continuation = processors()
    prefix_id, suffix_id, middle_id = (plain.piece_to_id(p) for p in SENTINELS)
    with open(os.path.join(WORK, "corpus/documents.json"), encoding="utf-8") as f:
        documents = json.load(f)
    rng = random.Random(SEED)
    counts = {}
    for split in ("train", "val"):
        stream, document_starts = [], []
        documents_used = 0
        for d in documents:
            if d["split"] != split:
                continue
            for n, text in enumerate(pieces_of(d)):
                name = f"{d['name']}#{n}"
                if len(text) < 2 or not chosen(name, "fim") or any(s in text for s in SENTINELS):
                    continue
                hole = editor_hole(text, rng) if rng.random() < EDITOR_HOLES else None
                i, j = hole if hole else sorted(rng.sample(range(len(text) + 1), 2))
                prefix, middle, suffix = text[:i], text[i:j], text[j:]
                document_starts.append(len(stream))
                prefix_part = [prefix_id] + plain.encode(prefix)
                suffix_part = [suffix_id] + continuation.encode(suffix)
                stream += [plain.bos_id()] + suffix_part + prefix_part  # SPM: the prefix next to the middle
                stream += [middle_id] + continuation.encode(middle) + [plain.eos_id()]
                documents_used += 1
        os.makedirs(os.path.join(WORK, "tokens"), exist_ok=True)
        np.save(os.path.join(WORK, f"tokens/{split}_fim.npy"), np.array(stream, dtype=np.uint16))
        np.save(os.path.join(WORK, f"tokens/{split}_fim_starts.npy"), np.array(document_starts, dtype=np.int64))
        counts[f"{split}_fim"] = {"tokens": len(stream), "documents": documents_used}
    print(json.dumps(counts))


def init_from_gguf(options):
    import gguf
    import torch
    from export_gguf import gguf_name
    from model import Config, Llama

    reader = gguf.GGUFReader(options.gguf)
    field = lambda key: reader.fields[key].parts[reader.fields[key].data[0]][0]
    arch = "llama"
    vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    config = Config(dim=int(field(f"{arch}.embedding_length")), hidden_dim=int(field(f"{arch}.feed_forward_length")),
                    n_layers=int(field(f"{arch}.block_count")), n_heads=int(field(f"{arch}.attention.head_count")),
                    n_kv_heads=int(field(f"{arch}.attention.head_count_kv")), vocab_size=vocab + len(SENTINELS),
                    context_length=int(field(f"{arch}.context_length")))
    tensors = {t.name: torch.from_numpy(np.array(t.data, dtype=np.float32)) for t in reader.tensors}
    model = Llama(config)
    state = model.state_dict()
    for parameter in state:
        value = tensors[gguf_name(parameter)]
        if parameter == "token_embedding.weight":
            generator = torch.Generator().manual_seed(SEED)
            extra = value.mean(0, keepdim=True) + 0.02 * torch.randn(len(SENTINELS), value.shape[1], generator=generator)
            value = torch.cat([value, extra])
        if value.shape != state[parameter].shape:
            raise SystemExit(f"{parameter}: {tuple(value.shape)} in the file, {tuple(state[parameter].shape)} expected")
        state[parameter] = value
    model.load_state_dict(state)
    out = os.path.join(WORK, options.name)
    os.makedirs(out, exist_ok=True)
    torch.save({"model": model.state_dict(), "step": 0, "log": [], "config": config.as_dict(),
                "options": {"gguf": os.path.basename(options.gguf)}}, os.path.join(out, "ckpt.pt"))
    print(f"work/{options.name}/ckpt.pt from {os.path.basename(options.gguf)}: vocabulary {vocab} -> {config.vocab_size}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("tokenizer").set_defaults(run=extend_tokenizer)
    commands.add_parser("encode").set_defaults(run=encode)
    init = commands.add_parser("init")
    init.add_argument("--gguf", required=True)
    init.add_argument("--name", required=True)
    init.set_defaults(run=init_from_gguf)
    options = parser.parse_args()
    options.run(options)


if __name__ == "__main__":
    main()
