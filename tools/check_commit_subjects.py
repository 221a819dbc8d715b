#!/usr/bin/env python3
"""Checks that every commit subject after BASE is 72 characters or fewer.

  check_commit_subjects.py [--base COMMIT]   -> prints "passed failed skipped" (one check)

BASE is the last commit made before the rule was checked (older subjects are history and
stay as they are). Each offending commit is listed on standard error with its length.
Outside a git checkout, or when BASE is not in the history (a shallow clone), the check is
skipped and says why."""
import argparse
import subprocess
import sys

BASE = "2f567c1"
LIMIT = 72


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default=BASE)
    args = ap.parse_args()
    r = subprocess.run(["git", "log", "--format=%h %s", f"{args.base}..HEAD"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"[commits] skipped: no git history with {args.base} here ({r.stderr.strip()})", file=sys.stderr)
        print("0 0 1")
        return
    bad = []
    lines = [l for l in r.stdout.splitlines() if l]
    for line in lines:
        h, _, subject = line.partition(" ")
        if len(subject) > LIMIT:
            bad.append(f"{h} ({len(subject)} characters): {subject}")
    for b in bad:
        print(f"[commits] subject over {LIMIT} characters: {b}", file=sys.stderr)
    print(f"[commits] {len(lines)} commits after {args.base}, {len(bad)} with a subject over {LIMIT} characters",
          file=sys.stderr)
    print("0 1 0" if bad else "1 0 0")


if __name__ == "__main__":
    main()
