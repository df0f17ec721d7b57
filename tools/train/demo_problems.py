"""Writes resources/problems/demo.jsonl: the demo problem set, in HumanEval's format.

Thirty-two easy tasks written for Specula. Twenty-seven follow the families of the corpus
generator (tasks.py) with new names and often new wording, so the demo model can solve
some of them; the last five (FizzBuzz, run-length encoding, primes, ...) need more than
the demo model knows, so ranking has failures to show. Every canonical solution is
checked with python3 before the file is written.

Also resources/problems/demo-no-examples.jsonl: the same tasks with the docstrings'
examples left out (task ids DemoNoExamples/N), the prompts people most often type: there
the ranking has neither tests nor examples to go by (docs/performance.md).
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "resources/problems/demo.jsonl")
OUT_NO_EXAMPLES = os.path.join(os.path.dirname(OUT), "demo-no-examples.jsonl")

# (signature, docstring lines, canonical body, asserts on `candidate`)
PROBLEMS = [
    ("add_seven(x)", ["Return x plus 7.", ">>> add_seven(5)", "12"],
     "    return x + 7\n",
     ["candidate(0) == 7", "candidate(5) == 12", "candidate(-12) == -5"]),
    ("triple(n)", ["Return n multiplied by 3.", ">>> triple(4)", "12"],
     "    return n * 3\n",
     ["candidate(0) == 0", "candidate(4) == 12", "candidate(-3) == -9"]),
    ("is_negative(x)", ["Return True if x is less than zero.", ">>> is_negative(-4)", "True"],
     "    return x < 0\n",
     ["candidate(-4) is True", "candidate(0) is False", "candidate(7) is False"]),
    ("sum_of_list(numbers)", ["Return the sum of the numbers in numbers.",
                              ">>> sum_of_list([1, 2, 3])", "6"],
     "    total = 0\n    for v in numbers:\n        total += v\n    return total\n",
     ["candidate([]) == 0", "candidate([1, 2, 3]) == 6", "candidate([-5, 5, 10]) == 10"]),
    ("count_odd(nums)", ["Return how many numbers in nums are odd.", ">>> count_odd([1, 2, 3])", "2"],
     "    return sum(1 for v in nums if v % 2 == 1)\n",
     ["candidate([]) == 0", "candidate([1, 2, 3]) == 2", "candidate([2, 4, 7, 9, 11]) == 3"]),
    ("keep_negative(xs)", ["Return a list of the numbers in xs that are less than zero.",
                           ">>> keep_negative([3, -1, 0, -7])", "[-1, -7]"],
     "    return [v for v in xs if v < 0]\n",
     ["candidate([]) == []", "candidate([3, -1, 0, -7]) == [-1, -7]", "candidate([1, 2]) == []"]),
    ("halve_all(values)", ["Return a list with every element of values halved, rounded down.",
                           ">>> halve_all([4, 7, 10])", "[2, 3, 5]"],
     "    return [v // 2 for v in values]\n",
     ["candidate([]) == []", "candidate([4, 7, 10]) == [2, 3, 5]", "candidate([1]) == [0]"]),
    ("reverse_text(text)", ["Return text reversed.", ">>> reverse_text('abc')", "'cba'"],
     "    return text[::-1]\n",
     ["candidate('') == ''", "candidate('abc') == 'cba'", "candidate('level') == 'level'"]),
    ("count_spaces(s)", ["Return how many spaces s contains.", ">>> count_spaces('a b c')", "2"],
     "    count = 0\n    for c in s:\n        if c == ' ':\n            count += 1\n    return count\n",
     ["candidate('') == 0", "candidate('a b c') == 2", "candidate('  x ') == 3"]),
    ("make_upper(text)", ["Return text in upper case.", ">>> make_upper('hi there')", "'HI THERE'"],
     "    return text.upper()\n",
     ["candidate('hi there') == 'HI THERE'", "candidate('') == ''", "candidate('A1b') == 'A1B'"]),
    ("max_of_three(a, b, c)", ["Return the largest of a, b and c.", ">>> max_of_three(1, 5, 3)", "5"],
     "    best = a\n    if b > best:\n        best = b\n    if c > best:\n        best = c\n    return best\n",
     ["candidate(1, 5, 3) == 5", "candidate(9, 2, 3) == 9", "candidate(-1, -2, 0) == 0"]),
    ("product_of_list(nums)", ["Return the product of the numbers in nums.",
                               ">>> product_of_list([2, 3, 4])", "24"],
     "    result = 1\n    for v in nums:\n        result *= v\n    return result\n",
     ["candidate([]) == 1", "candidate([2, 3, 4]) == 24", "candidate([5, 0, 2]) == 0"]),
    ("cube_all(xs)", ["Return a list of the cubes of the numbers in xs.", ">>> cube_all([1, 2, 3])",
                      "[1, 8, 27]"],
     "    return [v ** 3 for v in xs]\n",
     ["candidate([]) == []", "candidate([1, 2, 3]) == [1, 8, 27]", "candidate([-2]) == [-8]"]),
    ("count_letter_a(s)", ["Return how many times the character 'a' occurs in s.",
                           ">>> count_letter_a('banana')", "3"],
     "    return s.count('a')\n",
     ["candidate('banana') == 3", "candidate('') == 0", "candidate('Apple') == 0"]),
    ("get_or_minus_one(d, key)", ["Return the value of key in d, or -1 if key is missing.",
                                  ">>> get_or_minus_one({'a': 3}, 'a')", "3"],
     "    return d.get(key, -1)\n",
     ["candidate({'a': 3}, 'a') == 3", "candidate({'a': 3}, 'b') == -1", "candidate({}, 'x') == -1"]),
    ("sum_of_squares(nums)", ["Return the sum of the squares of the numbers in nums.",
                              ">>> sum_of_squares([1, 2, 3])", "14"],
     "    return sum(v * v for v in nums)\n",
     ["candidate([]) == 0", "candidate([1, 2, 3]) == 14", "candidate([-2, 2]) == 8"]),
    ("first_word(s)", ["Return the first word of s, or an empty string if s has no words.",
                       ">>> first_word('hello big world')", "'hello'"],
     "    words = s.split()\n    if not words:\n        return ''\n    return words[0]\n",
     ["candidate('hello big world') == 'hello'", "candidate('') == ''", "candidate('  one') == 'one'"]),
    ("ends_with(s, suffix)", ["Return True if s ends with suffix.", ">>> ends_with('python', 'on')", "True"],
     "    return s.endswith(suffix)\n",
     ["candidate('python', 'on') is True", "candidate('python', 'py') is False", "candidate('', '') is True"]),
    ("total_length(words)", ["Return the total number of characters of the strings in words.",
                             ">>> total_length(['ab', 'cde'])", "5"],
     "    return sum(len(w) for w in words)\n",
     ["candidate([]) == 0", "candidate(['ab', 'cde']) == 5", "candidate(['', 'x']) == 1"]),
    ("power_of_two(n)", ["Return 2 to the power of n.", ">>> power_of_two(3)", "8"],
     "    return 2 ** n\n",
     ["candidate(0) == 1", "candidate(3) == 8", "candidate(10) == 1024"]),
    ("count_zeros(xs)", ["Return how many elements of xs are zero.", ">>> count_zeros([0, 1, 0])", "2"],
     "    count = 0\n    for v in xs:\n        if v == 0:\n            count += 1\n    return count\n",
     ["candidate([]) == 0", "candidate([0, 1, 0]) == 2", "candidate([5, 6]) == 0"]),
    ("values_sorted(d)", ["Return the values of d in sorted order.",
                          ">>> values_sorted({'a': 3, 'b': 1})", "[1, 3]"],
     "    return sorted(d.values())\n",
     ["candidate({}) == []", "candidate({'a': 3, 'b': 1}) == [1, 3]", "candidate({'x': 2, 'y': 2}) == [2, 2]"]),
    ("to_lowercase(text)", ["Return text in lower case.", ">>> to_lowercase('Hi There')", "'hi there'"],
     "    return text.lower()\n",
     ["candidate('Hi There') == 'hi there'", "candidate('') == ''", "candidate('ABC') == 'abc'"]),
    ("keep_even(nums)", ["Return a list of the even numbers in nums, in order.",
                         ">>> keep_even([1, 2, 3, 4])", "[2, 4]"],
     "    return [v for v in nums if v % 2 == 0]\n",
     ["candidate([1, 2, 3, 4]) == [2, 4]", "candidate([]) == []", "candidate([7, 9]) == []"]),
    ("double_values(xs)", ["Return a list with every element of xs doubled.",
                           ">>> double_values([1, 5])", "[2, 10]"],
     "    return [v * 2 for v in xs]\n",
     ["candidate([1, 5]) == [2, 10]", "candidate([]) == []", "candidate([-3]) == [-6]"]),
    ("is_mirror(word)", ["Return True if word reads the same forwards and backwards.",
                         ">>> is_mirror('noon')", "True"],
     "    return word == word[::-1]\n",
     ["candidate('noon') is True", "candidate('moon') is False", "candidate('') is True"]),
    ("count_words_in(text)", ["Return the number of words in text, separated by spaces.",
                              ">>> count_words_in('a big dog')", "3"],
     "    return len(text.split())\n",
     ["candidate('a big dog') == 3", "candidate('') == 0", "candidate('one') == 1"]),
    ("fizzbuzz(n)", ["Return 'FizzBuzz' if n is divisible by 15, 'Fizz' if by 3, 'Buzz' if by 5,",
                     "and otherwise n as a string.", ">>> fizzbuzz(9)", "'Fizz'"],
     "    if n % 15 == 0:\n        return 'FizzBuzz'\n    if n % 3 == 0:\n        return 'Fizz'\n"
     "    if n % 5 == 0:\n        return 'Buzz'\n    return str(n)\n",
     ["candidate(9) == 'Fizz'", "candidate(10) == 'Buzz'", "candidate(30) == 'FizzBuzz'", "candidate(7) == '7'"]),
    ("run_length(s)", ["Return the run-length encoding of s: each run of a repeated character",
                       "becomes the character followed by the run's length.",
                       ">>> run_length('aaabcc')", "'a3b1c2'"],
     "    out = ''\n    i = 0\n    while i < len(s):\n        j = i\n        while j < len(s) and s[j] == s[i]:\n"
     "            j += 1\n        out += s[i] + str(j - i)\n        i = j\n    return out\n",
     ["candidate('aaabcc') == 'a3b1c2'", "candidate('') == ''", "candidate('x') == 'x1'"]),
    ("is_prime(n)", ["Return True if n is a prime number.", ">>> is_prime(7)", "True"],
     "    if n < 2:\n        return False\n    for d in range(2, int(n ** 0.5) + 1):\n        if n % d == 0:\n"
     "            return False\n    return True\n",
     ["candidate(7) is True", "candidate(1) is False", "candidate(9) is False", "candidate(97) is True"]),
    ("balanced(s)", ["Return True if every '(' in s is closed by a later ')' and no ')' is unmatched.",
                     ">>> balanced('(()())')", "True"],
     "    depth = 0\n    for c in s:\n        if c == '(':\n            depth += 1\n        elif c == ')':\n"
     "            depth -= 1\n            if depth < 0:\n                return False\n    return depth == 0\n",
     ["candidate('(()())') is True", "candidate(')(') is False", "candidate('(()') is False", "candidate('') is True"]),
    ("gcd(a, b)", ["Return the greatest common divisor of the positive integers a and b.",
                   ">>> gcd(12, 18)", "6"],
     "    while b:\n        a, b = b, a % b\n    return a\n",
     ["candidate(12, 18) == 6", "candidate(7, 5) == 1", "candidate(10, 10) == 10"]),
]


def as_task(index, signature, doc, body, asserts, prefix="Demo"):
    lines = [f"    {doc[0]}"] + [f"    {line}" for line in doc[1:]]
    prompt = f"def {signature}:\n    \"\"\"{lines[0].strip()}\n" + "".join(l + "\n" for l in lines[1:]) + '    """\n'
    test = "def check(candidate):\n" + "".join(f"    assert {a}\n" for a in asserts)
    return {"task_id": f"{prefix}/{index}", "prompt": prompt, "canonical_solution": body,
            "test": test, "entry_point": signature.split("(")[0]}


