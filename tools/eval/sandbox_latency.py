"""Per-candidate latency of the sandbox's three runs, cold and warm, and `--jobs 2` against 1.

Writes HumanEval's 164 canonical solutions as samples, then runs `specula-cli check --json`
on them for each `--run` (checks: the checks alone; examples: the checks and the docstring's
examples; tests: the checks and the tests) and each `--sandbox` (cold, warm) with `--jobs 1`,
and `--run tests --sandbox warm` with `--jobs 1` and `--jobs 2`, in interleaved rounds. Prints
a Markdown table of the medians over rounds of each run's median and 95th percentile (the
JSON's `seconds`), the wall time of each command, and the load average before each round.

    python3 tools/eval/sandbox_latency.py --humaneval ../shared/data/humaneval/HumanEval.jsonl.gz
"""
import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def write_canonical(humaneval, path):
    with gzip.open(humaneval, "rt", encoding="utf-8") as f, open(path, "w", encoding="utf-8") as out:
        for line in f:
            task = json.loads(line)
            out.write(json.dumps({"task_id": task["task_id"], "completion": task["canonical_solution"]}) + "\n")


def check(cli, humaneval, samples, run, sandbox, jobs):
    command = [cli, "check", "--problems", humaneval, "--samples", samples, "--run", run, "--sandbox", sandbox,
               "--jobs", str(jobs), "--json"]
    start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    wall = time.monotonic() - start
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    out = json.loads(result.stdout)
    verdicts = {}
    for r in out["results"]:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    return {"median": out["seconds"]["median"], "p95": out["seconds"]["p95"], "wall": wall, "verdicts": verdicts}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--humaneval", required=True, help="HumanEval.jsonl.gz")
    parser.add_argument("--cli", default=os.path.join(REPO, "build", "app", "specula-cli"))
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()

    configs = [(run, sandbox, 1) for sandbox in ("cold", "warm") for run in ("checks", "examples", "tests")]
    configs.append(("tests", "warm", 2))
    rows = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        samples = os.path.join(tmp, "canonical.jsonl")
        write_canonical(options.humaneval, samples)
        for round_ in range(options.rounds):
            print(f"round {round_ + 1}: load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
            for config in configs:
                rows[config].append(check(options.cli, options.humaneval, samples, *config))

    print("| `--run` | `--sandbox` | `--jobs` | median | 95th percentile | wall | verdicts |")
    print("|---|---|---|---|---|---|---|")
    for (run, sandbox, jobs), results in rows.items():
        median = statistics.median(r["median"] for r in results) * 1000
        p95 = statistics.median(r["p95"] for r in results) * 1000
        wall = statistics.median(r["wall"] for r in results)
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(results[-1]["verdicts"].items()))
        print(f"| {run} | {sandbox} | {jobs} | {median:.1f} ms | {p95:.1f} ms | {wall:.2f} s | {verdicts} |")
    one = [r["wall"] for r in rows[("tests", "warm", 1)]]
    two = [r["wall"] for r in rows[("tests", "warm", 2)]]
    ratios = [a / b for a, b in zip(one, two)]
    print(f"\n`--jobs 1` / `--jobs 2` wall, warm tests, per round: {', '.join(f'{r:.2f}' for r in ratios)}")


if __name__ == "__main__":
    main()
