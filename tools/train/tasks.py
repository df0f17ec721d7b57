"""Generator of small, simple Python function tasks for the demo corpus.

A task is a function a newcomer would ask for: a signature, a docstring that says what it
does in one of many voices, and a short correct body. The generator separates what a function
does (a concept: its intent as phrases, its bodies, the kinds of its arguments) from how it is
asked for (the function's name, the argument names and type hints, the docstring's wording and
layout), and draws each independently, so that the model learns the mapping from intent to
code rather than one template:

- intent, said as a noun phrase ("the sum of xs"), a verb phrase ("add up the numbers in xs")
  or a condition ("n is even"), put into many frames (imperative, descriptive, "Write a
  function that ...", "Given ..., return ...", lower case without a full stop, ...); arguments
  named in the text or described ("the list", "the given number"); constants as digits or words;
- docstring layouts: one line, several sentences, Google, NumPy and reST parameter sections,
  with or without examples (doctests, "Example:" blocks, inline "for example"), or a comment;
- names: the concept's own synonyms, with get_/compute_/... prefixes, camelCase, and sometimes
  a name that says nothing (f, solve), so that the docstring has to be read;
- bodies: each concept has several correct implementations (a built-in, a loop, a
  comprehension, an early return), and every example in a docstring is computed by running
  the body, so every generated function is correct by construction.

    python3 tasks.py --seed 1 --count 5     # prints five tasks
    python3 tasks.py --check                # checks every concept (see check_concepts)
"""
import argparse
import ast
import random
import re

# ---------------------------------------------------------------------------------------------
# Example inputs


def num(r, lo=-20, hi=50):
    return r.randint(lo, hi)


def small(r):
    return r.randint(0, 12)


def ints(r, lo=-9, hi=20, least=0, most=7):
    return [r.randint(lo, hi) for _ in range(r.randint(least, most))]


def nonempty(r, lo=-9, hi=20):
    return ints(r, lo, hi, 1, 7)


WORDS = ["apple", "banana", "cat", "dog", "hello", "level", "python", "code", "data", "abc",
         "noon", "zebra", "test", "moon", "sky", "tree", "river", "stone", "radar", "music",
         "light", "world", "green", "book", "kayak", "sun", "car", "ocean", "pizza", "table"]


def word(r):
    w = r.choice(WORDS)
    return w.capitalize() if r.random() < 0.15 else w


def sentence(r, least=1, most=5):
    return " ".join(word(r) for _ in range(r.randint(least, most)))


def text(r):
    """A string with some case, digits, spaces and punctuation."""
    parts = []
    for _ in range(r.randint(0, 4)):
        parts.append(r.choice([word(r), word(r).upper(), str(r.randint(0, 99)), "!", ",", "a b"]))
    return r.choice(["", " "]).join(parts)


def words(r, least=0, most=5):
    return [word(r) for _ in range(r.randint(least, most))]


def counts(r, least=0, most=4):
    return {word(r).lower(): r.randint(0, 9) for _ in range(r.randint(least, most))}


def char(r):
    return r.choice("aeiost ")


# ---------------------------------------------------------------------------------------------
# Argument kinds: names, how the docstring refers to them, type hints, parameter descriptions

KINDS = {
    "int": dict(names=["x", "n", "num", "number", "value", "a", "val", "i", "k", "integer"],
                refs=["the number", "the given number", "the integer", "the input number", "the input"],
                hints=["int", "int", "float"], about=["an integer", "a number", "the number", "an int",
                                                      "the input value", "any integer"]),
    "pos": dict(names=["n", "x", "num", "number", "count", "limit", "k", "size"],
                refs=["the number", "the given number", "the integer", "the input"],
                hints=["int"], about=["a non-negative integer", "a whole number", "an integer >= 0",
                                      "the number", "a positive integer or zero"]),
    "ints": dict(names=["nums", "numbers", "xs", "lst", "arr", "values", "items", "data", "l", "seq",
                        "ints", "num_list", "my_list", "array", "scores", "elements"],
                 refs=["the list", "the given list", "the list of numbers", "the input list",
                       "the numbers", "the integers", "the array"],
                 hints=["list", "list[int]", "List[int]"],
                 about=["a list of integers", "a list of numbers", "list of ints", "the numbers",
                        "a list of whole numbers", "the input list"]),
    "str": dict(names=["s", "text", "word", "string", "sentence", "name", "phrase", "msg", "line",
                       "st", "txt", "message", "input_str"],
                refs=["the string", "the given string", "the text", "the input string", "the input"],
                hints=["str"], about=["a string", "the input string", "some text", "any string",
                                      "the text to look at"]),
    "strs": dict(names=["words", "strings", "names", "items", "lst", "strs", "word_list", "tokens"],
                 refs=["the list of words", "the words", "the strings", "the given list", "the list"],
                 hints=["list", "list[str]", "List[str]"],
                 about=["a list of strings", "a list of words", "the words", "list of str"]),
    "dict": dict(names=["d", "mapping", "dct", "dictionary", "data", "counts", "table", "scores",
                        "ages", "prices", "inventory", "stock"],
                 refs=["the dictionary", "the given dictionary", "the dict", "the mapping"],
                 hints=["dict", "dict[str, int]", "Dict[str, int]"],
                 about=["a dictionary from strings to integers", "a dict", "a mapping of names to numbers",
                        "the dictionary"]),
    "char": dict(names=["ch", "c", "char", "letter", "target", "symbol"],
                 refs=["the character", "the given character", "the letter"],
                 hints=["str"], about=["a single character", "a character", "one letter"]),
    "key": dict(names=["key", "k", "name", "word", "item"],
                refs=["the key", "the given key"], hints=["str"], about=["a key", "the key to look up"]),
    "count": dict(names=["n", "k", "count", "times", "limit", "size", "amount", "m"],
                  refs=["the count", "the given number", "n"], hints=["int"],
                  about=["a non-negative integer", "how many", "the count", "an integer"]),
    "thr": dict(names=["threshold", "limit", "k", "n", "bound", "cutoff", "value", "minimum", "target"],
                refs=["the threshold", "the limit", "the given value"], hints=["int"],
                about=["an integer", "the threshold", "the limit", "a number to compare with"]),
}

# Two arguments of the same kind: names that belong together.
PAIRS = {
    "int": [("a", "b"), ("x", "y"), ("m", "n"), ("num1", "num2"), ("first", "second"), ("n1", "n2"),
            ("p", "q"), ("left", "right"), ("a", "b")],
    "ints": [("xs", "ys"), ("a", "b"), ("list1", "list2"), ("first", "second"), ("l1", "l2"),
             ("nums1", "nums2"), ("left", "right")],
    "str": [("s", "t"), ("a", "b"), ("s1", "s2"), ("first", "second"), ("word1", "word2"),
            ("text1", "text2")],
    "dict": [("a", "b"), ("d1", "d2"), ("first", "second"), ("left", "right")],
    "strs": [("keys", "values"), ("names", "scores")],
}
PAIR_REFS = {"int": ("the first number", "the second number"),
             "ints": ("the first list", "the second list"),
             "str": ("the first string", "the second string"),
             "dict": ("the first dictionary", "the second dictionary")}

RETURN_HINTS = {"int": ["int"], "float": ["float"], "bool": ["bool"], "str": ["str"],
                "ints": ["list", "list[int]", "List[int]"], "strs": ["list", "list[str]", "List[str]"],
                "dict": ["dict", "dict[str, int]", "Dict[str, int]"], "any": [None],
                "set": ["set"], "tuple": ["tuple"]}
RETURN_ABOUT = {"int": ["int", "an integer", "a number"], "float": ["float", "a number"],
                "bool": ["bool", "True or False", "a boolean"], "str": ["str", "a string", "the new string"],
                "ints": ["list", "a new list", "a list of integers"], "strs": ["list", "a list of strings"],
                "dict": ["dict", "a dictionary", "a new dictionary"], "any": ["the value", "the result"],
                "set": ["set", "a set"], "tuple": ["tuple", "a pair"]}

NUMBER_WORDS = {0: "zero", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six",
                7: "seven", 8: "eight", 9: "nine", 10: "ten", 100: "a hundred"}


# ---------------------------------------------------------------------------------------------
# Concepts


class Concept:
    """What one family of functions does, apart from how it is asked for.

    kinds: argument kinds (keys of KINDS), in signature order.
    names: function names ({k} is the constant).
    np: noun phrases for the result ("the sum of {a}"); vp: verb phrases ("add up {a}");
    cond: conditions for boolean functions ("{a} is even"). {a}, {b}, {c} refer to the arguments,
    {k} is the constant, {kw} the constant as a word or digits.
    bodies: correct implementations ({a}, {b}, {c}, {k} filled in).
    inputs: random example arguments, a function of a random.Random.
    returns: key of RETURN_HINTS. notes: extra sentences about edge cases, true of every body.
    consts: the constants {k} is drawn from (None: no constant).
    """

    def __init__(self, kinds, names, bodies, inputs, returns, np=(), vp=(), cond=(), notes=(),
                 consts=None, args=None):
        self.kinds = kinds.split()
        self.names, self.bodies, self.inputs, self.returns = names, bodies, inputs, returns
        self.np, self.vp, self.cond, self.notes = list(np), list(vp), list(cond), list(notes)
        self.consts = consts
        self.args = args  # optional explicit name pools, one list per argument

    def __repr__(self):
        return f"Concept({self.names[0]})"


K = [2, 3, 4, 5, 6, 7, 8, 9, 10]

