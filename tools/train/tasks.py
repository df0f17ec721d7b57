"""Generator of small, simple Python function tasks for the demo corpus.

Each task is a HumanEval-style function: a signature, a docstring with one or two
doctest examples, and a short correct body. Every family below is a template over
random names, constants and docstring phrasings; the examples in the docstring are
computed by running the body, so every generated function is correct by construction.

    python3 tasks.py --seed 1 --count 5     # prints five tasks
"""
import argparse
import random

# Each family: (names, args, doc phrasings, body, example-input maker).
# `{k}` is a random small constant; `{a}` etc. are the argument names.
NUMBER_ARGS = ["x", "n", "a", "value", "num"]
LIST_ARGS = ["xs", "nums", "numbers", "values", "items", "lst", "arr"]
STRING_ARGS = ["s", "text", "word", "string", "name"]
DICT_ARGS = ["d", "mapping", "counts", "table"]


def ints(rng, lo=-9, hi=20):
    return rng.randint(lo, hi)


def int_list(rng, lo=-5, hi=12):
    return [rng.randint(lo, hi) for _ in range(rng.randint(0, 6))]


def word(rng):
    return rng.choice(["apple", "banana", "cat", "dog", "hello", "level", "python", "code",
                       "Data", "abc", "noon", "Zebra", "test", "moon", "sky", "tree"])


def sentence(rng):
    return " ".join(word(rng) for _ in range(rng.randint(1, 4)))


def str_dict(rng):
    return {word(rng): rng.randint(0, 9) for _ in range(rng.randint(1, 4))}


