"""Trains one demo model (target or draft) on the encoded corpus, resumably and reproducibly.

Batches are drawn from a generator seeded by (seed, step), so a run resumed from a checkpoint
sees exactly the batches an uninterrupted run would. Checkpoints hold the weights, optimizer
state and step; the latest is work/<name>/ckpt.pt, and training resumes from it when present.
A second stage starts from another run's weights (--init) with its own schedule and mixture.

    python3 train.py --name target --dim 256 --layers 4 --heads 8 --kv-heads 2 --hidden 688 --steps 3000
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from model import Config, Llama

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "work")
HELD_OUT_SEED = [1234, 999_999]


BASE_VOCAB = 4096  # the tokenizer's pieces; fim.py's sentinels follow them


def load_streams(fim, seq):
    sources = ("stdlib", "tasks", "fim") if fim else ("stdlib", "tasks")
    streams = {f"{split}_{source}": np.load(os.path.join(WORK, f"tokens/{split}_{source}.npy")).astype(np.int64)
               for split in ("train", "val") for source in sources}
    if fim:  # where each FIM document begins (fim.py encode)
        for split in ("train", "val"):
            starts = np.load(os.path.join(WORK, f"tokens/{split}_fim_starts.npy"))
            streams[f"{split}_fim_starts"] = starts[starts < len(streams[f"{split}_fim"]) - seq - 1]
    return streams


def sample_batch(streams, split, batch, seq, tasks_fraction, rng, fim_fraction=0.0):
    """(batch, seq + 1) windows; each row from the FIM stream with probability fim_fraction
    (starting at one of its documents), else from the tasks stream with probability
    tasks_fraction (without FIM, the draws of the runs before FIM existed)."""
    rows = []
    for _ in range(batch):
        r = rng.random()
        if r < fim_fraction:
            source = "fim"
        else:
            source = "tasks" if r < fim_fraction + (1 - fim_fraction) * tasks_fraction else "stdlib"
        stream = streams[f"{split}_{source}"]
        if source == "fim":  # a window starts at a document, so that its middle has its prefix and suffix
            starts = streams[f"{split}_fim_starts"]
            start = starts[rng.integers(0, len(starts))]
        else:
            start = rng.integers(0, len(stream) - seq - 1)
        rows.append(stream[start:start + seq + 1])
    return torch.from_numpy(np.stack(rows))


def loss_on(model, windows):
    """Mean loss over the next tokens; a FIM sentinel is never a target: the engine writes
    them, and a model that learnt to predict them could emit one in plain generation."""
    logits = model(windows[:, :-1])
    targets = windows[:, 1:].reshape(-1).clone()
    targets[targets >= BASE_VOCAB] = -100
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets, ignore_index=-100)


@torch.no_grad()
def held_out_loss(model, streams, seq):
    """Mean loss on fixed held-out windows of each source (the same windows for every run)."""
    model.eval()
    result = {}
    for source in ("stdlib", "tasks", "fim"):
        if f"val_{source}" not in streams:
            continue
        rng = np.random.default_rng(HELD_OUT_SEED)
        windows = sample_batch(streams, "val", 32, seq, 1.0 if source == "tasks" else 0.0, rng,
                               1.0 if source == "fim" else 0.0)
        result[source] = sum(loss_on(model, windows[i:i + 8]).item() for i in range(0, 32, 8)) / 4
    model.train()
    return result


def learning_rate(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--dim", type=int, default=192)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--tasks-fraction", type=float, default=0.6)
    parser.add_argument("--fim-fraction", type=float, default=0.0,
                        help="windows from the FIM stream (fim.py encode); the rest split by --tasks-fraction")
    parser.add_argument("--vocab", type=int, default=BASE_VOCAB, help="4099 with fim.py's sentinels")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--init", help="start from the weights of work/<INIT>/ckpt.pt (fresh optimizer)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--checkpoint-every", type=int, default=50)
    options = parser.parse_args()

    torch.set_num_threads(options.threads)
    torch.manual_seed(options.seed)
    out = os.path.join(WORK, options.name)
    os.makedirs(out, exist_ok=True)
    config = Config(dim=options.dim, hidden_dim=options.hidden, n_layers=options.layers,
                    n_heads=options.heads, n_kv_heads=options.kv_heads, vocab_size=options.vocab,
                    context_length=options.seq)
    model = Llama(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr, betas=(0.9, 0.95),
                                  weight_decay=0.1)
    step = 0
    log = []
    checkpoint_path = os.path.join(out, "ckpt.pt")
    if os.path.exists(checkpoint_path):
        checkpoint = torch.load(checkpoint_path, weights_only=False)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        step, log = checkpoint["step"], checkpoint["log"]
        print(f"resumed {options.name} at step {step}", flush=True)
    elif options.init:
        model.load_state_dict(torch.load(os.path.join(WORK, options.init, "ckpt.pt"), weights_only=False)["model"])
        print(f"{options.name} starts from the weights of {options.init}", flush=True)
    print(f"{options.name}: {model.parameter_count()} parameters, {json.dumps(config.as_dict())}", flush=True)

    streams = load_streams(options.fim_fraction > 0, options.seq)

    def save():
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                    "log": log, "config": config.as_dict(), "options": vars(options)},
                   checkpoint_path + ".tmp")
        os.replace(checkpoint_path + ".tmp", checkpoint_path)

    tokens_per_step = options.batch * options.seq
    started, started_step = time.time(), step
    while step < options.steps:
        rng = np.random.default_rng([options.seed, step])
        windows = sample_batch(streams, "train", options.batch, options.seq, options.tasks_fraction, rng,
                               options.fim_fraction)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, options.steps, options.lr, options.warmup)
        loss = loss_on(model, windows)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        elapsed = time.time() - started
        rate = (step - started_step) * tokens_per_step / elapsed
        entry = {"step": step, "loss": round(loss.item(), 4), "tokens_seen": step * tokens_per_step,
                 "tokens_per_s": round(rate, 1)}
        if step % options.eval_every == 0 or step == options.steps:
            entry["held_out"] = held_out_loss(model, streams, options.seq)
        if step % 10 == 0 or "held_out" in entry:
            print(json.dumps(entry), flush=True)
            log.append(entry)
        if step % options.checkpoint_every == 0 or step == options.steps:
            save()
    print(f"done {options.name} at step {step}", flush=True)


if __name__ == "__main__":
    main()