CONCEPTS = [
    # --- one number -------------------------------------------------------------------------
    Concept("int", ["add_{k}", "plus_{k}", "increment_by_{k}", "add_{kw}", "plus_{kw}"],
            ["    return {a} + {k}\n", "    result = {a} + {k}\n    return result\n"],
            lambda r: (num(r),), "int", consts=K,
            np=["{a} plus {kw}", "{a} + {k}", "the sum of {a} and {kw}", "{kw} more than {a}",
                "{a} increased by {kw}"],
            vp=["add {kw} to {a}", "increase {a} by {kw}", "add {k} to {a}"]),
    Concept("int", ["increment", "inc", "add_one", "plus_one", "next_number", "successor"],
            ["    return {a} + 1\n"], lambda r: (num(r),), "int",
            np=["{a} plus one", "{a} + 1", "the next integer after {a}", "one more than {a}",
                "{a} incremented by one"],
            vp=["add one to {a}", "increment {a}", "add 1 to {a}"]),
    Concept("int", ["decrement", "dec", "minus_one", "subtract_one", "previous_number", "predecessor"],
            ["    return {a} - 1\n"], lambda r: (num(r),), "int",
            np=["{a} minus one", "{a} - 1", "one less than {a}", "the integer before {a}"],
            vp=["subtract one from {a}", "decrement {a}", "take 1 away from {a}"]),
    Concept("int", ["subtract_{k}", "minus_{k}", "decrease_by_{k}", "minus_{kw}"],
            ["    return {a} - {k}\n"], lambda r: (num(r),), "int", consts=K,
            np=["{a} minus {kw}", "{a} - {k}", "{kw} less than {a}", "{a} decreased by {kw}"],
            vp=["subtract {kw} from {a}", "take {kw} away from {a}", "decrease {a} by {k}"]),
    Concept("int", ["double", "twice", "times_two", "doubled", "multiply_by_two", "times2", "double_it",
                    "double_number"],
            ["    return {a} * 2\n", "    return 2 * {a}\n", "    return {a} + {a}\n"],
            lambda r: (num(r),), "int",
            np=["{a} multiplied by two", "twice {a}", "{a} doubled", "two times {a}", "{a} times 2",
                "double the value of {a}", "{a} * 2", "the double of {a}"],
            vp=["double {a}", "multiply {a} by two", "multiply {a} by 2", "double the number"]),
    Concept("int", ["triple", "thrice", "times_three", "tripled", "multiply_by_three", "times3"],
            ["    return {a} * 3\n", "    return 3 * {a}\n"], lambda r: (num(r),), "int",
            np=["{a} multiplied by three", "three times {a}", "{a} tripled", "{a} times 3", "{a} * 3",
                "triple {a}"],
            vp=["triple {a}", "multiply {a} by three", "multiply {a} by 3"]),
    Concept("int", ["times_{k}", "multiply_by_{k}", "scale_by_{k}", "times_{kw}", "multiply_by_{kw}"],
            ["    return {a} * {k}\n", "    return {k} * {a}\n"], lambda r: (num(r),), "int", consts=K,
            np=["{a} multiplied by {kw}", "{kw} times {a}", "{a} times {k}", "the product of {a} and {kw}",
                "{a} * {k}"],
            vp=["multiply {a} by {kw}", "scale {a} by {k}"]),
    Concept("int", ["half", "halve", "half_of", "halved", "divide_by_two", "div2"],
            ["    return {a} // 2\n"], lambda r: (num(r),), "int",
            np=["{a} divided by two, rounded down", "half of {a} using integer division", "{a} // 2",
                "{a} halved (integer division)", "the integer half of {a}"],
            vp=["halve {a} with integer division", "divide {a} by 2 and round down",
                "integer-divide {a} by two"]),
    Concept("int", ["divide_by_{k}", "div_{k}", "floor_div_{k}"],
            ["    return {a} // {k}\n"], lambda r: (num(r),), "int", consts=K,
            np=["{a} divided by {kw}, rounded down", "{a} // {k}", "the integer quotient of {a} and {kw}",
                "how many whole times {kw} fits into {a}"],
            vp=["divide {a} by {kw} using integer division", "floor-divide {a} by {k}"]),
    Concept("int", ["remainder_{k}", "mod_{k}", "modulo_{k}"],
            ["    return {a} % {k}\n"], lambda r: (num(r, 0, 60),), "int", consts=K,
            np=["the remainder of {a} divided by {kw}", "{a} modulo {k}", "{a} % {k}",
                "what is left over when {a} is divided by {kw}"],
            vp=["compute {a} mod {k}"]),
    Concept("int", ["square", "squared", "square_of", "sq", "square_number", "get_square"],
            ["    return {a} * {a}\n", "    return {a} ** 2\n"], lambda r: (num(r),), "int",
            np=["the square of {a}", "{a} squared", "{a} times itself", "{a} to the power of two",
                "{a} ** 2", "{a} multiplied by itself"],
            vp=["square {a}", "multiply {a} by itself", "raise {a} to the second power"]),
    Concept("int", ["cube", "cubed", "cube_of", "get_cube"],
            ["    return {a} ** 3\n", "    return {a} * {a} * {a}\n"], lambda r: (num(r, -6, 9),), "int",
            np=["the cube of {a}", "{a} cubed", "{a} to the power of three", "{a} ** 3"],
            vp=["cube {a}", "raise {a} to the third power"]),
    Concept("int", ["negate", "negative", "opposite", "flip_sign", "neg"],
            ["    return -{a}\n", "    return 0 - {a}\n"], lambda r: (num(r),), "int",
            np=["the negation of {a}", "{a} with its sign flipped", "the opposite of {a}", "minus {a}",
                "-{a}", "the additive inverse of {a}"],
            vp=["negate {a}", "flip the sign of {a}", "change the sign of {a}"]),
    Concept("int", ["absolute", "abs_value", "magnitude", "absolute_value", "my_abs", "distance_from_zero"],
            ["    if {a} < 0:\n        return -{a}\n    return {a}\n", "    return abs({a})\n",
             "    return -{a} if {a} < 0 else {a}\n"], lambda r: (num(r),), "int",
            np=["the absolute value of {a}", "{a} without its sign", "the distance of {a} from zero",
                "|{a}|", "the magnitude of {a}"],
            vp=["make {a} non-negative", "remove the sign of {a}"]),
    Concept("int", ["power_of_two", "pow2", "two_to_the", "two_power"],
            ["    return 2 ** {a}\n", "    result = 1\n    for _ in range({a}):\n        result *= 2\n    return result\n"],
            lambda r: (r.randint(0, 12),), "int",
            np=["2 to the power of {a}", "two raised to {a}", "2 ** {a}", "the {a}-th power of two"],
            vp=["raise two to the power {a}"]),
    Concept("int int", ["power", "pow", "raise_to", "exponent", "to_the_power"],
            ["    return {a} ** {b}\n", "    result = 1\n    for _ in range({b}):\n        result *= {a}\n    return result\n"],
            lambda r: (num(r, -5, 9), r.randint(0, 5)), "int",
            args=[["base", "x", "a", "n"], ["exp", "exponent", "power", "p", "k"]],
            np=["{a} raised to the power {b}", "{a} to the power of {b}", "{a} ** {b}", "{a} to the {b}"],
            vp=["raise {a} to the power {b}", "compute {a} to the power of {b}"]),
    Concept("int", ["last_digit", "ones_digit", "final_digit", "units_digit"],
            ["    return abs({a}) % 10\n", "    return int(str(abs({a}))[-1])\n"], lambda r: (num(r, -999, 9999),), "int",
            np=["the last digit of {a}", "the ones digit of {a}", "the rightmost digit of {a}"],
            notes=["Negative numbers use their absolute value."]),
    Concept("pos", ["count_digits", "num_digits", "digit_count", "number_of_digits", "len_digits"],
            ["    return len(str({a}))\n",
             "    count = 1\n    while {a} >= 10:\n        {a} //= 10\n        count += 1\n    return count\n"],
            lambda r: (r.randint(0, 99999),), "int",
            np=["the number of digits of {a}", "how many digits {a} has", "the digit count of {a}"],
            vp=["count the digits of {a}", "count the digits in {a}"]),
    Concept("pos", ["digit_sum", "sum_of_digits", "sum_digits", "add_digits", "digits_total"],
            ["    return sum(int(c) for c in str({a}))\n",
             "    total = 0\n    while {a} > 0:\n        total += {a} % 10\n        {a} //= 10\n    return total\n",
             "    total = 0\n    for digit in str({a}):\n        total += int(digit)\n    return total\n"],
            lambda r: (r.randint(0, 99999),), "int",
            np=["the sum of the digits of {a}", "the total of all digits in {a}", "the digit sum of {a}"],
            vp=["add up the digits of {a}", "sum the digits of {a}"]),
    Concept("pos", ["reverse_digits", "reverse_number", "flip_digits", "reversed_number"],
            ["    return int(str({a})[::-1])\n"], lambda r: (r.randint(0, 99999),), "int",
            np=["{a} with its digits in reverse order", "the number made of the digits of {a} reversed"],
            vp=["reverse the digits of {a}"]),
    Concept("pos", ["factorial", "fact", "fac", "factorial_of", "compute_factorial"],
            ["    result = 1\n    for i in range(1, {a} + 1):\n        result *= i\n    return result\n",
             "    if {a} <= 1:\n        return 1\n    return {a} * {name}({a} - 1)\n",
             "    result = 1\n    for i in range(2, {a} + 1):\n        result = result * i\n    return result\n"],
            lambda r: (r.randint(0, 8),), "int",
            np=["the factorial of {a}", "{a}!", "the product of the integers from 1 to {a}",
                "1 * 2 * ... * {a}", "{a} factorial"],
            vp=["compute the factorial of {a}", "multiply all whole numbers from 1 to {a}"],
            notes=["The factorial of 0 is 1."]),
    Concept("pos", ["sum_to", "sum_up_to", "triangle", "triangular", "sum_1_to_n", "sum_range", "total_up_to"],
            ["    total = 0\n    for i in range(1, {a} + 1):\n        total += i\n    return total\n",
             "    return sum(range(1, {a} + 1))\n", "    return {a} * ({a} + 1) // 2\n"],
            lambda r: (r.randint(0, 20),), "int",
            np=["the sum of the numbers from 1 to {a}", "1 + 2 + ... + {a}", "the sum of all integers up to {a}",
                "the {a}-th triangular number", "the total of 1 through {a}"],
            vp=["add up all integers from 1 to {a}", "sum the numbers 1 to {a}"]),
    Concept("pos", ["sum_of_squares_to", "square_sum_to", "sum_squares_up_to"],
            ["    return sum(i * i for i in range(1, {a} + 1))\n",
             "    total = 0\n    for i in range(1, {a} + 1):\n        total += i ** 2\n    return total\n"],
            lambda r: (r.randint(0, 10),), "int",
            np=["the sum of the squares of 1 to {a}", "1*1 + 2*2 + ... + {a}*{a}"]),
    Concept("pos", ["fib", "fibonacci", "nth_fibonacci", "fibo", "get_fibonacci"],
            ["    a, b = 0, 1\n    for _ in range({a}):\n        a, b = b, a + b\n    return a\n",
             "    if {a} < 2:\n        return {a}\n    return {name}({a} - 1) + {name}({a} - 2)\n"],
            lambda r: (r.randint(0, 14),), "int",
            np=["the {a}-th Fibonacci number", "the Fibonacci number at position {a}",
                "the {a}th number of the Fibonacci sequence"],
            notes=["fib(0) is 0 and fib(1) is 1.", "The sequence starts 0, 1, 1, 2, 3, 5."]),
    Concept("pos", ["count_down", "countdown", "numbers_down_from", "descending_to_one"],
            ["    return list(range({a}, 0, -1))\n", "    return [i for i in range({a}, 0, -1)]\n"],
            lambda r: (r.randint(0, 8),), "ints",
            np=["a list counting down from {a} to 1", "the numbers {a}, {a}-1, ..., 1"]),
    Concept("pos", ["up_to", "numbers_to", "range_list", "one_to_n", "first_n_numbers"],
            ["    return list(range(1, {a} + 1))\n", "    return [i for i in range(1, {a} + 1)]\n"],
            lambda r: (r.randint(0, 8),), "ints",
            np=["a list of the numbers from 1 to {a}", "the list [1, 2, ..., {a}]", "the integers 1 through {a}"]),
    Concept("pos", ["evens_up_to", "even_numbers", "list_evens_to"],
            ["    return [i for i in range(0, {a} + 1, 2)]\n", "    return list(range(0, {a} + 1, 2))\n"],
            lambda r: (r.randint(0, 14),), "ints",
            np=["a list of the even numbers from 0 to {a}, inclusive", "all even numbers between 0 and {a}"]),
    Concept("pos", ["divisors", "factors", "list_divisors", "get_factors"],
            ["    return [d for d in range(1, {a} + 1) if {a} % d == 0]\n"],
            lambda r: (r.randint(1, 40),), "ints",
            np=["a list of the divisors of {a}", "all positive numbers that divide {a}", "the factors of {a} in order"]),
    Concept("int", ["sign", "sign_of", "signum", "get_sign"],
            ["    if {a} > 0:\n        return 1\n    if {a} < 0:\n        return -1\n    return 0\n",
             "    if {a} > 0:\n        return 1\n    elif {a} < 0:\n        return -1\n    else:\n        return 0\n"],
            lambda r: (num(r, -9, 9),), "int",
            np=["1 if {a} is positive, -1 if it is negative and 0 if it is zero", "the sign of {a}"]),
    Concept("int", ["describe_sign", "positive_or_negative", "classify_number"],
            ["    if {a} > 0:\n        return \"positive\"\n    if {a} < 0:\n        return \"negative\"\n    return \"zero\"\n"],
            lambda r: (num(r, -9, 9),), "str",
            np=["\"positive\", \"negative\" or \"zero\" depending on {a}", "the word describing the sign of {a}"]),
    Concept("int", ["even_or_odd", "parity", "odd_or_even"],
            ["    if {a} % 2 == 0:\n        return \"even\"\n    return \"odd\"\n",
             "    return \"even\" if {a} % 2 == 0 else \"odd\"\n"],
            lambda r: (num(r),), "str",
            np=["\"even\" if {a} is even and \"odd\" otherwise", "the string 'even' or 'odd' for {a}"]),
    Concept("int", ["is_even", "even", "check_even", "iseven", "is_even_number"],
            ["    return {a} % 2 == 0\n",
             "    if {a} % 2 == 0:\n        return True\n    return False\n"],
            lambda r: (num(r),), "bool",
            cond=["{a} is even", "{a} is an even number", "{a} is divisible by two", "{a} is divisible by 2",
                  "{a} % 2 == 0", "the number is even", "{a} has no remainder when divided by two"]),
    Concept("int", ["is_odd", "odd", "check_odd", "isodd", "is_odd_number"],
            ["    return {a} % 2 == 1\n", "    return {a} % 2 != 0\n",
             "    if {a} % 2 == 1:\n        return True\n    return False\n"],
            lambda r: (num(r),), "bool",
            cond=["{a} is odd", "{a} is an odd number", "{a} is not divisible by two", "the number is odd",
                  "{a} leaves a remainder of 1 when divided by 2"]),
    Concept("int", ["is_positive", "positive", "check_positive", "greater_than_zero", "is_pos"],
            ["    return {a} > 0\n", "    if {a} > 0:\n        return True\n    return False\n"],
            lambda r: (num(r, -9, 9),), "bool",
            cond=["{a} is positive", "{a} is greater than zero", "{a} > 0", "the number is above zero",
                  "{a} is strictly positive"]),
    Concept("int", ["is_negative", "negative_check", "below_zero", "less_than_zero", "is_neg"],
            ["    return {a} < 0\n", "    if {a} < 0:\n        return True\n    return False\n"],
            lambda r: (num(r, -9, 9),), "bool",
            cond=["{a} is negative", "{a} is less than zero", "{a} < 0", "the number is below zero",
                  "{a} is smaller than 0"]),
    Concept("int", ["is_zero", "zero", "equals_zero"],
            ["    return {a} == 0\n"], lambda r: (num(r, -3, 3),), "bool",
            cond=["{a} is zero", "{a} equals 0", "{a} == 0", "the number is zero"]),
    Concept("int", ["is_multiple_of_{k}", "divisible_by_{k}", "is_divisible_by_{k}", "multiple_of_{kw}"],
            ["    return {a} % {k} == 0\n"], lambda r: (num(r, 0, 60),), "bool", consts=K,
            cond=["{a} is divisible by {kw}", "{a} is a multiple of {kw}", "{kw} divides {a} evenly",
                  "{a} % {k} == 0", "{a} can be divided by {k} with no remainder"]),
    Concept("int int", ["is_divisible", "divisible", "divides", "is_multiple", "can_divide"],
            ["    return {a} % {b} == 0\n"], lambda r: (num(r, 0, 60), r.randint(1, 9)), "bool",
            args=[["n", "a", "x", "number", "num"], ["d", "b", "k", "divisor", "m"]],
            cond=["{a} is divisible by {b}", "{a} is a multiple of {b}", "{b} divides {a}",
                  "{a} % {b} == 0"], notes=["{b} is never zero."]),
    Concept("int int", ["is_between", "in_range", "between", "within"],
            ["    return {b} <= {a} <= {c}\n", "    return {a} >= {b} and {a} <= {c}\n"],
            lambda r: (num(r, 0, 20), r.randint(0, 8), r.randint(8, 16)), "bool",
            args=[["x", "n", "value", "num"], ["low", "lo", "start", "minimum"], ["high", "hi", "end", "maximum"]],
            cond=["{a} is between {b} and {c}, inclusive", "{b} <= {a} <= {c}", "{a} lies in the range {b} to {c}"]),
    Concept("int int", ["clamp", "clip", "limit", "bound"],
            ["    if {a} < {b}:\n        return {b}\n    if {a} > {c}:\n        return {c}\n    return {a}\n",
             "    return max({b}, min({a}, {c}))\n"],
            lambda r: (num(r, -5, 25), r.randint(0, 8), r.randint(8, 16)), "int",
            args=[["x", "n", "value", "num"], ["low", "lo", "minimum", "smallest"], ["high", "hi", "maximum", "largest"]],
            np=["{a} limited to the range from {b} to {c}", "{a} clamped between {b} and {c}"],
            vp=["clamp {a} into [{b}, {c}]", "keep {a} between {b} and {c}"]),
    Concept("pos", ["is_prime", "prime", "check_prime", "isprime", "is_prime_number"],
            ["    if {a} < 2:\n        return False\n    for d in range(2, {a}):\n        if {a} % d == 0:\n            return False\n    return True\n",
             "    if {a} < 2:\n        return False\n    i = 2\n    while i * i <= {a}:\n        if {a} % i == 0:\n            return False\n        i += 1\n    return True\n"],
            lambda r: (r.randint(0, 60),), "bool",
            cond=["{a} is a prime number", "{a} is prime", "{a} has no divisors other than 1 and itself"]),
    Concept("pos", ["is_perfect_square", "perfect_square", "is_square"],
            ["    i = 0\n    while i * i < {a}:\n        i += 1\n    return i * i == {a}\n",
             "    root = int({a} ** 0.5)\n    return root * root == {a}\n"],
            lambda r: (r.randint(0, 50),), "bool",
            cond=["{a} is a perfect square", "{a} is the square of an integer"]),
    Concept("pos", ["is_leap_year", "leap_year", "is_leap"],
            ["    return {a} % 4 == 0 and ({a} % 100 != 0 or {a} % 400 == 0)\n",
             "    if {a} % 400 == 0:\n        return True\n    if {a} % 100 == 0:\n        return False\n    return {a} % 4 == 0\n"],
            lambda r: (r.choice([1900, 2000, 2004, 2023, 2024, 2100, 1996, 2019]),), "bool",
            args=[["year", "y", "yr"]],
            cond=["{a} is a leap year", "the year {a} has 366 days"]),
    Concept("int", ["to_string", "stringify", "int_to_str", "as_text"],
            ["    return str({a})\n"], lambda r: (num(r),), "str",
            np=["{a} as a string", "the string form of {a}", "the text representation of {a}"],
            vp=["convert {a} to a string", "turn the number into text"]),
    Concept("int", ["celsius_to_fahrenheit", "c_to_f", "to_fahrenheit"],
            ["    return {a} * 9 / 5 + 32\n"], lambda r: (r.choice([0, 100, -40, 37, 20, 10]),), "float",
            args=[["c", "celsius", "temp", "degrees"]],
            np=["the temperature {a} (in Celsius) converted to Fahrenheit", "{a} degrees Celsius in Fahrenheit"],
            vp=["convert {a} from Celsius to Fahrenheit"]),
    Concept("int", ["minutes_to_seconds", "to_seconds", "seconds_in"],
            ["    return {a} * 60\n"], lambda r: (r.randint(0, 30),), "int",
            args=[["minutes", "m", "mins"]],
            np=["the number of seconds in {a} minutes", "{a} minutes converted to seconds"],
            vp=["convert {a} minutes into seconds"]),
    Concept("int", ["hours_to_minutes", "to_minutes"], ["    return {a} * 60\n"],
            lambda r: (r.randint(0, 30),), "int", args=[["hours", "h", "hrs"]],
            np=["the number of minutes in {a} hours", "{a} hours in minutes"]),
    Concept("int", ["seconds_to_minutes", "whole_minutes"], ["    return {a} // 60\n"],
            lambda r: (r.randint(0, 900),), "int", args=[["seconds", "secs", "s"]],
            np=["how many whole minutes are in {a} seconds", "{a} seconds as whole minutes"]),
    # --- two or three numbers ------------------------------------------------------------------
    Concept("int int", ["add", "add_numbers", "sum_two", "add_two", "plus", "sum_of_two", "total"],
            ["    return {a} + {b}\n", "    result = {a} + {b}\n    return result\n"],
            lambda r: (num(r), num(r)), "int",
            np=["the sum of {a} and {b}", "{a} plus {b}", "{a} + {b}", "the sum of two numbers",
                "the total of {a} and {b}"],
            vp=["add {a} and {b}", "add two numbers", "add the two numbers together", "add {b} to {a}",
                "sum {a} and {b}"]),
    Concept("int int", ["subtract", "difference", "minus", "sub", "subtract_numbers"],
            ["    return {a} - {b}\n"], lambda r: (num(r), num(r)), "int",
            np=["{a} minus {b}", "{a} - {b}", "the difference {a} - {b}", "{b} subtracted from {a}"],
            vp=["subtract {b} from {a}", "take {b} away from {a}"]),
    Concept("int int", ["multiply", "product", "mul", "times", "multiply_numbers", "mult"],
            ["    return {a} * {b}\n"], lambda r: (num(r, -9, 12), num(r, -9, 12)), "int",
            np=["the product of {a} and {b}", "{a} times {b}", "{a} multiplied by {b}", "{a} * {b}",
                "the product of two numbers"],
            vp=["multiply {a} by {b}", "multiply two numbers", "multiply {a} and {b} together"]),
    Concept("int int", ["divide", "int_divide", "quotient", "div"],
            ["    return {a} // {b}\n"], lambda r: (num(r, 0, 60), r.randint(1, 9)), "int",
            np=["{a} divided by {b}, rounded down", "the integer quotient of {a} and {b}", "{a} // {b}"],
            vp=["divide {a} by {b} using integer division"], notes=["{b} is not zero."]),
    Concept("int int", ["maximum", "larger", "max_of_two", "bigger", "greater", "max2", "largest_of_two"],
            ["    if {a} > {b}:\n        return {a}\n    return {b}\n", "    return max({a}, {b})\n",
             "    return {a} if {a} >= {b} else {b}\n"],
            lambda r: (num(r), num(r)), "int",
            np=["the larger of {a} and {b}", "the maximum of {a} and {b}", "the bigger of the two numbers",
                "whichever of {a} and {b} is greater", "the greater number"],
            vp=["find the larger of two numbers", "pick the bigger of {a} and {b}"]),
    Concept("int int", ["minimum", "smaller", "min_of_two", "lesser", "min2", "smallest_of_two"],
            ["    if {a} < {b}:\n        return {a}\n    return {b}\n", "    return min({a}, {b})\n",
             "    return {a} if {a} <= {b} else {b}\n"],
            lambda r: (num(r), num(r)), "int",
            np=["the smaller of {a} and {b}", "the minimum of {a} and {b}", "the smaller of the two numbers",
                "whichever of {a} and {b} is less"],
            vp=["find the smaller of two numbers", "pick the smaller of {a} and {b}"]),
    Concept("int int", ["distance", "abs_difference", "absolute_difference", "diff", "gap"],
            ["    return abs({a} - {b})\n", "    if {a} > {b}:\n        return {a} - {b}\n    return {b} - {a}\n"],
            lambda r: (num(r), num(r)), "int",
            np=["the absolute difference between {a} and {b}", "how far apart {a} and {b} are",
                "the distance between {a} and {b}", "|{a} - {b}|"]),
    Concept("int int", ["average_of_two", "mean_of_two", "midpoint", "avg2"],
            ["    return ({a} + {b}) / 2\n"], lambda r: (num(r), num(r)), "float",
            np=["the average of {a} and {b}", "the mean of the two numbers", "the midpoint of {a} and {b}",
                "({a} + {b}) / 2"]),
    Concept("int int", ["is_equal", "same", "equal", "are_equal"],
            ["    return {a} == {b}\n"], lambda r: (num(r, 0, 3), num(r, 0, 3)), "bool",
            cond=["{a} and {b} are equal", "{a} equals {b}", "the two numbers are the same", "{a} == {b}"]),
    Concept("int int", ["is_greater", "greater_than", "bigger_than", "gt"],
            ["    return {a} > {b}\n"], lambda r: (num(r, 0, 5), num(r, 0, 5)), "bool",
            cond=["{a} is greater than {b}", "{a} is bigger than {b}", "{a} > {b}", "{a} is larger than {b}"]),
    Concept("int int", ["gcd", "greatest_common_divisor", "hcf", "common_divisor"],
            ["    while {b}:\n        {a}, {b} = {b}, {a} % {b}\n    return {a}\n",
             "    while {b} != 0:\n        {a}, {b} = {b}, {a} % {b}\n    return {a}\n"],
            lambda r: (r.randint(1, 60), r.randint(1, 60)), "int",
            np=["the greatest common divisor of {a} and {b}", "the largest number that divides both {a} and {b}",
                "the GCD of {a} and {b}", "the highest common factor of {a} and {b}"],
            notes=["Both numbers are positive."]),
    Concept("int int", ["lcm", "least_common_multiple", "lowest_common_multiple"],
            ["    m = max({a}, {b})\n    while m % {a} != 0 or m % {b} != 0:\n        m += 1\n    return m\n"],
            lambda r: (r.randint(1, 12), r.randint(1, 12)), "int",
            np=["the least common multiple of {a} and {b}", "the smallest positive number divisible by both {a} and {b}"]),
    Concept("int int", ["max_of_three", "largest_of_three", "max3", "biggest_of_three"],
            ["    return max({a}, {b}, {c})\n",
             "    best = {a}\n    if {b} > best:\n        best = {b}\n    if {c} > best:\n        best = {c}\n    return best\n"],
            lambda r: (num(r), num(r), num(r)), "int", args=[["a", "x"], ["b", "y"], ["c", "z"]],
            np=["the largest of {a}, {b} and {c}", "the maximum of three numbers", "the biggest of the three values"]),
    Concept("int int", ["min_of_three", "smallest_of_three", "min3"],
            ["    return min({a}, {b}, {c})\n",
             "    best = {a}\n    if {b} < best:\n        best = {b}\n    if {c} < best:\n        best = {c}\n    return best\n"],
            lambda r: (num(r), num(r), num(r)), "int", args=[["a", "x"], ["b", "y"], ["c", "z"]],
            np=["the smallest of {a}, {b} and {c}", "the minimum of three numbers"]),
    Concept("int int", ["sum_of_three", "add_three", "total_of_three"],
            ["    return {a} + {b} + {c}\n"], lambda r: (num(r), num(r), num(r)), "int",
            args=[["a", "x"], ["b", "y"], ["c", "z"]],
            np=["the sum of {a}, {b} and {c}", "the total of three numbers"], vp=["add three numbers"]),
    Concept("int int", ["rectangle_area", "area", "area_of_rectangle", "rect_area"],
            ["    return {a} * {b}\n"], lambda r: (r.randint(0, 12), r.randint(0, 12)), "int",
            args=[["width", "w", "length"], ["height", "h", "breadth"]],
            np=["the area of a rectangle with sides {a} and {b}", "the area of the rectangle"]),
    Concept("int int", ["rectangle_perimeter", "perimeter", "perimeter_of_rectangle"],
            ["    return 2 * ({a} + {b})\n", "    return 2 * {a} + 2 * {b}\n"],
            lambda r: (r.randint(0, 12), r.randint(0, 12)), "int",
            args=[["width", "w", "length"], ["height", "h", "breadth"]],
            np=["the perimeter of a rectangle that is {a} wide and {b} high", "the perimeter of the rectangle"]),
    Concept("int", ["square_area", "area_of_square"], ["    return {a} * {a}\n"],
            lambda r: (r.randint(0, 12),), "int", args=[["side", "s", "length"]],
            np=["the area of a square with side {a}"]),
    # --- lists of numbers ----------------------------------------------------------------------
    Concept("ints", ["sum_list", "total", "list_sum", "sum_of_list", "add_all", "sum_numbers", "sum_all",
                     "sum_elements", "my_sum", "sum_values"],
            ["    total = 0\n    for v in {a}:\n        total += v\n    return total\n", "    return sum({a})\n",
             "    result = 0\n    for num in {a}:\n        result = result + num\n    return result\n"],
            lambda r: (ints(r),), "int",
            np=["the sum of {a}", "the sum of the numbers in {a}", "the total of all elements of {a}",
                "the sum of all numbers in the list", "the sum of the elements", "all the numbers added together"],
            vp=["add up all elements of {a}", "add up the numbers in {a}", "sum the list", "sum the numbers in {a}",
                "add together every number in {a}"],
            notes=["An empty list sums to 0.", "Return 0 for an empty list."]),
    Concept("ints", ["product", "product_of_list", "multiply_all", "list_product", "prod"],
            ["    result = 1\n    for v in {a}:\n        result *= v\n    return result\n",
             "    product = 1\n    for x in {a}:\n        product = product * x\n    return product\n"],
            lambda r: (ints(r, -4, 6, 0, 5),), "int",
            np=["the product of the numbers in {a}", "all elements of {a} multiplied together",
                "the product of all the numbers"],
            vp=["multiply all numbers in {a} together", "multiply the elements of {a}"],
            notes=["The product of an empty list is 1."]),
    Concept("ints", ["average", "mean", "avg", "list_average", "mean_value", "get_average", "compute_mean"],
            ["    return sum({a}) / len({a})\n",
             "    total = 0\n    for v in {a}:\n        total += v\n    return total / len({a})\n"],
            lambda r: (nonempty(r, 0, 10),), "float",
            np=["the average of {a}", "the mean of {a}", "the arithmetic mean of the numbers",
                "the average value of the list", "the mean of the numbers in {a}"],
            vp=["compute the average of {a}", "average the numbers in {a}"],
            notes=["{A} is not empty.", "The list has at least one element."]),
    Concept("ints", ["safe_average", "average_or_zero", "mean_or_zero"],
            ["    if not {a}:\n        return 0\n    return sum({a}) / len({a})\n",
             "    if len({a}) == 0:\n        return 0\n    return sum({a}) / len({a})\n"],
            lambda r: (ints(r, 0, 10, 0, 4),), "float",
            np=["the average of {a}, or 0 if it is empty", "the mean of the numbers (0 for an empty list)"]),
    Concept("ints", ["largest", "max_element", "list_max", "biggest", "find_max", "maximum", "max_value",
                     "get_max", "highest"],
            ["    best = {a}[0]\n    for v in {a}:\n        if v > best:\n            best = v\n    return best\n",
             "    return max({a})\n",
             "    result = {a}[0]\n    for x in {a}[1:]:\n        if x > result:\n            result = x\n    return result\n"],
            lambda r: (nonempty(r),), "int",
            np=["the largest number in {a}", "the maximum of {a}", "the biggest element of the list",
                "the largest value in the list", "the highest number"],
            vp=["find the maximum of {a}", "find the largest element in {a}", "find the biggest number"],
            notes=["{A} is never empty.", "The list is not empty."]),
    Concept("ints", ["smallest", "min_element", "list_min", "find_min", "minimum", "min_value", "get_min",
                     "lowest"],
            ["    best = {a}[0]\n    for v in {a}:\n        if v < best:\n            best = v\n    return best\n",
             "    return min({a})\n"],
            lambda r: (nonempty(r),), "int",
            np=["the smallest number in {a}", "the minimum of {a}", "the smallest element of the list",
                "the lowest value in the list"],
            vp=["find the minimum of {a}", "find the smallest element in {a}"],
            notes=["{A} is never empty.", "The list is not empty."]),
    Concept("ints", ["max_or_none", "largest_or_none", "safe_max"],
            ["    if not {a}:\n        return None\n    return max({a})\n",
             "    if len({a}) == 0:\n        return None\n    best = {a}[0]\n    for v in {a}:\n        if v > best:\n            best = v\n    return best\n"],
            lambda r: (ints(r),), "any",
            np=["the largest number in {a}, or None if {a} is empty", "the maximum of the list (None when it is empty)"]),
    Concept("ints", ["min_or_none", "smallest_or_none", "safe_min"],
            ["    if not {a}:\n        return None\n    return min({a})\n"],
            lambda r: (ints(r),), "any",
            np=["the smallest number in {a}, or None if {a} is empty", "the minimum of the list (None when it is empty)"]),
    Concept("ints", ["value_range", "spread", "max_minus_min", "span"],
            ["    return max({a}) - min({a})\n"], lambda r: (nonempty(r),), "int",
            np=["the difference between the largest and smallest numbers in {a}", "max minus min of {a}",
                "the range of the values in {a}"], notes=["{A} is not empty."]),
    Concept("ints", ["count", "length", "size", "count_items", "num_elements", "list_length", "how_many"],
            ["    return len({a})\n", "    count = 0\n    for _ in {a}:\n        count += 1\n    return count\n"],
            lambda r: (ints(r),), "int",
            np=["the number of elements in {a}", "the length of {a}", "how many items {a} has",
                "the size of the list"],
            vp=["count the elements of {a}", "count how many numbers are in the list"]),
    Concept("ints", ["count_positive", "num_positive", "positive_count", "count_positives", "how_many_positive"],
            ["    count = 0\n    for v in {a}:\n        if v > 0:\n            count += 1\n    return count\n",
             "    return sum(1 for v in {a} if v > 0)\n", "    return len([v for v in {a} if v > 0])\n"],
            lambda r: (ints(r),), "int",
            np=["how many numbers in {a} are greater than zero", "the number of positive values in {a}",
                "the count of positive numbers"],
            vp=["count the positive numbers in {a}", "count how many elements are above zero"]),
    Concept("ints", ["count_negative", "num_negative", "count_negatives", "negative_count"],
            ["    return sum(1 for v in {a} if v < 0)\n",
             "    count = 0\n    for v in {a}:\n        if v < 0:\n            count += 1\n    return count\n"],
            lambda r: (ints(r),), "int",
            np=["how many numbers in {a} are below zero", "the number of negative values in {a}"],
            vp=["count the negative numbers in {a}"]),
    Concept("ints", ["count_even", "num_even", "count_evens", "even_count", "how_many_even"],
            ["    return sum(1 for v in {a} if v % 2 == 0)\n",
             "    count = 0\n    for v in {a}:\n        if v % 2 == 0:\n            count += 1\n    return count\n",
             "    return len([v for v in {a} if v % 2 == 0])\n"],
            lambda r: (ints(r),), "int",
            np=["how many numbers in {a} are even", "the number of even values in {a}", "the count of even numbers"],
            vp=["count the even numbers in {a}", "count the even elements"]),
    Concept("ints", ["count_odd", "num_odd", "count_odds", "odd_count"],
            ["    return sum(1 for v in {a} if v % 2 == 1)\n",
             "    count = 0\n    for v in {a}:\n        if v % 2 != 0:\n            count += 1\n    return count\n"],
            lambda r: (ints(r),), "int",
            np=["how many numbers in {a} are odd", "the number of odd values in {a}"],
            vp=["count the odd numbers in {a}"]),
    Concept("ints", ["count_zeros", "num_zeros", "zero_count"],
            ["    return {a}.count(0)\n",
             "    count = 0\n    for v in {a}:\n        if v == 0:\n            count += 1\n    return count\n"],
            lambda r: (ints(r, -2, 2),), "int",
            np=["how many elements of {a} are zero", "the number of zeros in {a}"], vp=["count the zeros in {a}"]),
    Concept("ints thr", ["count_greater", "count_above", "num_greater_than", "count_larger", "how_many_above"],
            ["    return len([v for v in {a} if v > {b}])\n",
             "    count = 0\n    for v in {a}:\n        if v > {b}:\n            count += 1\n    return count\n"],
            lambda r: (ints(r), r.randint(0, 10)), "int",
            np=["how many elements of {a} are greater than {b}", "the number of values in {a} above {b}"],
            vp=["count the numbers in {a} that exceed {b}"]),
    Concept("ints", ["count_greater_than_{k}", "num_above_{k}", "count_over_{kw}"],
            ["    return len([v for v in {a} if v > {k}])\n", "    return sum(1 for v in {a} if v > {k})\n"],
            lambda r: (ints(r),), "int", consts=K,
            np=["how many elements of {a} are greater than {kw}", "the number of values above {k}"],
            vp=["count the numbers in {a} that exceed {kw}"]),
    Concept("ints", ["filter_even", "only_even", "evens", "get_evens", "keep_evens", "even_numbers", "select_even"],
            ["    return [v for v in {a} if v % 2 == 0]\n",
             "    result = []\n    for v in {a}:\n        if v % 2 == 0:\n            result.append(v)\n    return result\n"],
            lambda r: (ints(r),), "ints",
            np=["a list of the even numbers in {a}, in order", "the even elements of {a}", "only the even numbers",
                "a new list containing just the even values"],
            vp=["keep only the even elements of {a}", "filter out the odd numbers", "remove the odd numbers from {a}",
                "select the even numbers from {a}"]),
    Concept("ints", ["filter_odd", "only_odd", "odds", "get_odds", "keep_odds", "odd_numbers"],
            ["    return [v for v in {a} if v % 2 == 1]\n", "    return [v for v in {a} if v % 2 != 0]\n",
             "    result = []\n    for v in {a}:\n        if v % 2 == 1:\n            result.append(v)\n    return result\n"],
            lambda r: (ints(r),), "ints",
            np=["a list of the odd numbers in {a}, in order", "the odd elements of {a}", "only the odd numbers"],
            vp=["keep only the odd elements of {a}", "filter out the even numbers", "remove the even numbers from {a}"]),
    Concept("ints", ["filter_positive", "only_positive", "positives", "keep_positive", "remove_negatives"],
            ["    return [v for v in {a} if v > 0]\n",
             "    result = []\n    for v in {a}:\n        if v > 0:\n            result.append(v)\n    return result\n"],
            lambda r: (ints(r),), "ints",
            np=["a list of the numbers in {a} that are greater than zero", "the positive elements of {a}",
                "only the positive values"],
            vp=["keep only the positive elements of {a}", "drop every number that is not positive"]),
    Concept("ints", ["filter_negative", "only_negative", "negatives", "keep_negative"],
            ["    return [v for v in {a} if v < 0]\n"], lambda r: (ints(r),), "ints",
            np=["a list of the numbers in {a} that are less than zero", "the negative elements of {a}"],
            vp=["keep only the negative numbers of {a}"]),
    Concept("ints thr", ["filter_greater", "above", "greater_than", "keep_above", "larger_than"],
            ["    return [v for v in {a} if v > {b}]\n",
             "    result = []\n    for v in {a}:\n        if v > {b}:\n            result.append(v)\n    return result\n"],
            lambda r: (ints(r), r.randint(0, 10)), "ints",
            np=["the elements of {a} that are greater than {b}", "a list of the values in {a} above {b}"],
            vp=["keep the numbers in {a} that are larger than {b}"]),
    Concept("ints thr", ["filter_less", "below", "less_than", "keep_below", "smaller_than"],
            ["    return [v for v in {a} if v < {b}]\n"], lambda r: (ints(r), r.randint(0, 10)), "ints",
            np=["the elements of {a} that are less than {b}", "a list of the values in {a} below {b}"],
            vp=["keep the numbers in {a} that are smaller than {b}"]),
    Concept("ints", ["double_all", "doubled", "double_each", "double_list", "times_two_all", "double_values"],
            ["    return [v * 2 for v in {a}]\n", "    return [2 * x for x in {a}]\n",
             "    result = []\n    for v in {a}:\n        result.append(v * 2)\n    return result\n"],
            lambda r: (ints(r),), "ints",
            np=["a list with every element of {a} doubled", "each number of {a} multiplied by two",
                "a new list where every value is twice the original", "the list with all numbers doubled"],
            vp=["multiply each number in {a} by two", "double every element of {a}", "double each value in the list"]),
    Concept("ints", ["triple_all", "triple_each", "tripled_list"],
            ["    return [v * 3 for v in {a}]\n"], lambda r: (ints(r),), "ints",
            np=["a list with every element of {a} tripled", "each number of {a} multiplied by three"],
            vp=["multiply each number in {a} by 3"]),
    Concept("ints", ["multiply_all_by_{k}", "scale_list_{k}", "times_{k}_each"],
            ["    return [v * {k} for v in {a}]\n"], lambda r: (ints(r),), "ints", consts=K,
            np=["a list with every element of {a} multiplied by {kw}", "each value of {a} times {k}"],
            vp=["multiply every number in {a} by {kw}"]),
    Concept("ints", ["square_all", "squares", "square_each", "square_list", "squared_values"],
            ["    return [v * v for v in {a}]\n", "    return [x ** 2 for x in {a}]\n",
             "    result = []\n    for v in {a}:\n        result.append(v * v)\n    return result\n"],
            lambda r: (ints(r),), "ints",
            np=["a list of the squares of the numbers in {a}", "each element of {a} squared",
                "the squares of the values"],
            vp=["square each element of {a}", "square every number in the list"]),
    Concept("ints", ["cube_all", "cubes", "cube_each"],
            ["    return [v ** 3 for v in {a}]\n"], lambda r: (ints(r, -4, 6),), "ints",
            np=["a list of the cubes of the numbers in {a}", "each element of {a} cubed"]),
    Concept("ints", ["halve_all", "half_each", "halves"],
            ["    return [v // 2 for v in {a}]\n"], lambda r: (ints(r),), "ints",
            np=["a list with every element of {a} halved, rounded down", "each number of {a} divided by two (integer division)"]),
    Concept("ints", ["add_{k}_to_all", "shift_by_{k}", "add_{k}_each", "increase_all_by_{k}"],
            ["    return [v + {k} for v in {a}]\n"], lambda r: (ints(r),), "ints", consts=K,
            np=["a list with {kw} added to every element of {a}", "each number in {a} increased by {kw}"],
            vp=["add {kw} to each number in {a}", "increase every element by {k}"]),
    Concept("ints", ["increment_all", "add_one_to_each", "plus_one_all"],
            ["    return [v + 1 for v in {a}]\n"], lambda r: (ints(r),), "ints",
            np=["a list with one added to every element of {a}", "each number in {a} plus one"],
            vp=["add 1 to every element of {a}", "increment each number"]),
    Concept("ints", ["negate_all", "negated", "flip_signs"],
            ["    return [-v for v in {a}]\n"], lambda r: (ints(r),), "ints",
            np=["a list with the sign of every element of {a} flipped", "the negation of each number in {a}"]),
    Concept("ints", ["abs_all", "absolute_values", "abs_each"],
            ["    return [abs(v) for v in {a}]\n"], lambda r: (ints(r),), "ints",
            np=["the absolute value of each element of {a}", "a list of the absolute values of {a}"]),
    Concept("ints", ["first", "head", "first_element", "first_item", "get_first"],
            ["    if not {a}:\n        return None\n    return {a}[0]\n",
             "    if len({a}) == 0:\n        return None\n    return {a}[0]\n"],
            lambda r: (ints(r),), "any",
            np=["the first element of {a}, or None if it is empty", "{a}[0], or None for an empty list",
                "the first item of the list (None when the list is empty)"]),
    Concept("ints", ["first_of", "get_head", "front"], ["    return {a}[0]\n"], lambda r: (nonempty(r),), "int",
            np=["the first element of {a}", "the first item in the list", "the element at index 0"],
            notes=["{A} is not empty."]),
    Concept("ints", ["last", "last_element", "last_item", "get_last", "tail_item"],
            ["    if not {a}:\n        return None\n    return {a}[-1]\n",
             "    if len({a}) == 0:\n        return None\n    return {a}[len({a}) - 1]\n"],
            lambda r: (ints(r),), "any",
            np=["the last element of {a}, or None if it is empty", "the final item of {a}, or None for an empty list"]),
    Concept("ints", ["last_of", "final", "back"], ["    return {a}[-1]\n"], lambda r: (nonempty(r),), "int",
            np=["the last element of {a}", "the final item in the list"], notes=["{A} is not empty."]),
    Concept("ints", ["middle", "middle_element", "center"], ["    return {a}[len({a}) // 2]\n"],
            lambda r: (nonempty(r),), "int",
            np=["the middle element of {a}", "the element at index len({a}) // 2"], notes=["{A} is not empty."]),
    Concept("ints", ["rest", "tail", "drop_first", "without_first", "all_but_first"],
            ["    return {a}[1:]\n"], lambda r: (ints(r),), "ints",
            np=["{a} without its first element", "all elements of {a} except the first", "{a}[1:]"]),
    Concept("ints", ["drop_last", "without_last", "all_but_last", "init"],
            ["    return {a}[:-1]\n"], lambda r: (ints(r),), "ints",
            np=["{a} without its last element", "all elements of {a} except the last one"]),
    Concept("ints count", ["take", "first_n", "head_n", "take_first", "first_k"],
            ["    return {a}[:{b}]\n"], lambda r: (ints(r), r.randint(0, 5)), "ints",
            np=["the first {b} elements of {a}", "a list of the first {b} items of {a}", "{a}[:{b}]"]),
    Concept("ints count", ["last_n", "take_last", "tail_n", "last_k"],
            ["    if {b} == 0:\n        return []\n    return {a}[-{b}:]\n"], lambda r: (ints(r), r.randint(0, 5)), "ints",
            np=["the last {b} elements of {a}", "a list of the final {b} items of {a}"]),
    Concept("ints", ["every_other", "even_positions", "alternate", "every_second"],
            ["    return {a}[::2]\n", "    return [v for i, v in enumerate({a}) if i % 2 == 0]\n"],
            lambda r: (ints(r),), "ints",
            np=["every other element of {a}, starting with the first", "the elements of {a} at even indices"]),
    Concept("ints", ["reverse_list", "reversed_list", "reverse", "backwards", "flip", "reverse_order"],
            ["    return {a}[::-1]\n", "    return list(reversed({a}))\n",
             "    result = []\n    for v in {a}:\n        result.insert(0, v)\n    return result\n"],
            lambda r: (ints(r),), "ints",
            np=["the elements of {a} in reverse order", "{a} reversed", "a reversed copy of the list",
                "the list backwards"],
            vp=["reverse {a}", "reverse the list", "reverse the order of the elements"]),
    Concept("ints", ["sorted_copy", "sort_list", "sort_numbers", "ascending", "sort_ascending", "sorted_list"],
            ["    return sorted({a})\n"], lambda r: (ints(r),), "ints",
            np=["a sorted copy of {a}", "the elements of {a} in ascending order", "the numbers sorted from smallest to largest"],
            vp=["sort {a} in increasing order", "sort the numbers", "sort the list from low to high"]),
    Concept("ints", ["sort_descending", "descending", "sorted_desc", "reverse_sorted", "sort_high_to_low"],
            ["    return sorted({a}, reverse=True)\n", "    return sorted({a})[::-1]\n"],
            lambda r: (ints(r),), "ints",
            np=["the elements of {a} in descending order", "the numbers sorted from largest to smallest"],
            vp=["sort {a} in decreasing order", "sort the list from high to low"]),
    Concept("ints", ["unique", "dedupe", "remove_duplicates", "distinct", "uniq", "deduplicate"],
            ["    seen = []\n    for v in {a}:\n        if v not in seen:\n            seen.append(v)\n    return seen\n",
             "    result = []\n    for x in {a}:\n        if x not in result:\n            result.append(x)\n    return result\n"],
            lambda r: ([r.randint(0, 4) for _ in range(r.randint(0, 7))],), "ints",
            np=["the elements of {a} without duplicates, keeping the first occurrence", "the distinct values of {a} in order"],
            vp=["remove repeated values from {a}, preserving order", "remove the duplicates from the list"]),
    Concept("ints", ["sorted_unique", "unique_sorted", "distinct_sorted"],
            ["    return sorted(set({a}))\n"], lambda r: ([r.randint(0, 6) for _ in range(r.randint(0, 7))],), "ints",
            np=["the distinct values of {a} in ascending order", "a sorted list of the unique numbers in {a}"]),
    Concept("ints", ["count_unique", "num_distinct", "distinct_count"],
            ["    return len(set({a}))\n"], lambda r: ([r.randint(0, 5) for _ in range(r.randint(0, 7))],), "int",
            np=["the number of distinct values in {a}", "how many different numbers {a} contains"]),
    Concept("ints", ["has_duplicates", "contains_duplicates", "any_duplicates", "has_repeats"],
            ["    return len(set({a})) != len({a})\n",
             "    seen = set()\n    for v in {a}:\n        if v in seen:\n            return True\n        seen.add(v)\n    return False\n"],
            lambda r: ([r.randint(0, 6) for _ in range(r.randint(0, 5))],), "bool",
            cond=["some value appears more than once in {a}", "{a} contains a duplicate", "the list has repeated elements"]),
    Concept("ints", ["all_unique", "no_duplicates", "is_unique"],
            ["    return len(set({a})) == len({a})\n"],
            lambda r: ([r.randint(0, 6) for _ in range(r.randint(0, 5))],), "bool",
            cond=["every element of {a} is different", "{a} has no duplicates", "all values in the list are unique"]),
    Concept("ints", ["all_positive", "are_all_positive", "every_positive"],
            ["    return all(v > 0 for v in {a})\n",
             "    for v in {a}:\n        if v <= 0:\n            return False\n    return True\n"],
            lambda r: (ints(r, -2, 9, 0, 4),), "bool",
            cond=["every number in {a} is positive", "all elements of {a} are greater than zero"],
            notes=["An empty list counts as all positive."]),
    Concept("ints", ["all_even", "are_all_even", "every_even"],
            ["    return all(v % 2 == 0 for v in {a})\n"], lambda r: (ints(r, 0, 6, 0, 4),), "bool",
            cond=["every number in {a} is even", "all elements of {a} are even"]),
    Concept("ints", ["any_negative", "has_negative", "contains_negative"],
            ["    return any(v < 0 for v in {a})\n",
             "    for v in {a}:\n        if v < 0:\n            return True\n    return False\n"],
            lambda r: (ints(r, -3, 9, 0, 5),), "bool",
            cond=["{a} contains a negative number", "any element of {a} is below zero", "at least one number is negative"]),
    Concept("ints", ["any_even", "has_even", "contains_even"],
            ["    return any(v % 2 == 0 for v in {a})\n"], lambda r: (ints(r, 0, 9, 0, 4),), "bool",
            cond=["{a} contains an even number", "at least one element of {a} is even"]),
    Concept("ints", ["is_sorted", "sorted_check", "in_order", "is_ascending"],
            ["    return {a} == sorted({a})\n",
             "    for i in range(len({a}) - 1):\n        if {a}[i] > {a}[i + 1]:\n            return False\n    return True\n",
             "    return all({a}[i] <= {a}[i + 1] for i in range(len({a}) - 1))\n"],
            lambda r: (r.choice([sorted(ints(r)), ints(r)]),), "bool",
            cond=["{a} is sorted in ascending order", "the list is in non-decreasing order", "{a} is sorted"]),
    Concept("ints", ["is_empty", "empty", "list_is_empty"],
            ["    return len({a}) == 0\n", "    return not {a}\n"], lambda r: (ints(r, 0, 9, 0, 2),), "bool",
            cond=["{a} is empty", "the list has no elements", "{a} contains nothing"]),
    Concept("ints", ["sum_even", "sum_of_evens", "even_sum", "add_evens"],
            ["    return sum(v for v in {a} if v % 2 == 0)\n",
             "    total = 0\n    for v in {a}:\n        if v % 2 == 0:\n            total += v\n    return total\n"],
            lambda r: (ints(r),), "int",
            np=["the sum of the even numbers in {a}", "the total of the even elements of {a}"],
            vp=["add up the even numbers in {a}"]),
    Concept("ints", ["sum_odd", "sum_of_odds", "odd_sum"],
            ["    return sum(v for v in {a} if v % 2 == 1)\n"], lambda r: (ints(r),), "int",
            np=["the sum of the odd numbers in {a}", "the total of the odd elements"],
            vp=["add up the odd numbers in {a}"]),
    Concept("ints", ["sum_positive", "positive_sum", "sum_of_positives"],
            ["    return sum(v for v in {a} if v > 0)\n"], lambda r: (ints(r),), "int",
            np=["the sum of the positive numbers in {a}", "the total of all values above zero"]),
    Concept("ints", ["sum_of_squares", "square_sum", "sum_squares", "squares_total"],
            ["    return sum(v * v for v in {a})\n",
             "    total = 0\n    for v in {a}:\n        total += v ** 2\n    return total\n"],
            lambda r: (ints(r, -5, 6),), "int",
            np=["the sum of the squares of the numbers in {a}", "the total of each element squared"],
            vp=["square every number in {a} and add them up"]),
    Concept("ints", ["cumulative_sum", "running_total", "prefix_sums", "running_sum", "cumsum"],
            ["    result = []\n    total = 0\n    for v in {a}:\n        total += v\n        result.append(total)\n    return result\n"],
            lambda r: (ints(r),), "ints",
            np=["the running totals of {a}", "a list whose i-th element is the sum of the first i + 1 numbers",
                "the cumulative sums of the list"]),
    Concept("ints ints", ["add_lists", "elementwise_sum", "pairwise_sum", "sum_lists", "add_pairwise"],
            ["    return [x + y for x, y in zip({a}, {b})]\n",
             "    result = []\n    for i in range(len({a})):\n        result.append({a}[i] + {b}[i])\n    return result\n"],
            lambda r: (lambda n: (ints(r, 0, 9, n, n), ints(r, 0, 9, n, n)))(r.randint(0, 4)), "ints",
            np=["the element-wise sum of {a} and {b}", "a list of the sums of matching elements of {a} and {b}"],
            vp=["add {a} and {b} position by position"], notes=["Both lists have the same length."]),
    Concept("ints ints", ["dot", "dot_product", "inner_product"],
            ["    return sum(x * y for x, y in zip({a}, {b}))\n",
             "    total = 0\n    for i in range(len({a})):\n        total += {a}[i] * {b}[i]\n    return total\n"],
            lambda r: (lambda n: (ints(r, -3, 5, n, n), ints(r, -3, 5, n, n)))(r.randint(0, 4)), "int",
            np=["the dot product of {a} and {b}", "the sum of the products of matching elements"],
            notes=["The lists are the same length."]),
    Concept("ints ints", ["concat", "join_lists", "combine", "merge_lists", "concatenate"],
            ["    return {a} + {b}\n", "    result = list({a})\n    result.extend({b})\n    return result\n"],
            lambda r: (ints(r, 0, 9, 0, 3), ints(r, 0, 9, 0, 3)), "ints",
            np=["{a} followed by {b}", "the two lists joined together", "a new list with the elements of {a} and then {b}"],
            vp=["concatenate {a} and {b}", "join the two lists"]),
    Concept("ints ints", ["common", "intersection", "common_elements", "shared", "in_both"],
            ["    return sorted(set({a}) & set({b}))\n", "    return sorted(set({a}).intersection({b}))\n"],
            lambda r: (ints(r, 0, 6), ints(r, 0, 6)), "ints",
            np=["the sorted list of values that appear in both {a} and {b}", "the common elements of the two lists, sorted"]),
    Concept("ints ints", ["union", "all_values", "combined_unique"],
            ["    return sorted(set({a}) | set({b}))\n"], lambda r: (ints(r, 0, 6), ints(r, 0, 6)), "ints",
            np=["the sorted list of values that appear in {a} or {b}", "every distinct value of either list, sorted"]),
    Concept("ints ints", ["difference", "only_in_first", "minus_list", "subtract_lists"],
            ["    return [v for v in {a} if v not in {b}]\n"], lambda r: (ints(r, 0, 6), ints(r, 0, 6)), "ints",
            np=["the elements of {a} that are not in {b}", "{a} without the values found in {b}"]),
    Concept("ints ints", ["same_elements", "same_values", "equal_as_sets"],
            ["    return set({a}) == set({b})\n"], lambda r: (ints(r, 0, 3, 0, 3), ints(r, 0, 3, 0, 3)), "bool",
            cond=["{a} and {b} contain the same values, ignoring order and repeats"]),
    Concept("ints thr", ["contains", "has_value", "includes", "is_in", "member", "in_list", "exists"],
            ["    return {b} in {a}\n",
             "    for v in {a}:\n        if v == {b}:\n            return True\n    return False\n"],
            lambda r: (ints(r, 0, 6), r.randint(0, 6)), "bool",
            args=[None, ["target", "value", "x", "item", "n", "key"]],
            cond=["{b} is in {a}", "{a} contains {b}", "{b} appears in the list", "the value {b} is an element of {a}"]),
    Concept("ints thr", ["count_value", "occurrences", "count_of", "how_many_times", "frequency"],
            ["    return {a}.count({b})\n",
             "    count = 0\n    for v in {a}:\n        if v == {b}:\n            count += 1\n    return count\n"],
            lambda r: ([r.randint(0, 3) for _ in range(r.randint(0, 7))], r.randint(0, 3)), "int",
            args=[None, ["target", "value", "x", "item", "n"]],
            np=["how many times {b} appears in {a}", "the number of occurrences of {b} in {a}"],
            vp=["count the occurrences of {b} in {a}", "count how often {b} occurs"]),
    Concept("ints thr", ["index_of", "find_index", "find", "position", "locate", "search"],
            ["    for i, v in enumerate({a}):\n        if v == {b}:\n            return i\n    return -1\n",
             "    for i in range(len({a})):\n        if {a}[i] == {b}:\n            return i\n    return -1\n",
             "    if {b} in {a}:\n        return {a}.index({b})\n    return -1\n"],
            lambda r: (ints(r, 0, 6), r.randint(0, 6)), "int",
            args=[None, ["target", "value", "x", "item", "n", "key"]],
            np=["the index of the first {b} in {a}, or -1 if it is absent", "the position of {b} in the list, or -1"],
            vp=["find where {b} first occurs in {a}; return -1 when it does not"]),
    Concept("ints thr", ["remove_value", "remove_all", "without", "drop_value", "delete_all"],
            ["    return [v for v in {a} if v != {b}]\n",
             "    result = []\n    for v in {a}:\n        if v != {b}:\n            result.append(v)\n    return result\n"],
            lambda r: ([r.randint(0, 3) for _ in range(r.randint(0, 6))], r.randint(0, 3)), "ints",
            args=[None, ["target", "value", "x", "item", "n"]],
            np=["{a} with every {b} removed", "a copy of the list without any occurrence of {b}"],
            vp=["remove every occurrence of {b} from {a}"]),
    Concept("ints", ["index_of_max", "argmax", "max_index", "position_of_max"],
            ["    best = 0\n    for i in range(1, len({a})):\n        if {a}[i] > {a}[best]:\n            best = i\n    return best\n",
             "    return {a}.index(max({a}))\n"],
            lambda r: (nonempty(r),), "int",
            np=["the index of the largest element of {a}", "the position of the maximum (the first one on ties)"],
            notes=["{A} is not empty."]),
    Concept("ints", ["index_of_min", "argmin", "min_index"],
            ["    return {a}.index(min({a}))\n"], lambda r: (nonempty(r),), "int",
            np=["the index of the smallest element of {a}", "the position of the minimum (the first one on ties)"],
            notes=["{A} is not empty."]),
    Concept("ints", ["second_largest", "runner_up", "second_max"],
            ["    return sorted(set({a}))[-2]\n"],
            lambda r: (list(set(ints(r, 0, 20, 2, 7))) + [21, 22],), "int",
            np=["the second largest distinct value in {a}"], notes=["{A} has at least two distinct values."]),
    Concept("ints", ["pairs_with_index", "indexed", "enumerate_list"],
            ["    return [(i, v) for i, v in enumerate({a})]\n", "    return list(enumerate({a}))\n"],
            lambda r: (ints(r, 0, 9, 0, 4),), "any",
            np=["a list of (index, value) pairs for {a}", "each element of {a} paired with its position"]),
    Concept("ints", ["first_even", "find_first_even"],
            ["    for v in {a}:\n        if v % 2 == 0:\n            return v\n    return None\n"],
            lambda r: (ints(r),), "any",
            np=["the first even number in {a}, or None if there is none"]),
    Concept("ints", ["first_negative", "find_negative"],
            ["    for v in {a}:\n        if v < 0:\n            return v\n    return None\n"],
            lambda r: (ints(r),), "any",
            np=["the first negative number in {a}, or None if there is none"]),
    Concept("ints", ["to_strings", "stringify_all", "as_strings"],
            ["    return [str(v) for v in {a}]\n"], lambda r: (ints(r, 0, 99, 0, 4),), "strs",
            np=["a list of the numbers in {a} as strings", "each number of {a} converted to a string"]),
    Concept("ints", ["swap_ends", "swap_first_last"],
            ["    if len({a}) < 2:\n        return list({a})\n    return [{a}[-1]] + {a}[1:-1] + [{a}[0]]\n"],
            lambda r: (ints(r),), "ints",
            np=["a copy of {a} with the first and last elements swapped"]),
    # --- strings --------------------------------------------------------------------------------
    Concept("str", ["reverse_string", "reverse", "backwards", "reverse_text", "reversed_string", "flip",
                    "reverse_word", "mirror"],
            ["    return {a}[::-1]\n", "    return \"\".join(reversed({a}))\n",
             "    result = \"\"\n    for ch in {a}:\n        result = ch + result\n    return result\n"],
            lambda r: (r.choice([word(r), sentence(r)]),), "str",
            np=["{a} reversed", "the characters of {a} in reverse order", "the string backwards",
                "the reverse of {a}"],
            vp=["reverse {a}", "reverse the string", "reverse the given text", "turn {a} backwards"]),
    Concept("str", ["to_upper", "shout", "upper", "uppercase", "make_upper", "to_uppercase", "capitalize_all"],
            ["    return {a}.upper()\n"], lambda r: (text(r),), "str",
            np=["{a} in upper case", "{a} with every letter capitalized", "the uppercase version of {a}",
                "the string in capital letters"],
            vp=["convert {a} to capital letters", "convert the string to uppercase", "make {a} upper case"]),
    Concept("str", ["to_lower", "lower", "whisper", "lowercase", "make_lower", "to_lowercase"],
            ["    return {a}.lower()\n"], lambda r: (text(r),), "str",
            np=["{a} in lower case", "the lowercase version of {a}", "the string in small letters"],
            vp=["convert {a} to small letters", "convert the string to lowercase", "make {a} lower case"]),
    Concept("str", ["swap_case", "invert_case", "toggle_case"],
            ["    return {a}.swapcase()\n"], lambda r: (text(r),), "str",
            np=["{a} with upper case letters made lower case and lower case letters made upper case"],
            vp=["swap the case of every letter in {a}"]),
    Concept("str", ["capitalize", "capitalize_first", "cap_first"],
            ["    return {a}[:1].upper() + {a}[1:]\n"], lambda r: (sentence(r).lower(),), "str",
            np=["{a} with its first character in upper case", "the string with a capital first letter"],
            vp=["capitalize the first letter of {a}"]),
    Concept("str", ["capitalize_words", "title_case", "titlecase", "capitalize_each_word"],
            ["    return \" \".join(w[:1].upper() + w[1:] for w in {a}.split())\n",
             "    words = {a}.split()\n    return \" \".join(w.capitalize() for w in words)\n"],
            lambda r: (sentence(r).lower(),), "str",
            np=["{a} with the first letter of every word in upper case", "the title case version of {a}"],
            vp=["capitalize each word of {a}"]),
    Concept("str", ["string_length", "length", "str_len", "count_chars", "num_chars", "char_count", "text_length"],
            ["    return len({a})\n", "    count = 0\n    for _ in {a}:\n        count += 1\n    return count\n"],
            lambda r: (text(r),), "int",
            np=["the number of characters in {a}", "the length of {a}", "how long the string is",
                "how many characters the text has"],
            vp=["count the characters in {a}", "measure the length of the string"]),
    Concept("str", ["count_vowels", "num_vowels", "vowel_count", "vowels", "how_many_vowels"],
            ["    count = 0\n    for c in {a}:\n        if c in \"aeiou\":\n            count += 1\n    return count\n",
             "    return sum(1 for c in {a} if c in \"aeiou\")\n",
             "    return len([ch for ch in {a} if ch in 'aeiou'])\n"],
            lambda r: (sentence(r).lower(),), "int",
            np=["the number of vowels (a, e, i, o, u) in {a}", "how many vowels {a} contains",
                "the count of lower-case vowels"],
            vp=["count the lower-case vowels in {a}", "count the vowels in the string"]),
    Concept("str", ["count_consonants", "num_consonants"],
            ["    return sum(1 for c in {a} if c.isalpha() and c not in \"aeiou\")\n"],
            lambda r: (sentence(r).lower(),), "int",
            np=["the number of letters in {a} that are not vowels"], vp=["count the consonants in {a}"]),
    Concept("str", ["count_upper", "num_uppercase", "count_capitals", "uppercase_count"],
            ["    return sum(1 for c in {a} if c.isupper())\n",
             "    count = 0\n    for c in {a}:\n        if c.isupper():\n            count += 1\n    return count\n"],
            lambda r: (text(r),), "int",
            np=["the number of upper case letters in {a}", "how many capital letters {a} has"],
            vp=["count the uppercase characters in {a}"]),
    Concept("str", ["count_digits_in", "num_digit_chars", "digit_chars"],
            ["    return sum(1 for c in {a} if c.isdigit())\n"], lambda r: (text(r),), "int",
            np=["how many digit characters {a} contains", "the number of digits in the string"]),
    Concept("str", ["count_words", "word_count", "num_words", "words_in", "how_many_words", "count_the_words"],
            ["    return len({a}.split())\n"], lambda r: (r.choice([sentence(r), ""]),), "int",
            np=["the number of words in {a}", "how many words {a} has", "the word count of the text"],
            vp=["count the words in {a}", "count the space-separated words in {a}"],
            notes=["Words are separated by spaces."]),
    Concept("str", ["count_spaces", "num_spaces", "space_count"],
            ["    return {a}.count(\" \")\n",
             "    count = 0\n    for c in {a}:\n        if c == \" \":\n            count += 1\n    return count\n"],
            lambda r: (sentence(r),), "int",
            np=["how many spaces {a} contains", "the number of space characters in {a}"], vp=["count the spaces in {a}"]),
    Concept("str char", ["count_char", "char_count", "count_letter", "occurrences_of", "count_occurrences",
                         "letter_count"],
            ["    return {a}.count({b})\n",
             "    count = 0\n    for c in {a}:\n        if c == {b}:\n            count += 1\n    return count\n"],
            lambda r: (sentence(r), char(r)), "int",
            np=["how many times the character {b} occurs in {a}", "the number of times {b} appears in {a}"],
            vp=["count the occurrences of {b} in {a}", "count how often the letter {b} appears"]),
    Concept("str", ["count_{k}", "count_letter_{k}", "num_{k}s", "how_many_{k}"],
            ["    return {a}.count(\"{k}\")\n",
             "    count = 0\n    for c in {a}:\n        if c == \"{k}\":\n            count += 1\n    return count\n"],
            lambda r: (sentence(r).lower(),), "int", consts=list("aeiost"),
            np=["how many times the character '{k}' occurs in {a}", "the number of '{k}' characters in {a}",
                "how many letters {k} the string has"],
            vp=["count the letter '{k}' in {a}", "count how often '{k}' appears in {a}"]),
    Concept("str", ["fizzbuzz", "fizz_buzz", "fizzbuzz_word"],
            ["    if {a} % 15 == 0:\n        return \"FizzBuzz\"\n    if {a} % 3 == 0:\n        return \"Fizz\"\n"
             "    if {a} % 5 == 0:\n        return \"Buzz\"\n    return str({a})\n",
             "    if {a} % 3 == 0 and {a} % 5 == 0:\n        return \"FizzBuzz\"\n    elif {a} % 3 == 0:\n"
             "        return \"Fizz\"\n    elif {a} % 5 == 0:\n        return \"Buzz\"\n    else:\n        return str({a})\n"],
            lambda r: (r.randint(1, 45),), "str", args=[["n", "x", "num", "number", "i"]],
            np=["\"Fizz\" for multiples of three, \"Buzz\" for multiples of five, \"FizzBuzz\" for multiples of both "
                "and {a} as a string otherwise", "the FizzBuzz word for {a}"]),
    Concept("str", ["balanced", "is_balanced", "parens_balanced", "check_parentheses", "valid_parentheses"],
            ["    depth = 0\n    for c in {a}:\n        if c == \"(\":\n            depth += 1\n        elif c == \")\":\n"
             "            depth -= 1\n            if depth < 0:\n                return False\n    return depth == 0\n"],
            lambda r: ("".join(r.choice("()") for _ in range(r.randint(0, 6))),), "bool",
            cond=["the parentheses in {a} are balanced", "every '(' in {a} has a matching ')' after it and no ')' is unmatched"]),
    Concept("str", ["run_length", "rle", "run_length_encode", "compress", "encode_runs"],
            ["    out = \"\"\n    i = 0\n    while i < len({a}):\n        j = i\n        while j < len({a}) and {a}[j] == {a}[i]:\n"
             "            j += 1\n        out += {a}[i] + str(j - i)\n        i = j\n    return out\n"],
            lambda r: ("".join(r.choice("aab") * r.randint(1, 3) for _ in range(r.randint(0, 3))),), "str",
            np=["the run-length encoding of {a}: each run of a repeated character becomes the character and the run's length",
                "{a} compressed so that 'aaab' becomes 'a3b1'"]),
    Concept("str", ["first_char", "initial", "first_letter", "get_first_char", "head_char"],
            ["    if not {a}:\n        return \"\"\n    return {a}[0]\n", "    return {a}[:1]\n"],
            lambda r: (r.choice([word(r), ""]),), "str",
            np=["the first character of {a}, or an empty string if {a} is empty", "the first letter of the string"]),
    Concept("str", ["last_char", "last_letter", "final_char", "get_last_char"],
            ["    if not {a}:\n        return \"\"\n    return {a}[-1]\n", "    return {a}[-1:]\n"],
            lambda r: (r.choice([word(r), ""]),), "str",
            np=["the last character of {a}, or an empty string if {a} is empty", "the final letter of the string"]),
    Concept("str count", ["first_n_chars", "prefix", "left", "take_chars", "truncate", "shorten"],
            ["    return {a}[:{b}]\n"], lambda r: (sentence(r), r.randint(0, 6)), "str",
            np=["the first {b} characters of {a}", "{a} cut down to {b} characters", "{a}[:{b}]"]),
    Concept("str count", ["last_n_chars", "suffix", "right", "tail_chars"],
            ["    if {b} == 0:\n        return \"\"\n    return {a}[-{b}:]\n"], lambda r: (sentence(r), r.randint(0, 6)), "str",
            np=["the last {b} characters of {a}", "the final {b} letters of the string"]),
    Concept("str", ["drop_first_char", "without_first_char", "chop_first"],
            ["    return {a}[1:]\n"], lambda r: (word(r),), "str",
            np=["{a} without its first character"]),
    Concept("str", ["drop_last_char", "without_last_char", "chop", "remove_last"],
            ["    return {a}[:-1]\n"], lambda r: (word(r),), "str",
            np=["{a} without its last character", "the string minus its final letter"]),
    Concept("str", ["every_other_char", "alternate_chars"],
            ["    return {a}[::2]\n"], lambda r: (word(r),), "str",
            np=["every other character of {a}, starting with the first"]),
    Concept("str", ["middle_char", "center_char"],
            ["    return {a}[len({a}) // 2]\n"], lambda r: (word(r),), "str",
            np=["the middle character of {a}", "the character at index len({a}) // 2"], notes=["{A} is not empty."]),
    Concept("str", ["is_palindrome", "palindrome", "is_pal", "check_palindrome", "reads_same_backwards"],
            ["    return {a} == {a}[::-1]\n",
             "    for i in range(len({a}) // 2):\n        if {a}[i] != {a}[-1 - i]:\n            return False\n    return True\n"],
            lambda r: (word(r).lower(),), "bool",
            cond=["{a} reads the same forwards and backwards", "{a} is a palindrome", "the string is a palindrome",
                  "{a} is equal to its reverse"]),
    Concept("str", ["is_palindrome_ignore_case", "palindrome_no_case"],
            ["    lowered = {a}.lower()\n    return lowered == lowered[::-1]\n"], lambda r: (word(r),), "bool",
            cond=["{a} is a palindrome when case is ignored"]),
    Concept("str", ["is_digits", "all_digits", "is_number", "is_numeric", "only_digits"],
            ["    return {a}.isdigit()\n"], lambda r: (r.choice([str(r.randint(0, 9999)), word(r), "12a", ""]),), "bool",
            cond=["{a} consists only of digits", "every character of {a} is a digit", "the string is a whole number"]),
    Concept("str", ["is_alpha", "all_letters", "only_letters"],
            ["    return {a}.isalpha()\n"], lambda r: (r.choice([word(r), "ab1", "a b", ""]),), "bool",
            cond=["{a} contains only letters", "every character of {a} is a letter"]),
    Concept("str", ["is_upper", "all_caps", "is_uppercase"],
            ["    return {a}.isupper()\n"], lambda r: (r.choice([word(r), word(r).upper()]),), "bool",
            cond=["all letters of {a} are upper case", "{a} is written in capitals"]),
    Concept("str", ["is_empty_string", "is_blank", "empty_text"],
            ["    return len({a}) == 0\n", "    return {a} == \"\"\n"], lambda r: (r.choice(["", word(r)]),), "bool",
            cond=["{a} is the empty string", "the string has no characters"]),
    Concept("str", ["has_vowel", "contains_vowel", "any_vowel"],
            ["    return any(c in \"aeiou\" for c in {a})\n"], lambda r: (r.choice([word(r), "sky", "xyz"]),), "bool",
            cond=["{a} contains at least one vowel", "some letter of {a} is a vowel"]),
    Concept("str", ["has_space", "contains_space"],
            ["    return \" \" in {a}\n"], lambda r: (sentence(r),), "bool",
            cond=["{a} contains a space", "there is a space in the string"]),
    Concept("str str", ["starts_with", "has_prefix", "begins_with", "startswith"],
            ["    return {a}.startswith({b})\n", "    return {a}[:len({b})] == {b}\n"],
            lambda r: (word(r), r.choice(["a", "c", "he", "py", "t", ""])), "bool",
            args=[None, ["prefix", "start", "p", "beginning"]],
            cond=["{a} starts with {b}", "{b} is a prefix of {a}", "{a} begins with {b}"]),
    Concept("str str", ["ends_with", "has_suffix", "endswith"],
            ["    return {a}.endswith({b})\n"], lambda r: (word(r), r.choice(["a", "e", "on", "og", "t", ""])), "bool",
            args=[None, ["suffix", "end", "ending", "tail"]],
            cond=["{a} ends with {b}", "{b} is a suffix of {a}"]),
    Concept("str str", ["contains_substring", "has_substring", "contains_text", "includes", "is_substring"],
            ["    return {b} in {a}\n", "    return {a}.find({b}) != -1\n"],
            lambda r: (sentence(r), r.choice(["an", "cat", "o", "xyz", "at"])), "bool",
            args=[None, ["sub", "part", "needle", "pattern", "substring"]],
            cond=["{b} occurs somewhere in {a}", "{a} contains {b}", "{b} is a substring of {a}"]),
    Concept("str str", ["count_substring", "count_occurrences_of", "substring_count"],
            ["    return {a}.count({b})\n"], lambda r: (sentence(r), r.choice(["an", "a", "o", "ee"])), "int",
            args=[None, ["sub", "part", "pattern", "substring"]],
            np=["how many times {b} occurs in {a}", "the number of non-overlapping occurrences of {b} in {a}"]),
    Concept("str str", ["concat_strings", "join_two", "combine_strings", "concatenate", "glue"],
            ["    return {a} + {b}\n"], lambda r: (word(r), word(r)), "str",
            np=["{a} followed by {b}", "the concatenation of {a} and {b}", "the two strings joined together"],
            vp=["concatenate {a} and {b}", "join two strings"]),
    Concept("str str", ["join_with_space", "combine_words", "two_words"],
            ["    return {a} + \" \" + {b}\n", "    return f\"{{{a}}} {{{b}}}\"\n"], lambda r: (word(r), word(r)), "str",
            np=["{a} and {b} joined by a single space"]),
    Concept("str str", ["same_ignoring_case", "equal_ignore_case", "equals_ignore_case", "match_case_insensitive"],
            ["    return {a}.lower() == {b}.lower()\n"], lambda r: (word(r), r.choice([word(r), word(r).upper()])), "bool",
            cond=["{a} and {b} are equal when case is ignored", "the two strings match regardless of case"]),
    Concept("str str", ["is_anagram", "anagrams", "are_anagrams"],
            ["    return sorted({a}) == sorted({b})\n"],
            lambda r: (lambda w: (w, r.choice([w[::-1], word(r)])))(word(r).lower()), "bool",
            cond=["{a} and {b} are anagrams of each other", "{a} is made of the same letters as {b}"]),
    Concept("str str", ["longer_string", "longest_of_two", "pick_longer"],
            ["    if len({b}) > len({a}):\n        return {b}\n    return {a}\n"], lambda r: (word(r), word(r)), "str",
            np=["the longer of {a} and {b} (the first one if they are the same length)"]),
    Concept("str", ["remove_spaces", "strip_spaces", "no_spaces", "delete_spaces", "squash"],
            ["    return {a}.replace(\" \", \"\")\n", "    return \"\".join(c for c in {a} if c != \" \")\n"],
            lambda r: (sentence(r),), "str",
            np=["{a} with all spaces removed", "the string without any spaces"], vp=["delete every space from {a}"]),
    Concept("str", ["strip", "trim", "strip_whitespace", "clean", "trim_spaces"],
            ["    return {a}.strip()\n"], lambda r: (r.choice(["", " ", "  "]) + sentence(r) + r.choice(["", " ", "   "]),), "str",
            np=["{a} without leading and trailing whitespace", "the string with the spaces at both ends removed"],
            vp=["trim the whitespace around {a}", "strip spaces from both ends of the string"]),
    Concept("str", ["remove_vowels", "no_vowels", "strip_vowels", "disemvowel"],
            ["    return \"\".join(c for c in {a} if c not in \"aeiou\")\n",
             "    result = \"\"\n    for c in {a}:\n        if c not in \"aeiou\":\n            result += c\n    return result\n"],
            lambda r: (sentence(r).lower(),), "str",
            np=["{a} with the vowels (a, e, i, o, u) removed", "the string without its vowels"],
            vp=["remove every vowel from {a}", "delete the vowels in the text"]),
    Concept("str", ["only_digits", "digits_only", "extract_digits", "keep_digits"],
            ["    return \"\".join(c for c in {a} if c.isdigit())\n"], lambda r: (text(r),), "str",
            np=["the digit characters of {a}, in order", "{a} with everything but the digits removed"]),
    Concept("str", ["only_letters_of", "letters_only", "keep_letters"],
            ["    return \"\".join(c for c in {a} if c.isalpha())\n"], lambda r: (text(r),), "str",
            np=["the letters of {a}, in order, without digits, spaces or punctuation"]),
    Concept("str char", ["remove_char", "delete_char", "strip_char", "without_char"],
            ["    return {a}.replace({b}, \"\")\n"], lambda r: (sentence(r), char(r)), "str",
            np=["{a} with every {b} removed"], vp=["remove all occurrences of the character {b} from {a}"]),
    Concept("str", ["replace_spaces", "spaces_to_underscores", "snake", "underscore"],
            ["    return {a}.replace(\" \", \"_\")\n"], lambda r: (sentence(r),), "str",
            np=["{a} with every space replaced by an underscore"], vp=["replace the spaces in {a} with underscores"]),
    Concept("str", ["split_words", "words", "to_words", "tokenize", "get_words", "word_list"],
            ["    return {a}.split()\n"], lambda r: (sentence(r),), "strs",
            np=["a list of the words in {a}", "the words of the text as a list"], vp=["split {a} into words"]),
    Concept("str", ["first_word", "get_first_word", "head_word"],
            ["    words = {a}.split()\n    if not words:\n        return \"\"\n    return words[0]\n",
             "    parts = {a}.split()\n    return parts[0] if parts else \"\"\n"],
            lambda r: (r.choice([sentence(r), ""]),), "str",
            np=["the first word of {a}, or an empty string if there are no words", "the first word in the sentence"]),
    Concept("str", ["last_word", "get_last_word", "final_word"],
            ["    words = {a}.split()\n    if not words:\n        return \"\"\n    return words[-1]\n"],
            lambda r: (r.choice([sentence(r), ""]),), "str",
            np=["the last word of {a}, or an empty string if there are no words", "the final word in the sentence"]),
    Concept("str", ["reverse_words", "words_backwards", "reverse_word_order"],
            ["    return \" \".join({a}.split()[::-1])\n", "    return \" \".join(reversed({a}.split()))\n"],
            lambda r: (sentence(r),), "str",
            np=["the words of {a} in reverse order, separated by single spaces"], vp=["reverse the order of the words in {a}"]),
    Concept("str", ["longest_word_in", "longest_word", "biggest_word"],
            ["    best = \"\"\n    for w in {a}.split():\n        if len(w) > len(best):\n            best = w\n    return best\n"],
            lambda r: (sentence(r),), "str",
            np=["the longest word in {a} (the first one on ties)", "the longest word of the sentence"]),
    Concept("str", ["initials", "acronym", "first_letters", "abbreviate"],
            ["    return \"\".join(w[0].upper() for w in {a}.split())\n"], lambda r: (sentence(r),), "str",
            np=["the first letter of every word of {a}, in upper case, joined together", "the acronym of {a}"]),
    Concept("str", ["greet", "greeting", "say_hello", "hello", "make_greeting"],
            ["    return \"Hello, \" + {a} + \"!\"\n", "    return f\"Hello, {{{a}}}!\"\n"],
            lambda r: (word(r).capitalize(),), "str", args=[["name", "person", "who", "user"]],
            np=["a greeting of the form \"Hello, <name>!\" for {a}", "the string 'Hello, ' followed by {a} and '!'"],
            vp=["greet {a} with \"Hello, <name>!\""]),
    Concept("str", ["exclaim", "add_exclamation", "shout_it"],
            ["    return {a} + \"!\"\n"], lambda r: (word(r),), "str",
            np=["{a} with an exclamation mark added at the end"], vp=["add '!' to the end of {a}"]),
    Concept("str", ["double_chars", "double_letters", "stutter"],
            ["    return \"\".join(c * 2 for c in {a})\n", "    result = \"\"\n    for c in {a}:\n        result += c + c\n    return result\n"],
            lambda r: (word(r),), "str",
            np=["{a} with every character repeated twice"], vp=["double every character of {a}"]),
    Concept("str count", ["repeat", "repeat_string", "repeat_text", "times", "echo"],
            ["    return {a} * {b}\n",
             "    result = \"\"\n    for _ in range({b}):\n        result += {a}\n    return result\n"],
            lambda r: (word(r), r.randint(0, 3)), "str",
            np=["{a} repeated {b} times", "{b} copies of {a} joined together"], vp=["concatenate {b} copies of {a}"]),
    Concept("str", ["char_frequency", "letter_counts", "count_chars_dict", "char_histogram", "character_counts"],
            ["    counts = {{}}\n    for c in {a}:\n        counts[c] = counts.get(c, 0) + 1\n    return counts\n",
             "    result = {{}}\n    for ch in {a}:\n        if ch in result:\n            result[ch] += 1\n        else:\n            result[ch] = 1\n    return result\n"],
            lambda r: (word(r),), "dict",
            np=["a dictionary counting how many times each character occurs in {a}",
                "a dict mapping each character of {a} to its count"],
            vp=["count every character of {a} in a dictionary"]),
    Concept("str", ["word_frequency", "count_each_word", "word_counts", "word_histogram"],
            ["    counts = {{}}\n    for w in {a}.split():\n        counts[w] = counts.get(w, 0) + 1\n    return counts\n"],
            lambda r: (sentence(r, 1, 6),), "dict",
            np=["a dictionary mapping each word of {a} to how often it appears", "the number of times each word occurs"],
            vp=["count the words of {a} in a dictionary"]),
    Concept("str", ["unique_chars", "distinct_letters", "sorted_unique_chars"],
            ["    return sorted(set({a}))\n"], lambda r: (word(r),), "strs",
            np=["a sorted list of the distinct characters of {a}"]),
    Concept("str", ["has_unique_chars", "all_chars_unique", "no_repeated_chars"],
            ["    return len(set({a})) == len({a})\n"], lambda r: (word(r),), "bool",
            cond=["no character appears twice in {a}", "all characters of {a} are different"]),
    Concept("str", ["to_int", "parse_int", "string_to_int", "str_to_int"],
            ["    return int({a})\n"], lambda r: (str(r.randint(-99, 999)),), "int",
            np=["the integer that {a} represents", "{a} converted to an int"], vp=["convert the string {a} to an integer"]),
    Concept("str", ["char_codes", "to_ascii", "ord_list"],
            ["    return [ord(c) for c in {a}]\n"], lambda r: (r.choice(WORDS)[:3],), "ints",
            np=["a list of the character codes of {a}"]),
    Concept("str", ["wrap_in_brackets", "bracket", "parenthesize"],
            ["    return \"(\" + {a} + \")\"\n", "    return f\"({{{a}}})\"\n"], lambda r: (word(r),), "str",
            np=["{a} surrounded by parentheses"]),
    # --- lists of strings -----------------------------------------------------------------------
    Concept("strs", ["join_words", "concat_words", "join", "make_sentence", "join_with_spaces"],
            ["    return \" \".join({a})\n"], lambda r: (words(r),), "str",
            np=["the words in {a} joined by single spaces", "one string made of the words separated by spaces"],
            vp=["join {a} with spaces"]),
    Concept("strs", ["join_with_commas", "comma_separated", "to_csv_line"],
            ["    return \", \".join({a})\n"], lambda r: (words(r),), "str",
            np=["the strings in {a} joined by a comma and a space", "the words separated by \", \""]),
    Concept("strs", ["concat_all", "join_all", "glue_all"],
            ["    return \"\".join({a})\n",
             "    result = \"\"\n    for s in {a}:\n        result += s\n    return result\n"],
            lambda r: (words(r),), "str", np=["all the strings of {a} joined together with nothing between them"]),
    Concept("strs", ["longest", "longest_string", "longest_word", "find_longest", "max_length_word"],
            ["    best = {a}[0]\n    for w in {a}:\n        if len(w) > len(best):\n            best = w\n    return best\n",
             "    return max({a}, key=len)\n"],
            lambda r: (words(r, 1, 5),), "str",
            np=["the longest string in {a}; the first one on ties", "the longest word in the list"],
            vp=["find the longest word in {a}"], notes=["{A} is not empty."]),
    Concept("strs", ["shortest", "shortest_string", "shortest_word", "find_shortest"],
            ["    return min({a}, key=len)\n",
             "    best = {a}[0]\n    for w in {a}:\n        if len(w) < len(best):\n            best = w\n    return best\n"],
            lambda r: (words(r, 1, 5),), "str",
            np=["the shortest string in {a}; the first one on ties", "the shortest word in the list"],
            notes=["{A} is not empty."]),
    Concept("strs", ["lengths", "word_lengths", "string_lengths", "len_each", "sizes"],
            ["    return [len(w) for w in {a}]\n",
             "    result = []\n    for w in {a}:\n        result.append(len(w))\n    return result\n"],
            lambda r: (words(r),), "ints",
            np=["a list of the lengths of the strings in {a}", "the length of each word"], vp=["map each string in {a} to its length"]),
    Concept("strs", ["total_length", "total_chars", "sum_of_lengths"],
            ["    return sum(len(w) for w in {a})\n",
             "    total = 0\n    for w in {a}:\n        total += len(w)\n    return total\n"],
            lambda r: (words(r),), "int",
            np=["the total number of characters of the strings in {a}", "the sum of the lengths of the words"]),
    Concept("strs", ["upper_all", "shout_all", "uppercase_words", "capitalize_list"],
            ["    return [w.upper() for w in {a}]\n"], lambda r: (words(r),), "strs",
            np=["a list of the strings of {a} in upper case", "every word converted to capitals"]),
    Concept("strs", ["lower_all", "lowercase_words"], ["    return [w.lower() for w in {a}]\n"],
            lambda r: (words(r),), "strs", np=["a list of the strings of {a} in lower case"]),
    Concept("strs", ["sort_words", "sorted_words", "alphabetical", "sort_alphabetically", "sort_strings"],
            ["    return sorted({a})\n"], lambda r: ([w.lower() for w in words(r)],), "strs",
            np=["the strings of {a} in alphabetical order", "a sorted copy of the words"], vp=["sort {a} alphabetically"]),
    Concept("strs", ["sort_by_length", "by_length", "shortest_first"],
            ["    return sorted({a}, key=len)\n"], lambda r: (words(r),), "strs",
            np=["the strings of {a} sorted by length, shortest first (ties keep their order)"]),
    Concept("strs", ["first_letters_of", "initials_of", "heads"],
            ["    return [w[0] for w in {a}]\n"], lambda r: (words(r),), "strs",
            np=["a list of the first letter of each word in {a}"], notes=["No string in {a} is empty."]),
    Concept("strs thr", ["long_words", "words_longer_than", "filter_long", "longer_than"],
            ["    return [w for w in {a} if len(w) > {b}]\n"], lambda r: (words(r), r.randint(2, 5)), "strs",
            args=[None, ["n", "k", "length", "min_len", "size"]],
            np=["the strings of {a} that are longer than {b} characters"]),
    Concept("strs str", ["starting_with", "filter_prefix", "words_starting_with"],
            ["    return [w for w in {a} if w.startswith({b})]\n"], lambda r: (words(r), r.choice(["a", "b", "c", "s", "t"])), "strs",
            args=[None, ["prefix", "letter", "start", "p"]],
            np=["the strings of {a} that start with {b}"]),
    Concept("strs", ["count_strings", "num_words_in_list", "how_many_words_in_list"],
            ["    return len({a})\n"], lambda r: (words(r),), "int",
            np=["how many strings {a} holds", "the number of words in the list"]),
    Concept("strs", ["non_empty", "drop_empty", "remove_empty", "filter_empty"],
            ["    return [w for w in {a} if w]\n", "    return [w for w in {a} if w != \"\"]\n"],
            lambda r: ([r.choice([word(r), ""]) for _ in range(r.randint(0, 5))],), "strs",
            np=["the strings of {a} that are not empty"], vp=["remove the empty strings from {a}"]),
    Concept("strs", ["palindromes", "filter_palindromes"],
            ["    return [w for w in {a} if w == w[::-1]]\n"], lambda r: ([w.lower() for w in words(r)],), "strs",
            np=["the words of {a} that are palindromes"]),
    Concept("strs", ["number_lines", "enumerate_words", "numbered"],
            ["    return [f\"{{i}}. {{w}}\" for i, w in enumerate({a}, 1)]\n",
             "    return [str(i + 1) + \". \" + w for i, w in enumerate({a})]\n"], lambda r: (words(r, 0, 3),), "strs",
            np=["each string of {a} prefixed with its position, counting from 1, like \"1. apple\""]),
    Concept("strs", ["word_to_length", "length_map", "lengths_dict"],
            ["    return {{w: len(w) for w in {a}}}\n",
             "    result = {{}}\n    for w in {a}:\n        result[w] = len(w)\n    return result\n"],
            lambda r: (words(r),), "dict",
            np=["a dictionary mapping each string of {a} to its length"]),
    Concept("strs", ["count_items", "tally", "frequencies", "histogram"],
            ["    counts = {{}}\n    for w in {a}:\n        counts[w] = counts.get(w, 0) + 1\n    return counts\n"],
            lambda r: ([r.choice(WORDS[:4]) for _ in range(r.randint(0, 6))],), "dict",
            np=["a dictionary counting how many times each string appears in {a}"], vp=["count each item of {a}"]),
    Concept("strs strs", ["zip_to_dict", "make_dict", "pair_up", "to_dict", "build_dict"],
            ["    return dict(zip({a}, {b}))\n",
             "    result = {{}}\n    for k, v in zip({a}, {b}):\n        result[k] = v\n    return result\n"],
            lambda r: (lambda ks: (ks, [r.randint(0, 9) for _ in ks]))(sorted({word(r).lower() for _ in range(r.randint(0, 4))})), "dict",
            np=["a dictionary that maps each element of {a} to the element of {b} at the same position"],
            notes=["The two lists have the same length."]),
    # --- dictionaries --------------------------------------------------------------------------
    Concept("dict key", ["get_or_zero", "lookup", "get_value", "value_of", "safe_get", "fetch"],
            ["    return {a}.get({b}, 0)\n",
             "    if {b} in {a}:\n        return {a}[{b}]\n    return 0\n"],
            lambda r: (counts(r), word(r).lower()), "int",
            np=["the value of {b} in {a}, or 0 if {b} is missing", "the value stored under {b}, or 0 when it is absent"],
            vp=["look up {b} in {a}; return 0 when it is absent"]),
    Concept("dict key", ["get_or_minus_one", "lookup_or_negative", "value_or_minus_one"],
            ["    return {a}.get({b}, -1)\n", "    if {b} in {a}:\n        return {a}[{b}]\n    return -1\n"],
            lambda r: (counts(r), word(r).lower()), "int",
            np=["the value of {b} in {a}, or -1 if {b} is missing", "the value stored under {b}, or -1 when there is none"]),
    Concept("dict key thr", ["get_or_default", "get_with_default", "lookup_default"],
            ["    return {a}.get({b}, {c})\n", "    if {b} in {a}:\n        return {a}[{b}]\n    return {c}\n"],
            lambda r: (counts(r), word(r).lower(), r.randint(-1, 5)), "int",
            args=[None, ["key", "k", "name"], ["default", "fallback", "otherwise"]],
            np=["the value of {b} in {a}, or {c} when {b} is missing"]),
    Concept("dict key", ["get_or_none", "find_value", "lookup_or_none"],
            ["    return {a}.get({b})\n", "    if {b} in {a}:\n        return {a}[{b}]\n    return None\n"],
            lambda r: (counts(r), word(r).lower()), "any",
            np=["the value of {b} in {a}, or None if {b} is not a key"]),
    Concept("dict key", ["has_key", "contains_key", "key_exists", "in_dict", "is_key"],
            ["    return {b} in {a}\n"], lambda r: (counts(r), word(r).lower()), "bool",
            cond=["{b} is a key of {a}", "{a} contains the key {b}", "the key {b} exists in the dictionary"]),
    Concept("dict", ["sorted_keys", "keys_in_order", "get_keys", "key_list", "keys_sorted"],
            ["    return sorted({a})\n", "    return sorted({a}.keys())\n"], lambda r: (counts(r),), "strs",
            np=["the keys of {a} in sorted order", "a sorted list of the keys of {a}", "the keys of the dictionary, sorted"]),
    Concept("dict", ["sorted_values", "values_sorted", "value_list"],
            ["    return sorted({a}.values())\n"], lambda r: (counts(r),), "ints",
            np=["the values of {a} in sorted order", "a sorted list of the values of the dictionary"]),
    Concept("dict", ["sum_values", "total_value", "values_total", "sum_of_values", "total"],
            ["    return sum({a}.values())\n",
             "    total = 0\n    for v in {a}.values():\n        total += v\n    return total\n",
             "    total = 0\n    for k in {a}:\n        total += {a}[k]\n    return total\n"],
            lambda r: (counts(r),), "int",
            np=["the sum of the values in {a}", "the total of all values of the dictionary"], vp=["add up all values of {a}"]),
    Concept("dict", ["count_keys", "num_keys", "dict_size", "size_of"],
            ["    return len({a})\n"], lambda r: (counts(r),), "int",
            np=["the number of keys in {a}", "how many entries the dictionary has"]),
    Concept("dict", ["max_key", "key_of_max", "best", "top", "most_common"],
            ["    return max({a}, key={a}.get)\n",
             "    best = None\n    for k in {a}:\n        if best is None or {a}[k] > {a}[best]:\n            best = k\n    return best\n"],
            lambda r: ({w: i for i, w in enumerate(r.sample(WORDS, r.randint(1, 4)))},), "str",
            np=["the key of {a} with the largest value", "the key whose value is highest"], notes=["{A} is not empty."]),
    Concept("dict", ["max_value", "largest_value", "highest_value"],
            ["    return max({a}.values())\n"], lambda r: (counts(r, 1, 4),), "int",
            np=["the largest value in {a}"], notes=["{A} is not empty."]),
    Concept("dict", ["invert", "invert_dict", "swap_keys_values", "reverse_dict", "flip_dict"],
            ["    return {{v: k for k, v in {a}.items()}}\n",
             "    result = {{}}\n    for k, v in {a}.items():\n        result[v] = k\n    return result\n"],
            lambda r: ({w: i for i, w in enumerate(sorted({word(r).lower() for _ in range(3)}))},), "dict",
            np=["a dictionary mapping each value of {a} to its key"], vp=["swap the keys and values of {a}"]),
    Concept("dict thr", ["filter_by_value", "keys_above", "entries_above", "over_threshold"],
            ["    return {{k: v for k, v in {a}.items() if v > {b}}}\n"], lambda r: (counts(r), r.randint(0, 8)), "dict",
            np=["the entries of {a} whose value is greater than {b}", "a new dictionary with only the items above {b}"]),
    Concept("dict thr", ["keys_with_value", "keys_for", "find_keys"],
            ["    return sorted(k for k, v in {a}.items() if v == {b})\n"], lambda r: (counts(r), r.randint(0, 3)), "strs",
            np=["a sorted list of the keys of {a} whose value is {b}"]),
    Concept("dict dict", ["merge", "merge_dicts", "combine_dicts", "update_dict", "join_dicts"],
            ["    result = dict({a})\n    result.update({b})\n    return result\n",
             "    return {{**{a}, **{b}}}\n"],
            lambda r: (counts(r, 0, 3), counts(r, 0, 3)), "dict",
            np=["a new dictionary with the entries of {a} and {b}; {b} wins on shared keys", "{a} and {b} merged"],
            vp=["merge two dictionaries"]),
    Concept("dict key", ["increment_key", "add_one_to_key", "bump", "increment_count"],
            ["    {a}[{b}] = {a}.get({b}, 0) + 1\n    return {a}\n",
             "    if {b} in {a}:\n        {a}[{b}] += 1\n    else:\n        {a}[{b}] = 1\n    return {a}\n"],
            lambda r: (counts(r), word(r).lower()), "dict",
            np=["{a} after adding one to the count of {b} (starting from 0 when it is missing)"]),
    Concept("dict", ["double_values_of", "double_dict", "scale_values"],
            ["    return {{k: v * 2 for k, v in {a}.items()}}\n"], lambda r: (counts(r),), "dict",
            np=["a dictionary with the same keys as {a} and every value doubled"]),
    Concept("dict", ["items_sorted", "sorted_items", "pairs_sorted"],
            ["    return sorted({a}.items())\n"], lambda r: (counts(r),), "any",
            np=["the (key, value) pairs of {a} sorted by key"]),
    Concept("dict", ["is_empty_dict", "no_entries"],
            ["    return len({a}) == 0\n", "    return not {a}\n"], lambda r: (counts(r, 0, 2),), "bool",
            cond=["{a} has no entries", "the dictionary is empty"]),
]


