"""Does ranking pay for the editor? Best-of-N `content` against the first candidate alone.

Starts `specula-cli serve --port 0 --suggestions N` (a model without FIM tokens needs
--infill-fallback after `--`), sends every single-line hole of a fill-in-the-middle problem set to
POST /infill as llama.vim does (the prefix up to the cursor's line, the indentation typed as
`prompt`, the rest after a line end as the suffix; its sampling: top-k 40, top-p 0.9, T = 1),
once per seed, and scores with `specula-cli check` (the problems' tests, in the sandbox):

- best:  the answer's `content`, the ranked first of the N candidates;
- first: candidate 0 of the decode (`candidates[].index == 0`), what one candidate alone gives;
- any:   some candidate of the N passes (the ranking's ceiling).

"parses" is the filled file passing the checks' syntax step. Prints one Markdown table.

    python3 tools/eval/infill_ranking.py --cli build/app/specula-cli \\
        --problems resources/problems/infill-single-line.jsonl --suggestions 4 --seeds 0 1 2 -- --device cpu
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def start_server(options, extra):
    command = [options.cli, "serve", "--port", "0", "--suggestions", str(options.suggestions), *extra]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    if "listening on " not in line:
        server.kill()
        sys.exit(f"{' '.join(command)} did not start: {line}{server.stderr.read()}")
    return server, line.strip().split("listening on ")[1]


def infill(url, problem, seed, t_max_ms):
    cut = problem["prompt"].rfind("\n") + 1
    indent = problem["prompt"][cut:]
    body = {"input_prefix": problem["prompt"][:cut], "prompt": indent, "input_suffix": problem["suffix"],
            "input_extra": [], "n_predict": 64, "n_indent": len(indent), "top_k": 40, "top_p": 0.90,
            "samplers": ["top_k", "top_p", "infill"], "seed": seed, "stream": False, "cache_prompt": True,
            "t_max_prompt_ms": 500, "t_max_predict_ms": t_max_ms}
    request = urllib.request.Request(url + "/infill", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    start = time.monotonic()
    with urllib.request.urlopen(request, timeout=120) as response:
        answer = json.loads(response.read())
    return answer, time.monotonic() - start


def check(options, samples):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for task_id, completion in samples:
            f.write(json.dumps({"task_id": task_id, "completion": completion}) + "\n")
        path = f.name
    try:
        result = subprocess.run([options.cli, "check", "--problems", options.problems, "--samples", path, "--json"],
                                capture_output=True, text=True)
    finally:
        os.unlink(path)
    if result.returncode not in (0, 1):
        sys.exit(f"specula-cli check failed ({result.returncode}):\n{result.stderr}")
    return json.loads(result.stdout)["results"]  # in the samples' order


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", default="build/app/specula-cli")
    parser.add_argument("--problems", default="resources/problems/infill-single-line.jsonl")
    parser.add_argument("--suggestions", type=int, default=4)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--t-max-ms", type=int, default=1000, help="t_max_predict_ms of each request")
    parser.add_argument("serve_args", nargs="*", help="more options of serve, after --")
    options = parser.parse_args()
    with open(options.problems, encoding="utf-8") as f:
        problems = [json.loads(line) for line in f if line.strip()]

    server, url = start_server(options, options.serve_args)
    rows = []  # (task_id, best, first, all candidates, ranked_by, ranking_ms, seconds)
    try:
        for seed in options.seeds:
            for p in problems:
                answer, seconds = infill(url, p, seed, options.t_max_ms)
                candidates = answer["candidates"]
                first = next(c["content"] for c in candidates if c["index"] == 0)
                rows.append((p["task_id"], answer["content"], first, [c["content"] for c in candidates],
                             answer["ranked_by"], answer["ranking_ms"], seconds))
    finally:
        server.terminate()
        server.wait()

    best = check(options, [(r[0], r[1]) for r in rows])
    first = check(options, [(r[0], r[2]) for r in rows])
    everyone = check(options, [(r[0], c) for r in rows for c in r[3]])
    n = len(rows)
    passed = lambda results: sum(r["verdict"] == "passed" for r in results)
    parsed = lambda results: sum(r["checks"] != "syntax" for r in results)
    any_passed, at = 0, 0
    for r in rows:
        any_passed += any(x["verdict"] == "passed" for x in everyone[at:at + len(r[3])])
        at += len(r[3])
    pct = lambda k: f"{100 * k / n:.1f}% ({k})"
    print(f"{len(problems)} holes x {len(options.seeds)} seeds = {n} requests, N = {options.suggestions}, "
          f"t_max_predict_ms {options.t_max_ms}; ranked by the checks: "
          f"{pct(sum(r[4] == 'checks' for r in rows))}; ranking ms median {statistics.median(r[5] for r in rows):.1f}, "
          f"request s median {statistics.median(r[6] for r in rows):.3f}, max {max(r[6] for r in rows):.3f}\n")
    print("| | parses | passes |")
    print("|---|---|---|")
    print(f"| first candidate alone | {pct(parsed(first))} | {pct(passed(first))} |")
    print(f"| best of {options.suggestions} (`content`) | {pct(parsed(best))} | {pct(passed(best))} |")
    print(f"| some candidate of {options.suggestions} | | {pct(any_passed)} |")


if __name__ == "__main__":
    main()
