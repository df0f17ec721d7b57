"""How often each ranking rule puts a passing candidate first, with the tests hidden from the ranker.

Runs `specula-cli eval --rank-only-with likelihood checks docstring agreement --json` on every
problem set given (default: every .jsonl and .jsonl.gz in resources/problems/) for each sample
set, and prints a Markdown table per set: the top-ranked candidate's pass rate under each rule
(the problems' tests only score), beside Pass@All (some candidate passes: the oracle) and
pass@1. The rules add one criterion each: likelihood (mean log-probability), checks (the
candidate parses, imports and defines the prompt's function), docstring (its examples as tests),
agreement (the size of the candidate's behaviour group); see docs/evaluation.md.

Candidate i of a run samples with seed + i, so sample set s runs with --seed s * N: the sets
share no candidate.

    python3 tools/eval/ranking.py                       # the demo pair, N = 8, T = 0.8, sets 0-2
    python3 tools/eval/ranking.py --sets 5 --problems resources/problems/demo.jsonl -- --draft none
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RULES = ["likelihood", "checks", "docstring", "agreement"]


def evaluate(options, problems, sample_set, extra):
    command = [options.cli, "eval", "--problems", problems, "-n", str(options.n), "--temp", str(options.temp),
               "--seed", str(sample_set * options.n), "--budget", str(options.budget), "--json",
               "--rank-only-with", *RULES, *extra]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    if options.keep:
        os.makedirs(options.keep, exist_ok=True)
        name = os.path.basename(problems).split(".")[0]
        with open(os.path.join(options.keep, f"{name}-set{sample_set}.json"), "w", encoding="utf-8") as out:
            out.write(result.stdout)
    return json.loads(result.stdout)["summary"]


def percent(values):
    return f"{100 * statistics.mean(values):.1f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", default=os.path.join(REPO, "build/app/specula-cli"))
    parser.add_argument("--problems", nargs="+", help="problem sets (default: resources/problems/*.jsonl*)")
    parser.add_argument("--sets", type=int, default=3, help="sample sets 0..S-1 (default 3)")
    parser.add_argument("-n", type=int, default=8, help="candidates per problem (default 8)")
    parser.add_argument("--temp", type=float, default=0.8)
    parser.add_argument("--budget", type=float, default=30.0, help="seconds per problem (default 30)")
    parser.add_argument("--keep", metavar="DIR", help="also write each run's eval --json output to DIR")
    parser.add_argument("extra", nargs="*", help="after --: more specula-cli eval options (a model, a drafter)")
    options = parser.parse_args()
    problem_sets = options.problems or sorted(glob.glob(os.path.join(REPO, "resources/problems/*.jsonl*")))

    for problems in problem_sets:
        runs = []
        for sample_set in range(options.sets):
            summary = evaluate(options, problems, sample_set, options.extra)
            runs.append(summary)
            top = summary["top1_rank_only_with"]
            print(f"{os.path.basename(problems)}, set {sample_set}: " +
                  ", ".join(f"{rule} {100 * top[rule]:.1f}%" for rule in RULES) +
                  f", Pass@All {100 * summary['pass_all']:.1f}%", file=sys.stderr, flush=True)
        n_problems = runs[0]["problems"]
        print(f"\n{os.path.relpath(problems, REPO)}: {n_problems} problems, N = {options.n}, T = {options.temp}, "
              f"sample sets 0-{options.sets - 1}\n")
        print("| top-1 ranked by | " + " | ".join(f"set {s}" for s in range(options.sets)) +
              " | mean | vs likelihood | of Pass@All |")
        print("|---|" + "---|" * (options.sets + 3))
        likelihood = statistics.mean(r["top1_rank_only_with"]["likelihood"] for r in runs)
        oracle = statistics.mean(r["pass_all"] for r in runs)
        for rule, label in zip(RULES, ["likelihood only", "checks + likelihood", "+ docstring examples",
                                       "+ agreement (the full rule)"]):
            values = [r["top1_rank_only_with"][rule] for r in runs]
            mean = statistics.mean(values)
            print(f"| {label} | " + " | ".join(f"{100 * v:.1f}" for v in values) + f" | {100 * mean:.1f} | " +
                  (f"{mean / likelihood:.2f}x" if likelihood > 0 else "-") + " | " +
                  (f"{100 * mean / oracle:.0f} %" if oracle > 0 else "-") + " |")
        print("| Pass@All (oracle) | " + " | ".join(f"{100 * r['pass_all']:.1f}" for r in runs) +
              f" | {percent([r['pass_all'] for r in runs])} | | |")
        pass1 = [r["pass_at_k"].get("pass@1", 0.0) for r in runs]
        print("| pass@1 (a random candidate) | " + " | ".join(f"{100 * v:.1f}" for v in pass1) +
              f" | {percent(pass1)} | | |")


if __name__ == "__main__":
    main()