# ---------------------------------------------------------------------------------------------
# Rendering


def cap(s, names=()):
    """Upper-cases the first letter, unless the text starts with an argument's name."""
    first = re.match(r"`?([A-Za-z_][A-Za-z0-9_]*)", s)
    if first and first.group(1) in names:
        return s
    return s[:1].upper() + s[1:]


def third_person(verb_phrase):
    """'add one to x' -> 'adds one to x'; 'multiply x by 2' -> 'multiplies x by 2'."""
    head, _, rest = verb_phrase.partition(" ")
    if head.endswith(("s", "sh", "ch", "x", "z")):
        head += "es"
    elif head.endswith("y") and head[-2:-1] not in "aeiou":
        head = head[:-1] + "ies"
    else:
        head += "s"
    return head + (" " + rest if rest else "")


NP_FRAMES = [(8, "Return {p}."), (3, "Returns {p}."), (1, "Return {p}"), (1, "return {p}"),
             (2, "Compute {p}."), (1, "Computes {p}."), (1, "Calculate {p}."), (1, "Get {p}."),
             (1, "Find {p}."), (2, "{P}."), (1, "This function returns {p}."), (1, "Function that returns {p}."),
             (1, "Write a function that returns {p}."), (1, "Return {p} as the result."),
             (1, "Compute and return {p}."), (1, "Gives back {p}."), (1, "The function should return {p}.")]
