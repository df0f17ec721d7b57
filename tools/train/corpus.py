"""Builds the demo corpus: the system Python's standard library plus generated tasks.

Writes work/corpus/documents.json (a list of {"source", "split", "text"}) and
work/corpus/manifest.json (file list hash, sizes, generator seed, benchmark check).
Refuses to write a corpus that contains any evaluation prompt: HumanEval's, or one of any
problem set in resources/problems/ (each whole prompt, and its final function with its docstring).
A generated task that contains an evaluation prompt's final function is dropped (and counted).

    python3 corpus.py --stdlib /usr/lib/python3.11 --humaneval HumanEval.jsonl.gz
"""
import argparse
import gzip
import hashlib
import json
import os
import random

import tasks

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# Test suites are large and repetitive; site-packages is not the standard library.
SKIPPED_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}
MAX_FILE_BYTES = 200_000  # a few generated tables (unicode data) would dominate otherwise


def stdlib_files(root):
    found = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS)
        for name in sorted(files):
            path = os.path.join(directory, name)
            if name.endswith(".py") and os.path.getsize(path) <= MAX_FILE_BYTES:
                found.append(path)
    return sorted(found)


def held_out(key, fraction):
    """Deterministic split by a hash of the document key."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) < fraction * 2**32


def final_function(prompt):
    """The prompt's last function: its def line, its docstring and whatever follows."""
    return prompt[prompt.rindex("def "):]


def read_jsonl(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stdlib", default="/usr/lib/python3.11")
    parser.add_argument("--humaneval", required=True)
    parser.add_argument("--problems", default=os.path.join(REPO, "resources/problems"),
                        help="folder of problem sets (.jsonl) whose prompts must stay out of the corpus")
    parser.add_argument("--tasks", type=int, default=100000)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--held-out", type=float, default=0.03)
    parser.add_argument("--out", default=os.path.join(HERE, "work/corpus"))
    options = parser.parse_args()

    documents = []
    files = stdlib_files(options.stdlib)
    listing = hashlib.sha256()
    for path in files:
        relative = os.path.relpath(path, options.stdlib)
        with open(path, "rb") as f:
            data = f.read()
        listing.update(relative.encode() + b"\0" + hashlib.sha256(data).digest())
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        split = "val" if held_out(relative, options.held_out) else "train"
        documents.append({"source": "stdlib", "split": split, "name": relative, "text": text})

    benchmark = read_jsonl(options.humaneval)
    problem_sets = {name: read_jsonl(os.path.join(options.problems, name))
                    for name in sorted(os.listdir(options.problems)) if name.endswith(".jsonl")}
    evaluation = benchmark + [p for problems in problem_sets.values() for p in problems]
    functions = [final_function(p["prompt"]) for p in evaluation]
    generated = dropped = 0
    seen = set()
    for prompt, body, _ in tasks.generate(options.seed, options.tasks):
        if prompt in seen:
            continue
        seen.add(prompt)
        if any(f in prompt for f in functions):
            dropped += 1
            continue
        split = "val" if held_out(prompt, options.held_out) else "train"
        documents.append({"source": "tasks", "split": split, "name": f"task{generated}",
                          "text": prompt + body})
        generated += 1

    corpus = "\n".join(d["text"] for d in documents)
    leaks = [p["task_id"] for p, f in zip(evaluation, functions) if p["prompt"] in corpus or f in corpus]
    if leaks:
        raise SystemExit(f"corpus contains evaluation prompts: {leaks}")

    os.makedirs(options.out, exist_ok=True)
    with open(os.path.join(options.out, "documents.json"), "w", encoding="utf-8") as f:
        json.dump(documents, f)
    manifest = {
        "stdlib_root": os.path.basename(options.stdlib.rstrip("/")),
        "stdlib_files": len(files),
        "stdlib_file_list_sha256": listing.hexdigest(),
        "generator_seed": options.seed,
        "generated_tasks": generated,
        "generated_tasks_dropped_as_evaluation_prompts": dropped,
        "held_out_fraction": options.held_out,
        "bytes": {s: {k: sum(len(d["text"].encode()) for d in documents
                             if d["source"] == s and d["split"] == k) for k in ("train", "val")}
                  for s in ("stdlib", "tasks")},
        "humaneval_prompts_checked": len(benchmark),
        "problem_set_prompts_checked": {name: len(p) for name, p in problem_sets.items()},
    }
    with open(os.path.join(options.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    main()