def without_examples(index, signature, doc, body, asserts):
    text = doc[:next(i for i, line in enumerate(doc) if line.startswith(">>>"))]
    return as_task(index, signature, text, body, asserts, prefix="DemoNoExamples")


def passes(task, completion):
    program = task["prompt"] + completion + "\n" + task["test"] + "\n" + \
        f"check({task['entry_point']})\n"
    return subprocess.run([sys.executable, "-c", program], capture_output=True).returncode == 0


def main():
    tasks = [as_task(i, *problem) for i, problem in enumerate(PROBLEMS)]
    failing = [t["task_id"] for t in tasks if not passes(t, t["canonical_solution"])]
    if failing:
        raise SystemExit(f"canonical solutions fail: {failing}")
    # A test must be able to fail: a body that returns nothing useful must be rejected.
    lenient = [t["task_id"] for t in tasks if passes(t, "    return None\n")]
    if lenient:
        raise SystemExit(f"tests accept a wrong solution: {lenient}")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    for path, written in ((OUT, tasks), (OUT_NO_EXAMPLES, [without_examples(i, *p) for i, p in enumerate(PROBLEMS)])):
        with open(path, "w") as f:
            for task in written:
                f.write(json.dumps(task) + "\n")
        print(f"wrote {len(written)} tasks to {path}")
    print("every canonical solution passes, no test accepts `return None`")


if __name__ == "__main__":
    main()