VP_FRAMES = [(6, "{V}."), (1, "{V}"), (1, "{v}"), (3, "{V3}."), (2, "{V} and return the result."),
             (1, "Write a function to {v}."), (1, "This function should {v}."), (1, "A function that will {v}."),
             (1, "Function to {v}."), (1, "{V}, then return it."), (1, "Please {v}.")]
COND_FRAMES = [(5, "Return True if {c}, otherwise False."), (3, "Return True if {c}, else False."),
               (3, "Return True if {c}."), (2, "Returns True if {c}."), (3, "Check if {c}."),
               (3, "Check whether {c}."), (1, "Checks if {c}."), (2, "Return whether {c}."),
               (1, "Determine whether {c}."), (1, "True if {c}, False otherwise."),
               (1, "Return True when {c} and False otherwise."), (1, "Tell whether {c}."), (1, "Test if {c}."),
               (1, "Returns a bool that says whether {c}."), (1, "check if {c}"),
               (1, "Write a function that checks whether {c}."), (1, "Return True if {c}; return False otherwise.")]


def weighted(rng, table):
    total = sum(w for w, _ in table)
    pick = rng.uniform(0, total)
    for w, item in table:
        pick -= w
        if pick <= 0:
            return item
    return table[-1][1]


def identifiers(body):
    """The names a body template uses besides its slots: arguments must not shadow them."""
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", re.sub(r"\{+[a-z]*\}+", " ", body)))