# name templates, docstring templates, body, args kind, input maker
FAMILIES = [
    # arithmetic on one number
    (["add_{k}", "plus_{k}", "increment_by_{k}"], "num",
     ["Return {a} plus {k}.", "Add {k} to {a} and return the result."],
     "    return {a} + {k}\n", lambda r: (ints(r),)),
    (["subtract_{k}", "minus_{k}"], "num",
     ["Return {a} minus {k}.", "Subtract {k} from {a}."],
     "    return {a} - {k}\n", lambda r: (ints(r),)),
    (["times_{k}", "multiply_by_{k}", "scale_by_{k}"], "num",
     ["Return {a} multiplied by {k}.", "Multiply {a} by {k}."],
     "    return {a} * {k}\n", lambda r: (ints(r),)),
    (["square", "squared", "square_of"], "num",
     ["Return the square of {a}.", "Return {a} squared."],
     "    return {a} * {a}\n", lambda r: (ints(r),)),
    (["cube", "cubed"], "num",
     ["Return the cube of {a}.", "Return {a} to the power of three."],
     "    return {a} ** 3\n", lambda r: (ints(r, -5, 6),)),
    (["is_even", "even"], "num",
     ["Return True if {a} is even, otherwise False.", "Check whether {a} is even."],
     "    return {a} % 2 == 0\n", lambda r: (ints(r),)),
    (["is_odd", "odd"], "num",
     ["Return True if {a} is odd, otherwise False.", "Check whether {a} is odd."],
     "    return {a} % 2 == 1\n", lambda r: (ints(r),)),
    (["is_positive", "positive"], "num",
     ["Return True if {a} is greater than zero.", "Check whether {a} is positive."],
     "    return {a} > 0\n", lambda r: (ints(r),)),
    (["absolute", "abs_value", "magnitude"], "num",
     ["Return the absolute value of {a}.", "Return {a} without its sign."],
     "    if {a} < 0:\n        return -{a}\n    return {a}\n", lambda r: (ints(r),)),
    (["is_multiple_of_{k}", "divisible_by_{k}"], "num",
     ["Return True if {a} is divisible by {k}.", "Check whether {a} is a multiple of {k}."],
     "    return {a} % {k} == 0\n", lambda r: (ints(r, 0, 30),)),
    (["half", "halve"], "num",
     ["Return {a} divided by two, rounded down.", "Return half of {a} using integer division."],
     "    return {a} // 2\n", lambda r: (ints(r),)),
    (["factorial", "fact"], "num",
     ["Return the factorial of {a}.", "Return the product of the numbers from 1 to {a}."],
     "    result = 1\n    for i in range(1, {a} + 1):\n        result *= i\n    return result\n",
     lambda r: (ints(r, 0, 7),)),
    (["sum_to", "sum_up_to", "triangle"], "num",
     ["Return the sum of the numbers from 1 to {a}.", "Add up all integers from 1 to {a}."],
     "    total = 0\n    for i in range(1, {a} + 1):\n        total += i\n    return total\n",
     lambda r: (ints(r, 0, 12),)),
    (["fib", "fibonacci"], "num",
     ["Return the {a}-th Fibonacci number.", "Return the Fibonacci number at position {a}."],
     "    a, b = 0, 1\n    for _ in range({a}):\n        a, b = b, a + b\n    return a\n",
     lambda r: (ints(r, 0, 12),)),
    (["count_digits", "num_digits"], "num",
     ["Return the number of digits of the non-negative integer {a}.",
      "Count the digits of {a}."],
     "    return len(str({a}))\n", lambda r: (ints(r, 0, 99999),)),
    (["digit_sum", "sum_of_digits"], "num",
     ["Return the sum of the digits of the non-negative integer {a}.",
      "Add up the digits of {a}."],
     "    return sum(int(c) for c in str({a}))\n", lambda r: (ints(r, 0, 99999),)),
    # two numbers
    (["add", "add_numbers", "sum_two"], "num2",
     ["Return the sum of {a} and {b}.", "Add {a} and {b}."],
     "    return {a} + {b}\n", lambda r: (ints(r), ints(r))),
    (["multiply", "product", "mul"], "num2",
     ["Return the product of {a} and {b}.", "Multiply {a} by {b}."],
     "    return {a} * {b}\n", lambda r: (ints(r), ints(r))),
    (["maximum", "larger", "max_of_two"], "num2",
     ["Return the larger of {a} and {b}.", "Return the maximum of {a} and {b}."],
     "    if {a} > {b}:\n        return {a}\n    return {b}\n", lambda r: (ints(r), ints(r))),
    (["minimum", "smaller", "min_of_two"], "num2",
     ["Return the smaller of {a} and {b}.", "Return the minimum of {a} and {b}."],
     "    if {a} < {b}:\n        return {a}\n    return {b}\n", lambda r: (ints(r), ints(r))),
    (["difference", "distance"], "num2",
     ["Return the absolute difference between {a} and {b}.",
      "Return how far apart {a} and {b} are."],
     "    return abs({a} - {b})\n", lambda r: (ints(r), ints(r))),
    # lists
    (["sum_list", "total", "list_sum"], "list",
     ["Return the sum of the numbers in {a}.", "Add up all elements of {a}."],
     "    total = 0\n    for v in {a}:\n        total += v\n    return total\n",
     lambda r: (int_list(r),)),
    (["count_positive", "num_positive"], "list",
     ["Return how many numbers in {a} are greater than zero.",
      "Count the positive numbers in {a}."],
     "    count = 0\n    for v in {a}:\n        if v > 0:\n            count += 1\n    return count\n",
     lambda r: (int_list(r),)),
    (["count_even", "num_even"], "list",
     ["Return how many numbers in {a} are even.", "Count the even numbers in {a}."],
     "    return sum(1 for v in {a} if v % 2 == 0)\n", lambda r: (int_list(r),)),
    (["filter_even", "only_even", "evens"], "list",
     ["Return a list of the even numbers in {a}, in order.",
      "Keep only the even elements of {a}."],
     "    return [v for v in {a} if v % 2 == 0]\n", lambda r: (int_list(r),)),
    (["filter_odd", "only_odd", "odds"], "list",
     ["Return a list of the odd numbers in {a}, in order.",
      "Keep only the odd elements of {a}."],
     "    return [v for v in {a} if v % 2 == 1]\n", lambda r: (int_list(r),)),
    (["filter_positive", "only_positive", "positives"], "list",
     ["Return a list of the numbers in {a} that are greater than zero.",
      "Keep only the positive elements of {a}."],
     "    return [v for v in {a} if v > 0]\n", lambda r: (int_list(r),)),
    (["double_all", "doubled", "double_each"], "list",
     ["Return a list with every element of {a} doubled.",
      "Multiply each number in {a} by two."],
     "    return [v * 2 for v in {a}]\n", lambda r: (int_list(r),)),
    (["square_all", "squares", "square_each"], "list",
     ["Return a list of the squares of the numbers in {a}.",
      "Square each element of {a}."],
     "    return [v * v for v in {a}]\n", lambda r: (int_list(r),)),
    (["add_{k}_to_all", "shift_by_{k}"], "list",
     ["Return a list with {k} added to every element of {a}.",
      "Add {k} to each number in {a}."],
     "    return [v + {k} for v in {a}]\n", lambda r: (int_list(r),)),
    (["largest", "max_element", "list_max"], "list",
     ["Return the largest number in the non-empty list {a}.",
      "Find the maximum of {a}, which is not empty."],
     "    best = {a}[0]\n    for v in {a}:\n        if v > best:\n            best = v\n    return best\n",
     lambda r: ([r.randint(-5, 12) for _ in range(r.randint(1, 6))],)),
    (["smallest", "min_element", "list_min"], "list",
     ["Return the smallest number in the non-empty list {a}.",
      "Find the minimum of {a}, which is not empty."],
     "    best = {a}[0]\n    for v in {a}:\n        if v < best:\n            best = v\n    return best\n",
     lambda r: ([r.randint(-5, 12) for _ in range(r.randint(1, 6))],)),
    (["first", "head", "first_element"], "list",
     ["Return the first element of {a}, or None if it is empty.",
      "Return {a}[0], or None for an empty list."],
     "    if not {a}:\n        return None\n    return {a}[0]\n", lambda r: (int_list(r),)),
    (["last", "last_element"], "list",
     ["Return the last element of {a}, or None if it is empty.",
      "Return the final item of {a}, or None for an empty list."],
     "    if not {a}:\n        return None\n    return {a}[-1]\n", lambda r: (int_list(r),)),
    (["reverse_list", "reversed_list"], "list",
     ["Return the elements of {a} in reverse order.", "Return {a} reversed."],
     "    return {a}[::-1]\n", lambda r: (int_list(r),)),
    (["average", "mean"], "list",
     ["Return the average of the non-empty list {a}.", "Return the mean of {a}."],
     "    return sum({a}) / len({a})\n",
     lambda r: ([r.randint(0, 10) for _ in range(r.randint(1, 4))],)),
    (["count_greater_than_{k}", "num_above_{k}"], "list",
     ["Return how many elements of {a} are greater than {k}.",
      "Count the numbers in {a} that exceed {k}."],
     "    return len([v for v in {a} if v > {k}])\n", lambda r: (int_list(r),)),
    (["unique", "dedupe", "remove_duplicates"], "list",
     ["Return the elements of {a} without duplicates, keeping the first occurrence.",
      "Remove repeated values from {a}, preserving order."],
     "    seen = []\n    for v in {a}:\n        if v not in seen:\n            seen.append(v)\n    return seen\n",
     lambda r: ([r.randint(0, 4) for _ in range(r.randint(0, 7))],)),
    (["sorted_copy", "sort_list"], "list",
     ["Return a sorted copy of {a}.", "Return the elements of {a} in ascending order."],
     "    return sorted({a})\n", lambda r: (int_list(r),)),
    (["contains", "has_value"], "list_num",
     ["Return True if {b} is in {a}.", "Check whether {a} contains {b}."],
     "    return {b} in {a}\n", lambda r: (int_list(r, 0, 6), r.randint(0, 6))),
    (["count_value", "occurrences"], "list_num",
     ["Return how many times {b} appears in {a}.", "Count the occurrences of {b} in {a}."],
     "    count = 0\n    for v in {a}:\n        if v == {b}:\n            count += 1\n    return count\n",
     lambda r: ([r.randint(0, 3) for _ in range(r.randint(0, 7))], r.randint(0, 3))),
    (["index_of", "find_index"], "list_num",
     ["Return the index of the first {b} in {a}, or -1 if it is absent.",
      "Find where {b} first occurs in {a}; return -1 when it does not."],
     "    for i, v in enumerate({a}):\n        if v == {b}:\n            return i\n    return -1\n",
     lambda r: (int_list(r, 0, 6), r.randint(0, 6))),
    (["elementwise_sum", "add_lists"], "list2",
     ["Return the element-wise sum of {a} and {b}, which have the same length.",
      "Add {a} and {b} position by position."],
     "    return [x + y for x, y in zip({a}, {b})]\n",
     lambda r: (lambda n: ([r.randint(0, 9) for _ in range(n)],
                           [r.randint(0, 9) for _ in range(n)]))(r.randint(0, 4))),
    # strings
    (["reverse_string", "reverse", "backwards"], "str",
     ["Return {a} reversed.", "Return the characters of {a} in reverse order."],
     "    return {a}[::-1]\n", lambda r: (word(r),)),
    (["to_upper", "shout", "upper"], "str",
     ["Return {a} in upper case.", "Convert {a} to capital letters."],
     "    return {a}.upper()\n", lambda r: (sentence(r),)),
    (["to_lower", "lower", "whisper"], "str",
     ["Return {a} in lower case.", "Convert {a} to small letters."],
     "    return {a}.lower()\n", lambda r: (sentence(r),)),
    (["is_palindrome", "palindrome"], "str",
     ["Return True if {a} reads the same forwards and backwards.",
      "Check whether {a} is a palindrome."],
     "    return {a} == {a}[::-1]\n", lambda r: (word(r),)),
    (["count_vowels", "num_vowels", "vowel_count"], "str",
     ["Return the number of vowels (a, e, i, o, u) in {a}.",
      "Count the lower-case vowels in {a}."],
     "    count = 0\n    for c in {a}:\n        if c in \"aeiou\":\n            count += 1\n    return count\n",
     lambda r: (sentence(r),)),
    (["count_words", "word_count", "num_words"], "str",
     ["Return the number of words in {a}, separated by spaces.",
      "Count the space-separated words in {a}."],
     "    return len({a}.split())\n", lambda r: (sentence(r),)),
    (["first_char", "initial"], "str",
     ["Return the first character of {a}, or an empty string if {a} is empty.",
      "Return {a}[0], or \"\" when {a} is empty."],
     "    if not {a}:\n        return \"\"\n    return {a}[0]\n", lambda r: (r.choice([word(r), ""]),)),
    (["string_length", "length"], "str",
     ["Return the number of characters in {a}.", "Return the length of {a}."],
     "    return len({a})\n", lambda r: (sentence(r),)),
    (["capitalize_words", "title_case"], "str",
     ["Return {a} with the first letter of every word in upper case.",
      "Capitalize each word of {a}."],
     "    return \" \".join(w[:1].upper() + w[1:] for w in {a}.split())\n",
     lambda r: (sentence(r).lower(),)),
    (["remove_spaces", "strip_spaces"], "str",
     ["Return {a} with all spaces removed.", "Delete every space from {a}."],
     "    return {a}.replace(\" \", \"\")\n", lambda r: (sentence(r),)),
    (["count_char", "char_count"], "str_char",
     ["Return how many times the character {b} occurs in {a}.",
      "Count the occurrences of {b} in {a}."],
     "    count = 0\n    for c in {a}:\n        if c == {b}:\n            count += 1\n    return count\n",
     lambda r: (sentence(r), r.choice("aeont"))),
    (["repeat", "repeat_string"], "str_num",
     ["Return {a} repeated {b} times.", "Concatenate {b} copies of {a}."],
     "    return {a} * {b}\n", lambda r: (word(r), r.randint(0, 3))),
    (["starts_with", "has_prefix"], "str2",
     ["Return True if {a} starts with {b}.", "Check whether {b} is a prefix of {a}."],
     "    return {a}.startswith({b})\n", lambda r: (word(r), r.choice(["a", "c", "he", "py", "t"]))),
    (["join_words", "concat_words"], "list_str",
     ["Return the words in {a} joined by single spaces.", "Join {a} with spaces."],
     "    return \" \".join({a})\n", lambda r: ([word(r) for _ in range(r.randint(0, 4))],)),
    (["longest_word", "longest"], "list_str",
     ["Return the longest string in the non-empty list {a}; the first one on ties.",
      "Find the longest word in {a}, which is not empty."],
     "    best = {a}[0]\n    for w in {a}:\n        if len(w) > len(best):\n            best = w\n    return best\n",
     lambda r: ([word(r) for _ in range(r.randint(1, 4))],)),
    (["lengths", "word_lengths"], "list_str",
     ["Return a list of the lengths of the strings in {a}.",
      "Map each string in {a} to its length."],
     "    return [len(w) for w in {a}]\n", lambda r: ([word(r) for _ in range(r.randint(0, 4))],)),
    # dicts
    (["get_or_zero", "lookup"], "dict_key",
     ["Return the value of {b} in {a}, or 0 if {b} is missing.",
      "Look up {b} in {a}; return 0 when it is absent."],
     "    return {a}.get({b}, 0)\n", lambda r: (str_dict(r), word(r))),
    (["sorted_keys", "keys_in_order"], "dict",
     ["Return the keys of {a} in sorted order.", "Return a sorted list of the keys of {a}."],
     "    return sorted({a})\n", lambda r: (str_dict(r),)),
    (["sum_values", "total_value"], "dict",
     ["Return the sum of the values in {a}.", "Add up all values of {a}."],
     "    return sum({a}.values())\n", lambda r: (str_dict(r),)),
    (["invert", "invert_dict"], "dict",
     ["Return a dictionary mapping each value of {a} to its key.",
      "Swap the keys and values of {a}."],
     "    return {{v: k for k, v in {a}.items()}}\n",
     lambda r: ({w: i for i, w in enumerate(sorted({word(r) for _ in range(3)}))},)),
    (["char_frequency", "letter_counts"], "str",
     ["Return a dictionary counting how many times each character occurs in {a}.",
      "Count every character of {a} in a dictionary."],
     "    counts = {{}}\n    for c in {a}:\n        counts[c] = counts.get(c, 0) + 1\n    return counts\n",
     lambda r: (word(r),)),
    (["word_frequency", "count_each_word"], "str",
     ["Return a dictionary mapping each word of {a} to how often it appears.",
      "Count the space-separated words of {a} in a dictionary."],
     "    counts = {{}}\n    for w in {a}.split():\n        counts[w] = counts.get(w, 0) + 1\n    return counts\n",
     lambda r: (sentence(r),)),
]

