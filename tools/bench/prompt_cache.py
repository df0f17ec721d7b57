#!/usr/bin/env python3
"""The prompt cache's figures of docs/performance.md: time to the answer of a repeated
ghost-text /infill request (llama.vim's fields, a prefix of about 1,000 tokens, greedy so that
both servers write the same text) on `specula-cli serve` with its prompt cache and with
--prompt-cache-blocks 0, the demo pair on the CPU backend; then the same request with
n_predict -1 and t_max_predict_ms 1000, whose answer must come within 1 s plus the prompt's
time. Both servers run side by side and are asked in turn, round by round; medians.

Usage: tools/bench/prompt_cache.py [SPECULA_CLI] [ROUNDS] [FUNCTIONS] [MODEL ARGS...]
(standard library only). FUNCTIONS: functions in the prefix, about 50 tokens each (default 20);
MODEL ARGS: serve's model options (default: the demo pair, whose context of 256 positions cuts
the prefix to 3/4 of the room left after n_predict).
"""
import json
import re
import statistics
import subprocess
import sys
import time
import urllib.request

CLI = sys.argv[1] if len(sys.argv) > 1 else "build/app/specula-cli"
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 9
FUNCTIONS = int(sys.argv[3]) if len(sys.argv) > 3 else 20
MODEL = sys.argv[4:]


def start(extra):
    proc = subprocess.Popen([CLI, "serve", "--device", "cpu", "--threads", "2", "--port", "0", "--infill-fallback"]
                            + MODEL + extra, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    match = re.search(r"listening on (http://[0-9.]+:[0-9]+)", line)
    if not match:
        proc.kill()
        sys.exit("serve did not start: " + line)
    return proc, match.group(1)


def post(url, body):
    request = urllib.request.Request(url + "/infill", json.dumps(body).encode(), {"Content-Type": "application/json"})
    began = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        answer = json.load(response)
    return 1000 * (time.perf_counter() - began), answer


def prefix(functions):
    text = "import math\n\n\n"
    for i in range(functions):
        text += (f"def step_{i}(values, scale={i}):\n    \"\"\"Scale the values and add their running total.\"\"\"\n"
                 f"    total = 0\n    out = []\n    for value in values:\n        total = total + value * scale\n"
                 f"        out.append(total)\n    return out\n\n\n")
    return text + "def mean(values):\n    \"\"\"Return the arithmetic mean of a list of numbers.\"\"\"\n    total = 0\n"


def ghost_text(text, n_predict=128):
    return {"input_prefix": text, "input_suffix": "\n    return total / len(values)\n", "input_extra": [],
            "prompt": "", "n_predict": n_predict, "stop": [], "n_indent": 0, "top_k": 40, "top_p": 0.90,
            "temperature": 0, "samplers": ["top_k", "top_p", "infill", "temperature"], "stream": False,
            "cache_prompt": True, "t_max_prompt_ms": 500, "t_max_predict_ms": 1000}


def main():
    servers = {"cache": start([]), "no cache": start(["--prompt-cache-blocks", "0"])}
    try:
        text = prefix(FUNCTIONS)
        _, probe = post(servers["no cache"][1], ghost_text(text))
        print(f"prefix: {probe['tokens_evaluated']} tokens; {time.strftime('%Y-%m-%d', time.gmtime())}; "
              f"load average before: {open('/proc/loadavg').read().split()[:3]}")
        for name, (_, url) in servers.items():
            post(url, ghost_text(text))  # the first: fills the cache (and warms the server)
        for label, body in (("n_predict 128", ghost_text(text)), ("n_predict -1, t_max_predict_ms 1000",
                                                                   ghost_text(text, -1))):
            rows = {name: [] for name in servers}
            contents = {}
            for _ in range(ROUNDS):
                for name, (_, url) in servers.items():
                    ms, answer = post(url, body)
                    t = answer["timings"]
                    rows[name].append((ms, t["prompt_ms"], t["prompt_n"], answer["tokens_cached"], t["predicted_n"],
                                       t["predicted_ms"]))
                    contents.setdefault(name, answer["content"])
            print(f"\n{label}: same text with and without the cache: {contents['cache'] == contents['no cache']}")
            print("| server | answer ms | prompt ms | prompt_n | tokens_cached | predicted_n | predicted ms |"
                  " answer - prompt ms (max) |")
            print("|---|---|---|---|---|---|---|---|")
            for name, r in rows.items():
                med = [statistics.median(col) for col in zip(*r)]
                worst = max(ms - prompt_ms for ms, prompt_ms, *_ in r)
                print(f"| {name} | {med[0]:.1f} | {med[1]:.1f} | {med[2]:.0f} | {med[3]:.0f} | {med[4]:.0f} | "
                      f"{med[5]:.1f} | {worst:.1f} |")
        print(f"\nload average after: {open('/proc/loadavg').read().split()[:3]}")
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait()


main()