def choose_args(rng, concept, body=""):
    """Argument names, one per kind, distinct, none of them a name the body uses."""
    taken = identifiers(body)
    kinds = concept.kinds
    if concept.args and len(concept.args) > len(kinds):
        kinds = kinds + [kinds[-1]] * (len(concept.args) - len(kinds))
    names = []
    pairs = [p for p in PAIRS.get(kinds[0], []) if not taken & set(p)]
    if len(kinds) >= 2 and kinds[0] == kinds[1] and pairs and not concept.args:
        names = list(rng.choice(pairs))
        rest = kinds[2:]
    else:
        rest = kinds
    for i, kind in enumerate(rest, start=len(names)):
        pool = concept.args[i] if concept.args and i < len(concept.args) and concept.args[i] else KINDS[kind]["names"]
        options = [n for n in pool if n not in names and n not in taken]
        names.append(rng.choice(options))
    return names, kinds


def references(rng, concept, names, kinds):
    """How the docstring refers to each argument: by name (plain or quoted) or by a description."""
    mode = rng.choices(["name", "quoted", "desc"], weights=[6, 1, 3])[0]
    same_kind = len(set(kinds)) < len(kinds)
    refs = []
    for i, (name, kind) in enumerate(zip(names, kinds)):
        if mode == "quoted":
            refs.append(f"`{name}`")
        elif mode == "desc" and not same_kind and len(kinds) <= 2:
            refs.append(rng.choice(KINDS[kind]["refs"]))
        elif mode == "desc" and same_kind and kind in PAIR_REFS and len(kinds) == 2:
            refs.append(PAIR_REFS[kind][i])
        else:
            refs.append(name)
    return refs


