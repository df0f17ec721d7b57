"""Single-line fill-in-the-middle problems from the canonical solutions of problem sets.

Each non-blank line of a canonical solution becomes one hole: the prompt and the solution's
lines before it are the code before the hole (`prompt`), the line's indentation and an empty
rest of the line are where the cursor is (as llama.vim sends it: the indentation typed), the
lines after it, after a line end, are the code after the hole (`suffix`). The hole line
without its indentation is the `canonical_solution`. The records are HumanEval infilling's
format, which `specula-cli check` and `eval` read (the completion goes between prompt and
suffix); `prompt` here ends with the hole's indentation.

    python3 tools/eval/make_infill_holes.py resources/problems/everyday.jsonl resources/problems/demo.jsonl \
        > resources/problems/infill-single-line.jsonl
"""
import json
import sys


def holes(problem):
    lines = problem["canonical_solution"].splitlines(keepends=True)
    for i, line in enumerate(lines):
        body = line.rstrip("\n")
        if not body.strip():
            continue
        indent = body[: len(body) - len(body.lstrip())]
        yield {
            "task_id": f"{problem['task_id']}/L{i}",
            "prompt": problem["prompt"] + "".join(lines[:i]) + indent,
            "suffix": "\n" + "".join(lines[i + 1:]),
            "canonical_solution": body.lstrip(),
            "test": problem["test"],
            "entry_point": problem["entry_point"],
        }


def main():
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    for hole in holes(json.loads(line)):
                        print(json.dumps(hole))


if __name__ == "__main__":
    main()
