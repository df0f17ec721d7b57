"""How many single-line holes a demo target fills greedily, in PyTorch, scored by the tests.

Each hole of resources/problems/infill-single-line.jsonl is laid out as fim.py trains it
(suffix first: BOS <fim_suffix> suffix <fim_prefix> prefix <fim_middle>), or prefix first
(--order psm), or, for a model without FIM, as the prefix alone cut at its first line end
(--order fallback, what serve --infill-fallback gives); the greedy middle, up to EOS or 48
tokens, goes to `specula-cli check`. Prints the count that pass and the middles that fail.

    python3 fim_holes.py ../../resources/models/specula-demo-target.gguf
"""
import argparse
import json
import os
import subprocess
import tempfile

import torch

import fim
from reference import load_gguf

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


@torch.no_grad()
def middle(model, plain, continuation, prefix, suffix, order):
    pre, suf, mid = (plain.piece_to_id(p) for p in fim.SENTINELS)
    if order == "fallback":
        ids = [plain.bos_id()] + plain.encode(prefix)
    else:
        prefix_part = [pre] + plain.encode(prefix)
        suffix_part = [suf] + continuation.encode(suffix)
        ids = [plain.bos_id()] + (suffix_part + prefix_part if order == "spm" else prefix_part + suffix_part) + [mid]
    out = []
    for _ in range(48):
        token = int(model(torch.tensor([ids + out]))[0, -1].argmax())
        if token == plain.eos_id():
            break
        out.append(token)
        if order == "fallback" and "\n" in continuation.decode(out):
            break
    text = continuation.decode(out)
    return text.split("\n")[0] if order == "fallback" else text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a demo target GGUF file")
    parser.add_argument("--order", choices=("spm", "psm", "fallback"), default="spm")
    parser.add_argument("--problems", default=os.path.join(REPO, "resources/problems/infill-single-line.jsonl"))
    parser.add_argument("--cli", default=os.path.join(REPO, "build/app/specula-cli"))
    options = parser.parse_args()

    torch.set_num_threads(1)
    plain, continuation = fim.processors()
    model, _ = load_gguf(options.model)
    model = model.float()
    with open(options.problems, encoding="utf-8") as f:
        problems = [json.loads(line) for line in f if line.strip()]
    samples = [{"task_id": p["task_id"],
                "completion": middle(model, plain, continuation, p["prompt"], p["suffix"], options.order)}
               for p in problems]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.writelines(json.dumps(s) + "\n" for s in samples)
    try:
        result = subprocess.run([options.cli, "check", "--problems", options.problems, "--samples", f.name, "--json"],
                                capture_output=True, text=True, check=False)
    finally:
        os.unlink(f.name)
    verdicts = json.loads(result.stdout)["results"]
    print(f"{sum(v['verdict'] == 'passed' for v in verdicts)} of {len(verdicts)} holes pass ({options.order})")
    for sample, verdict in zip(samples, verdicts):
        if verdict["verdict"] != "passed":
            print(f"  {sample['task_id']}: {sample['completion'][:80]!r}")


if __name__ == "__main__":
    main()
