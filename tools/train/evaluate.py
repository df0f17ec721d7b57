"""Greedy completions of the demo problems with the exported GGUF files, run against their tests.

A completion stops at EOS, at a line that leaves the function body (any line that is not
indented and not empty), or after --max-tokens. Prints how many tasks each model solves and
one sample completion.
"""
import argparse
import json
import os
import subprocess
import sys

import sentencepiece as spm
import torch

from reference import load_gguf

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def body_of(text):
    """The completion up to the first line that leaves the function body."""
    lines = text.split("\n")
    kept = []
    for line in lines[:-1]:
        if line and not line.startswith((" ", "\t")):
            break
        kept.append(line)
    else:
        kept.append(lines[-1])
        return "\n".join(kept)
    return "\n".join(kept) + "\n"


@torch.no_grad()
def complete(model, processor, prompt, max_tokens):
    ids = [processor.bos_id()] + processor.encode(prompt)
    generated = []
    for _ in range(max_tokens):
        window = (ids + generated)[-model.config.context_length:]
        token = int(model(torch.tensor([window]))[0, -1].argmax())
        if token == processor.eos_id():
            break
        generated.append(token)
        text = processor.decode(ids[1:] + generated)[len(prompt):]
        if body_of(text) != text:
            break
    return body_of(processor.decode(ids[1:] + generated)[len(prompt):])


def passes(task, completion):
    program = task["prompt"] + completion + "\n" + task["test"] + "\n" + f"check({task['entry_point']})\n"
    try:
        return subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=5).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=os.path.join(REPO, "resources/models"))
    parser.add_argument("--tokenizer", default=os.path.join(HERE, "work/tokenizer.model"))
    parser.add_argument("--problems", default=os.path.join(REPO, "resources/problems/demo.jsonl"))
    parser.add_argument("--max-tokens", type=int, default=80)
    parser.add_argument("--threads", type=int, default=1)
    options = parser.parse_args()

    torch.set_num_threads(options.threads)
    processor = spm.SentencePieceProcessor(model_file=options.tokenizer)
    with open(options.problems) as f:
        tasks = [json.loads(line) for line in f]
    for name in ("target", "draft"):
        model, _ = load_gguf(os.path.join(options.models, f"specula-demo-{name}.gguf"))
        model = model.float()
        solved = []
        for task in tasks:
            completion = complete(model, processor, task["prompt"], options.max_tokens)
            if passes(task, completion):
                solved.append(task["task_id"])
            if task["task_id"] == "Demo/3":
                sample = task["prompt"] + completion
        print(f"{name}: greedy solves {len(solved)}/{len(tasks)}: {' '.join(solved)}")
        print(f"{name} sample (Demo/3):\n{sample}")


if __name__ == "__main__":
    main()