ARG_POOLS = {
    "num": [NUMBER_ARGS], "num2": [["a", "x"], ["b", "y"]], "list": [LIST_ARGS],
    "list_num": [LIST_ARGS, ["target", "value", "x"]], "list2": [["xs", "a"], ["ys", "b"]],
    "str": [STRING_ARGS], "str_char": [STRING_ARGS, ["ch", "c", "char"]],
    "str_num": [STRING_ARGS, ["n", "times", "count"]], "str2": [STRING_ARGS, ["prefix", "start"]],
    "list_str": [["words", "strings", "names"]], "dict": [DICT_ARGS],
    "dict_key": [DICT_ARGS, ["key", "k", "name"]],
}


def make_task(rng):
    """Returns (prompt, body, entry_point) of one random task."""
    names, kind, docs, body, inputs = rng.choice(FAMILIES)
    k = rng.randint(2, 9)
    pools = ARG_POOLS[kind]
    if kind in ("num2", "list2"):
        pair = rng.randrange(2)
        args = [pools[0][pair], pools[1][pair]]
    else:
        args = [rng.choice(pool) for pool in pools]
    fill = {"k": k, "a": args[0], "b": args[1] if len(args) > 1 else ""}
    name = rng.choice(names).format(**fill)
    doc = rng.choice(docs).format(**fill)
    code = body.format(**fill)
    signature = f"def {name}({', '.join(args)}):\n"
    namespace = {}
    exec(signature + code, namespace)
    fn = namespace[name]
    examples = []
    for _ in range(rng.randint(1, 2)):
        case = inputs(rng)
        result = fn(*case)
        examples.append(f"    >>> {name}({', '.join(repr(v) for v in case)})\n    {result!r}\n")
    prompt = signature + f'    """{doc}\n' + "".join(examples) + '    """\n'
    return prompt, code, name


def generate(seed, count):
    rng = random.Random(seed)
    return [make_task(rng) for _ in range(count)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=5)
    options = parser.parse_args()
    for prompt, body, _ in generate(options.seed, options.count):
        print(prompt + body)
