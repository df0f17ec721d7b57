"""The beginning of a Python text the perplexity oracles score: small functions and a class,
code as a user's repository holds it. Each oracle adds a tail of its own."""

PYTHON_TEXT_START = '''import os
import sys


def read_lines(path):
    """Return the lines of the file at path, without their line ends."""
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\\n") for line in f]


def count_words(lines):
    """Count how often each word occurs in lines."""
    counts = {}
    for line in lines:
        for word in line.split():
            counts[word] = counts.get(word, 0) + 1
    return counts


def most_common(counts, n=10):
    """The n most common words, most common first."""
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]


class Stack:
    """A last-in, first-out stack."""

    def __init__(self):
        self.items = []

    def push(self, item):
        self.items.append(item)

    def pop(self):
        if not self.items:
            raise IndexError("pop from an empty stack")
        return self.items.pop()

    def '''