def const_word(rng, k):
    if k is None:
        return ""
    if not isinstance(k, int):
        return str(k)
    return NUMBER_WORDS[k] if k in NUMBER_WORDS and rng.random() < 0.5 else str(k)


def fill(template, slots):
    return template.format(**slots)


def summary(rng, concept, slots):
    """The one sentence that says what the function does."""
    forms = [("np", p) for p in concept.np] + [("vp", p) for p in concept.vp] + [("cond", p) for p in concept.cond]
    form, phrase = rng.choice(forms)
    phrase = fill(phrase, slots)
    if form == "np":
        frame = weighted(rng, NP_FRAMES)
        line = frame.format(p=phrase, P=cap(phrase, slots["_names"]))
        if slots["_given"] and rng.random() < 0.2 and frame.startswith("Return "):
            line = f"Given {slots['_given']}, r" + line[1:]
    elif form == "vp":
        line = weighted(rng, VP_FRAMES).format(v=phrase, V=cap(phrase), V3=cap(third_person(phrase)))
    else:
        line = weighted(rng, COND_FRAMES).format(c=phrase)
    if rng.random() < 0.06:
        line = line[:1].lower() + line[1:].rstrip(".")
    return line


def example_lines(rng, name, concept, fn, slots):
    """Two or three (call, result) pairs, computed by running the body."""
    pairs = []
    for _ in range(rng.randint(1, 3)):
        case = concept.inputs(rng)
        result = fn(*[list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v for v in case])
        call = f"{name}({', '.join(repr(v) for v in case)})"
        if (call, repr(result)) not in pairs:
            pairs.append((call, repr(result)))
    return pairs


