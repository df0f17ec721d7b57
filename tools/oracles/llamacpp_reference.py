#!/usr/bin/env python3
"""llama.cpp's and transformers' figures for the real SmolLM2-135M-Instruct Q4_1 file, for the
tests that hold the engine to them (test_cli_tokenize, test_forward_reference):

- `tokenize`: the ids llama.cpp's `llama-tokenize --ids --no-escape --stdin` gives code and
  Unicode strings, plain (`--no-parse-special`, as `specula-cli tokenize`) and with special
  tokens parsed (llama-tokenize's default, `specula-cli tokenize --parse-special`).
- `greedy`: for five code prompts (no BOS: the file's tokenizer.ggml.add_bos_token is false,
  and neither llama.cpp nor `specula-cli generate` adds one), 16 greedy tokens from llama.cpp
  (libllama through llama-cpp-python's ctypes bindings of the same commit: argmax of the
  last position's logits, one token at a time) and from `transformers` in float32, each step
  with the gap between the best and the second-best logit, so a later parting can be told
  from a near tie.
- `perplexity`: the Python text of tests/data/perplexity_oracle.json at a context of 128.
  llama-perplexity cuts the text into chunks of 128 tokens (only whole chunks, at least two)
  and scores the second half of each (positions 65..127, from the logits of 64..126);
  `specula-cli perplexity` cuts it into windows of 128 and scores every token of a window but
  its first, the last short window too. `transformers` (the GGUF dequantized to float32) is
  scored both ways from the same logits.

Usage: python3 tools/oracles/llamacpp_reference.py REAL_MODELS_DIR LLAMA_BIN_DIR [LLAMA_SRC_DIR]
    > tests/data/smollm2_llamacpp_reference.json
LLAMA_BIN_DIR holds llama-tokenize, llama-perplexity and libllama.so of a CPU build of
llama.cpp (cmake -DBUILD_SHARED_LIBS=ON); LLAMA_SRC_DIR, its git checkout, names the commit.
`llama_cpp` (llama-cpp-python's Python package, whose vendored llama.cpp can be that source)
must be importable; LLAMA_CPP_LIB_PATH is pointed at LLAMA_BIN_DIR unless set. Needs `torch`,
`transformers` (its GGUF loader needs `gguf` and `accelerate`) and `numpy`. Development only.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONTEXT = 128
GREEDY_TOKENS = 16
THREADS = "2"

STRINGS = [
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * 0.5f;  // halve\n}\r\n",
    "SELECT id, name FROM users WHERE email LIKE '%@example.com' ORDER BY 2 DESC;",
    "    x = {'k': [1, 2.5e-3, None], \"s\": r'\\d+'}  # 1234567\n",
    "const π = 3.14159; // ≈ pi, Δx → 0, ∑ᵢ xᵢ²",
    "café naïve — ünïcödé 🚀 日本語 Ελληνικά русский العربية 한국어 हिन्दी",
    "emoji 👩‍💻 🇫🇷 ❤️ 1️⃣ and zero\u200bwidth, tab\tend   ",
    "<|im_start|>user\nWrite a function.<|im_end|>\n<|im_start|>assistant\n",
    "  indented\tand\n\nnewlines  ",
    "<div class=\"x\">&amp; &lt;tag&gt;</div>\n",
]

PROMPTS = [
    "def fibonacci(n):\n    ",
    "import numpy as np\n\n\ndef mean_squared_error(y_true, y_pred):\n",
    "#include <stdio.h>\n\nint main(void) {\n",
    "function debounce(fn, ms) {\n",
    "class Stack:\n    def __init__(self):\n        ",
]


def run(argv, stdin=None):
    done = subprocess.run(argv, input=stdin, capture_output=True, check=True)
    return done.stdout.decode("utf-8")


def llama_tokenize(bin_dir, model, text, parse_special):
    argv = [os.path.join(bin_dir, "llama-tokenize"), "-m", model, "--stdin", "--no-escape", "--ids", "--log-disable"]
    if not parse_special:
        argv.append("--no-parse-special")
    return json.loads(run(argv, text.encode("utf-8")).strip().splitlines()[-1])


def top_two_gap(row):
    best, second = np.sort(np.asarray(row, dtype=np.float64))[-2:][::-1]
    return float(best - second)


def llama_greedy(model, prompt_ids):
    from llama_cpp import Llama
    llm = Llama(model_path=model, n_ctx=256, n_batch=256, n_threads=int(THREADS), logits_all=True, verbose=False)
    llm.eval(prompt_ids)
    ids, gaps = [], []
    for _ in range(GREEDY_TOKENS):
        row = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        token = int(np.argmax(row))
        ids.append(token)
        gaps.append(top_two_gap(row))
        llm.eval([token])
    text = [llm.detokenize(ids[:n]).decode("utf-8", errors="replace") for n in (8, len(ids))]
    return ids, gaps, text


def hf_greedy(hf, prompt_ids):
    import torch
    ids, gaps = [], []
    seq = list(prompt_ids)
    with torch.no_grad():
        for _ in range(GREEDY_TOKENS):
            row = hf(torch.tensor([seq])).logits[0, -1].double().numpy()
            token = int(np.argmax(row))
            ids.append(token)
            gaps.append(top_two_gap(row))
            seq.append(token)
    return ids, gaps


def nll_rows(logits, window):
    """-log p of window[1:], from each row of logits (positions 0..len-2), in float64."""
    rows = logits[:-1].astype(np.float64)
    top = rows.max(axis=1, keepdims=True)
    log_sum = np.log(np.exp(rows - top).sum(axis=1)) + top[:, 0]
    return log_sum - rows[np.arange(len(window) - 1), window[1:]]


def hf_perplexities(hf, ids):
    import torch

    def logits(window):
        with torch.no_grad():
            return hf(torch.tensor([window])).logits[0].float().numpy()

    # specula-cli perplexity's windows: [0,128), [128,256), ...; all but each first scored
    ours_nll, ours_scored = 0.0, 0
    for start in range(0, len(ids), CONTEXT):
        window = ids[start:start + CONTEXT]
        if len(window) < 2:
            break
        ours_nll += nll_rows(logits(window), window).sum()
        ours_scored += len(window) - 1
    # llama-perplexity's: whole chunks of 128, positions first+1..127 scored (first = 64)
    first = CONTEXT // 2
    llama_nll, llama_scored = 0.0, 0
    for c in range(len(ids) // CONTEXT):
        window = ids[c * CONTEXT:(c + 1) * CONTEXT]
        llama_nll += nll_rows(logits(window), window)[first:].sum()
        llama_scored += CONTEXT - 1 - first
    return ({"scored": ours_scored, "perplexity": math.exp(ours_nll / ours_scored)},
            {"scored": llama_scored, "perplexity": math.exp(llama_nll / llama_scored)})


def llama_perplexity(bin_dir, model, text):
    with tempfile.NamedTemporaryFile("w", suffix=".py", encoding="utf-8", delete=False) as f:
        f.write(text)
    argv = [os.path.join(bin_dir, "llama-perplexity"), "-m", model, "-f", f.name, "-c", str(CONTEXT), "-t", THREADS,
            "--no-escape"]
    done = subprocess.run(argv, capture_output=True, check=True)
    os.unlink(f.name)
    log = (done.stdout + done.stderr).decode("utf-8")
    final = [line for line in log.splitlines() if "Final estimate: PPL =" in line][-1]
    chunks = [line for line in log.splitlines() if "calculating perplexity over" in line][-1]
    n_chunks = int(chunks.split("over ")[1].split(" chunks")[0])
    return {"command": "llama-perplexity -m MODEL -f TEXT -c %d -t %s --no-escape" % (CONTEXT, THREADS),
            "log": [chunks.split(": ", 1)[-1].strip(), final.strip()],
            "chunks": n_chunks, "scored": n_chunks * (CONTEXT - 1 - CONTEXT // 2),
            "perplexity": float(final.split("PPL =")[1].split("+/-")[0])}


def main(argv):
    models_dir, bin_dir = argv[1], os.path.abspath(argv[2])
    src_dir = argv[3] if len(argv) > 3 else None
    os.environ.setdefault("LLAMA_CPP_LIB_PATH", bin_dir)
    model = os.path.join(models_dir, NAME)
    import llama_cpp
    import torch
    import transformers

    version = subprocess.run([os.path.join(bin_dir, "llama-perplexity"), "--version"],
                             capture_output=True).stderr.decode("utf-8").strip()
    commit = run(["git", "-C", src_dir, "rev-parse", "HEAD"]).strip() if src_dir else None

    with open(os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "perplexity_oracle.json"),
              encoding="utf-8") as f:
        text = json.load(f)["text"]

    tokenize = [{"text": s, "ids": llama_tokenize(bin_dir, model, s, False),
                 "special_ids": llama_tokenize(bin_dir, model, s, True)} for s in STRINGS]

    hf = transformers.AutoModelForCausalLM.from_pretrained(models_dir, gguf_file=NAME, dtype=torch.float32)
    hf.eval()
    torch.set_num_threads(int(THREADS))

    greedy = []
    for p in PROMPTS:
        prompt_ids = llama_tokenize(bin_dir, model, p, False)
        ids, gaps, continuation = llama_greedy(model, prompt_ids)
        hf_ids, hf_gaps = hf_greedy(hf, prompt_ids)
        greedy.append({"prompt": p, "prompt_ids": prompt_ids, "llama_cpp_ids": ids,
                       "llama_cpp_text_8": continuation[0], "llama_cpp_text": continuation[1],
                       "llama_cpp_top_gaps": [round(g, 4) for g in gaps], "transformers_ids": hf_ids,
                       "transformers_top_gaps": [round(g, 4) for g in hf_gaps]})

    text_ids = llama_tokenize(bin_dir, model, text, False)
    hf_ours, hf_llama = hf_perplexities(hf, text_ids)
    out = {
        "script": "tools/oracles/llamacpp_reference.py",
        "file": NAME,
        "llama_cpp": {"commit": commit, "version": version, "python_bindings": "llama-cpp-python " + llama_cpp.__version__},
        "transformers": {"version": transformers.__version__, "torch": torch.__version__, "dtype": "float32"},
        "tokenize": tokenize,
        "greedy": greedy,
        "perplexity": {
            "text_from": "tests/data/perplexity_oracle.json",
            "context": CONTEXT,
            "ids": text_ids,
            "llama_perplexity": llama_perplexity(bin_dir, model, text),
            "transformers_llama_windows": hf_llama,
            "transformers_specula_windows": hf_ours,
        },
    }
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main(sys.argv)
