"""The demo draft's acceptance rate against the demo target on the demo problems, via specula-cli.

Runs `specula-cli generate` (one candidate, code stops, drafter `model`, policy `adaptive`)
on every prompt of resources/problems/demo.jsonl and sums the draft tokens proposed and
accepted, once per temperature.

    python3 tools/train/acceptance.py --cli build/app/specula-cli --temps 0 0.8
"""
import argparse
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", default=os.path.join(REPO, "build/app/specula-cli"))
    parser.add_argument("--problems", default=os.path.join(REPO, "resources/problems/demo.jsonl"))
    parser.add_argument("--temps", type=float, nargs="+", default=[0.0, 0.8])
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args()

    with open(options.problems, encoding="utf-8") as lines:
        prompts = [json.loads(line)["prompt"] for line in lines if line.strip()]
    for temp in options.temps:
        accepted = proposed = 0
        for prompt in prompts:
            result = subprocess.run(
                [options.cli, "generate", "-p", prompt, "--temp", str(temp), "-n", "1",
                 "--code-stops", "--max-tokens", str(options.max_tokens), "--json",
                 "--seed", str(options.seed), "--draft-policy", "adaptive"],
                capture_output=True, text=True, check=True)
            for candidate in json.loads(result.stdout)["candidates"]:
                accepted += candidate["accepted"]
                proposed += candidate["proposed"]
        print(f"T = {temp}: {accepted} of {proposed} draft tokens accepted "
              f"({accepted / max(1, proposed):.2f}) on {len(prompts)} prompts")


if __name__ == "__main__":
    main()