def render_hint(rng, kind, use_typing):
    hints = KINDS[kind]["hints"] if kind in KINDS else RETURN_HINTS[kind]
    choices = [h for h in hints if h and (use_typing or not h[:1].isupper() or h == "None")]
    if use_typing:
        choices = [h for h in hints if h and h[:1].isupper()] or choices
    return rng.choice(choices) if choices else None


def param_lines(rng, style, names, kinds, concept, slots):
    abouts = [rng.choice(KINDS[k]["about"]) for k in kinds]
    returns = rng.choice(RETURN_ABOUT[concept.returns])
    outcome = fill(rng.choice(concept.np), slots) if concept.np else (
        "True if " + fill(rng.choice(concept.cond), slots) + ", otherwise False" if concept.cond else returns)
    if style == "google":
        lines = ["Args:"] + [f"    {n}: {cap(a)}." for n, a in zip(names, abouts)] + [""]
        lines += ["Returns:", f"    {cap(outcome, names)}."]
    elif style == "numpy":
        lines = ["Parameters", "----------"]
        for n, k, a in zip(names, kinds, abouts):
            lines += [f"{n} : {KINDS[k]['hints'][0]}", f"    {cap(a)}."]
        lines += ["", "Returns", "-------", rng.choice(RETURN_HINTS[concept.returns]) or "object", f"    {cap(outcome, names)}."]
    else:  # rest
        lines = [f":param {n}: {a}" for n, a in zip(names, abouts)]
        if rng.random() < 0.4:
            lines += [f":type {n}: {KINDS[k]['hints'][0]}" for n, k in zip(names, kinds)]
        lines += [f":return: {outcome}"]
        if rng.random() < 0.4 and RETURN_HINTS[concept.returns][0]:
            lines += [f":rtype: {RETURN_HINTS[concept.returns][0]}"]
    return lines


