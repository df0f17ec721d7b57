"""The demo draft against the demo target on the demo problems, through specula-cli: acceptance
rate, and the speed-up of `-d draft` over `--draft none`.

Runs `specula-cli generate` (a thread per core, code stops, drafter `model`, policy --policy (default
goodput), at most --max-tokens new tokens) on every prompt of resources/problems/demo.jsonl.

- Acceptance: one candidate per prompt; draft tokens accepted / proposed, summed over prompts.
- Speed (--speed): for each N and temperature, every prompt once with the draft and once
  without, one after the other, repeated --repeats times; each repeat's rate is the generated
  tokens of all prompts over their summed decoding time (`wall_s`, model loading excluded).
  The rates are the median repeat's; the speed-up is the median over repeats of the ratio
  between the two rates of the same repeat, with the lowest and highest such ratio (as
  `specula-cli bench-spec` forms its speed-ups), so that a phase of a shared machine falls
  on both sides of a ratio.

    python3 tools/train/acceptance.py --temps 0 0.8 --speed --n 1 4 8 --repeats 3
"""
import argparse
import json
import os
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def generate(options, prompt, temp, n, drafter):
    command = [options.cli, "generate", "-p", prompt, "--temp", str(temp), "-n", str(n),
               "--code-stops", "--max-tokens", str(options.max_tokens), "--json",
               "--seed", str(options.seed)]
    command += ["--draft", "none"] if drafter == "none" else ["--draft-policy", options.policy]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", default=os.path.join(REPO, "build/app/specula-cli"))
    parser.add_argument("--problems", default=os.path.join(REPO, "resources/problems/demo.jsonl"))
    parser.add_argument("--temps", type=float, nargs="+", default=[0.0, 0.8])
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policy", default="goodput", help="draft-length policy (goodput, adaptive, fixed:K, bass)")
    parser.add_argument("--speed", action="store_true", help="also measure the speed-up")
    parser.add_argument("--n", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()

    with open(options.problems, encoding="utf-8") as lines:
        prompts = [json.loads(line)["prompt"] for line in lines if line.strip()]
    for temp in options.temps:
        accepted = proposed = 0
        for prompt in prompts:
            for candidate in generate(options, prompt, temp, 1, "model")["candidates"]:
                accepted += candidate["accepted"]
                proposed += candidate["proposed"]
        print(f"T = {temp}: {accepted} of {proposed} draft tokens accepted "
              f"({accepted / max(1, proposed):.2f}) on {len(prompts)} prompts", flush=True)
    if not options.speed:
        return

    print("| T | N | tokens/s, --draft none | tokens/s, -d draft | acceptance | speed-up | range |")
    print("|---|---|---|---|---|---|---|")
    for temp in options.temps:
        for n in options.n:
            rates = {"none": [], "model": []}
            accepted = proposed = 0
            for _ in range(options.repeats):
                tokens = {"none": 0, "model": 0}
                seconds = {"none": 0.0, "model": 0.0}
                for prompt in prompts:
                    for drafter in ("none", "model"):
                        result = generate(options, prompt, temp, n, drafter)
                        tokens[drafter] += result["totals"]["generated_tokens"]
                        seconds[drafter] += result["totals"]["wall_s"]
                        if drafter == "model":
                            accepted += sum(c["accepted"] for c in result["candidates"])
                            proposed += sum(c["proposed"] for c in result["candidates"])
                for drafter in rates:
                    rates[drafter].append(tokens[drafter] / seconds[drafter])
            none, model = statistics.median(rates["none"]), statistics.median(rates["model"])
            ratios = [m / b for m, b in zip(rates["model"], rates["none"])]
            print(f"| {temp} | {n} | {none:.0f} | {model:.0f} | {accepted / max(1, proposed):.2f} "
                  f"| {statistics.median(ratios):.2f}x | {min(ratios):.2f}-{max(ratios):.2f} |", flush=True)


if __name__ == "__main__":
    main()
