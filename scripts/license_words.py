#!/usr/bin/env python3
"""Checks the demo model's continuation of a prompt: how many distinct words of
scripts/license_words.txt it writes (repeating one word counts once; a word cut off by the token
limit at the end does not count). Prints them; exits 1 below --at-least.

    megac generate CKPT --prompt "This License" --top-k 1 | license_words.py --prompt "This License" --at-least 3
"""
import argparse
import os
import re
import sys

WORDS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "license_words.txt")


def license_words():
    with open(WORDS_FILE) as f:
        return {w for line in f if not line.startswith("#") for w in line.split()}


def counted_words(continuation, known):
    """The distinct known words of `continuation`, in order of first appearance."""
    words = re.findall(r"[A-Za-z]+", continuation)
    if words and continuation[-1:].isalpha():  # the last word may go on past the token limit
        words.pop()
    found = []
    for w in (w.lower() for w in words):
        if w in known and w not in found:
            found.append(w)
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompt", required=True, help="the prompt megac generate printed first")
    ap.add_argument("--at-least", type=int, required=True, help="the fewest distinct license words that pass")
    a = ap.parse_args()
    text = sys.stdin.read().rstrip("\n")
    if not text.startswith(a.prompt):
        sys.exit(f"license_words: the text does not start with the prompt {a.prompt!r}: {text!r}")
    continuation = text[len(a.prompt):]
    found = counted_words(continuation, license_words())
    verdict = "passes" if len(found) >= a.at_least else "FAILS"
    print(f"demo: the continuation {continuation!r} has {len(found)} distinct license words "
          f"({', '.join(found) or 'none'}); {verdict} (at least {a.at_least})")
    return 0 if len(found) >= a.at_least else 1


if __name__ == "__main__":
    sys.exit(main())