def examples_block(rng, pairs, style):
    kind = rng.choices(["doctest", "arrow", "inline", "numpy"], weights=[6, 2, 2, 1 if style == "numpy" else 0])[0]
    if kind == "doctest":
        return [l for call, out in pairs for l in (f">>> {call}", out)]
    if kind == "numpy":
        return ["Examples", "--------"] + [l for call, out in pairs for l in (f">>> {call}", out)]
    if kind == "arrow":
        head = rng.choice(["Example:", "Examples:", "For example:", "e.g."])
        arrow = rng.choice(["->", "=>", "==", "returns"])
        return [head] + [f"    {call} {arrow} {out}" for call, out in pairs]
    call, out = pairs[0]
    return [rng.choice([f"For example, {call} returns {out}.", f"e.g. {call} == {out}",
                        f"{call} should return {out}.", f"Example: {call} gives {out}."])]


def docstring(rng, concept, name, names, kinds, slots, fn):
    """The docstring's lines (without quotes or indentation), or None for a comment-only prompt."""
    layout = rng.choices(["one", "sentences", "google", "numpy", "rest"], weights=[10, 5, 2, 1, 1])[0]
    lines = [summary(rng, concept, slots)]
    extra = []
    if layout != "one" and rng.random() < 0.6 and concept.notes:
        extra.append(fill(rng.choice(concept.notes), slots))
    if layout == "sentences" and rng.random() < 0.5:
        n, k = rng.choice(list(zip(names, kinds)))
        extra.append(rng.choice([f"{n} is {rng.choice(KINDS[k]['about'])}.",
                                 f"The argument {n} is {rng.choice(KINDS[k]['about'])}.",
                                 f"You are given {rng.choice(KINDS[k]['about'])}."]))
    if layout == "sentences" and not extra:
        extra.append(rng.choice(["Keep it simple.", "Do not print anything.", "The input is not modified.",
                                 "Use plain Python.", "Return the answer."]))
    if extra:
        if rng.random() < 0.5:
            lines[0] = lines[0] + " " + " ".join(extra)
        else:
            lines += [""] + extra
    if layout in ("google", "numpy", "rest"):
        lines += [""] + param_lines(rng, layout, names, kinds, concept, slots)
    with_examples = rng.random() < (0.35 if layout == "one" else 0.45)
    if with_examples:
        pairs = example_lines(rng, name, concept, fn, slots)
        block = examples_block(rng, pairs, layout)
        if layout == "one" and block[0].startswith(">>>") and rng.random() < 0.5:
            lines += block  # HumanEval's own habit: examples right under the summary
        else:
            lines += [""] + block
    return lines


def render_docstring(rng, lines):
    quote = '"""' if rng.random() < 0.93 else "'''"
    if lines[-1].endswith(quote[0]):  # a closing quote right after a quote character would not parse
        quote = "'''" if quote == '"""' else '"""'
    pad = "    "
    if len(lines) == 1 and rng.random() < 0.85:
        return f"{pad}{quote}{lines[0]}{quote}\n"
    out = []
    if rng.random() < 0.15:
        out.append(f"{pad}{quote}")
        out += [f"{pad}{l}" if l else "" for l in lines]
    else:
        out.append(f"{pad}{quote}{lines[0]}")
        out += [f"{pad}{l}" if l else "" for l in lines[1:]]
    out.append(f"{pad}{quote}")
    return "\n".join(out) + "\n"


def function_name(rng, concept, slots):
    name = fill(rng.choice(concept.names), slots)
    roll = rng.random()
    if roll < 0.07:
        name = rng.choice(["f", "func", "solve", "solution", "my_function", "compute", "answer", "fn", "task"])
    elif roll < 0.17 and not name.startswith(("get_", "is_", "has_", "compute_", "find_", "count_")):
        name = rng.choice(["get_", "compute_", "calc_", "find_", "my_", "make_"]) + name
    if rng.random() < 0.06:
        head, *rest = name.split("_")
        name = head + "".join(p.capitalize() for p in rest)
    return name


def make_task(rng, concept=None):
    """Returns (prompt, body, entry_point) of one random task."""
    concept = concept or rng.choice(CONCEPTS)
    k = rng.choice(concept.consts) if concept.consts else None
    template = rng.choice(concept.bodies)
    names, kinds = choose_args(rng, concept, template)
    name = function_name(rng, concept, {"k": k, "kw": str(k) if k is not None else ""})
    refs = references(rng, concept, names, kinds)
    slots = {"k": k, "kw": const_word(rng, k), "a": refs[0], "b": refs[1] if len(refs) > 1 else "",
             "c": refs[2] if len(refs) > 2 else "", "A": cap(refs[0], names), "name": name, "_names": names,
             "_given": (f"{rng.choice(KINDS[kinds[0]]['about'])} {names[0]}" if len(names) == 1 else "")}
    code_slots = {"k": k, "a": names[0], "b": names[1] if len(names) > 1 else "",
                  "c": names[2] if len(names) > 2 else "", "name": name}
    code = fill(template, code_slots)

    use_hints = rng.random() < 0.3
    use_typing = use_hints and rng.random() < 0.3
    params = []
    for n, kind in zip(names, kinds):
        hint = render_hint(rng, kind, use_typing) if use_hints else None
        params.append(f"{n}: {hint}" if hint else n)
    returns = render_hint(rng, concept.returns, use_typing) if use_hints and rng.random() < 0.8 else None
    signature = f"def {name}({', '.join(params)})" + (f" -> {returns}" if returns else "") + ":\n"
    header = ""
    if "List[" in signature or "Dict[" in signature:
        used = [t for t in ("Dict", "List") if f"{t}[" in signature]
        header = f"from typing import {', '.join(used)}\n\n\n"

    namespace = {}
    exec(header + signature + code, namespace)
    fn = namespace[name]
    if rng.random() < 0.05:
        comment = summary(rng, concept, slots)
        prompt = header + signature + f"    # {comment}\n"
    else:
        prompt = header + signature + render_docstring(rng, docstring(rng, concept, name, names, kinds, slots, fn))
    return prompt, code, name


def generate(seed, count):
    rng = random.Random(seed)
    return [make_task(rng) for _ in range(count)]


# ---------------------------------------------------------------------------------------------
# Checks


def check_concepts(trials=40):
    """Every concept: its bodies agree with each other on random inputs and never raise, its phrases
    use only known slots, and its rendered tasks parse and run their own examples. Raises on failure."""
    rng = random.Random(0)
    for concept in CONCEPTS:
        assert concept.np or concept.vp or concept.cond, concept
        assert (concept.returns == "bool") == bool(concept.cond), f"{concept}: conditions iff bool"
        uses_constant = any(re.search(r"(?<!\{)\{kw?\}", t) for t in concept.names + concept.bodies + concept.np + concept.vp + concept.cond)
        assert uses_constant == bool(concept.consts), f"{concept}: a constant is used iff one is drawn"
        for trial in range(trials):
            k = rng.choice(concept.consts) if concept.consts else None
            names, _ = choose_args(rng, concept, "".join(concept.bodies))
            slots = {"k": k, "a": names[0], "b": names[1] if len(names) > 1 else "",
                     "c": names[2] if len(names) > 2 else "", "name": "fn"}
            case = concept.inputs(rng)
            results = []
            for body in concept.bodies:
                namespace = {}
                exec(f"def fn({', '.join(names)}):\n" + fill(body, slots), namespace)
                copy = [list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v for v in case]
                results.append(repr(namespace["fn"](*copy)))
            assert len(set(results)) == 1, f"{concept}: bodies disagree on {case}: {results}"
            assert len(case) == len(names), f"{concept}: {len(case)} inputs for {names}"
        for _ in range(trials):
            prompt, body, name = make_task(rng, concept)
            ast.parse(prompt + body)
            assert "{a}" not in prompt and "{b}" not in prompt and "{k" not in prompt, prompt
    return len(CONCEPTS)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="check every concept and exit")
    options = parser.parse_args()
    if options.check:
        print(f"{check_concepts()} concepts ok")
    else:
        for prompt, body, _ in generate(options.seed, options.count):
            print(prompt + body)
