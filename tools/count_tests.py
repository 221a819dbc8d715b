#!/usr/bin/env python3
"""Counts test cases in Bazel's test.xml files (GoogleTest JUnit output).

  count_tests.py TESTLOGS_DIR LABEL   -> prints "passed failed skipped" for that run
  count_tests.py --total "p f s" ...  -> prints "N passed, N failed, N skipped"
A test target without test cases in its XML counts as one case (by its exit status).
"""
import os
import sys
import xml.etree.ElementTree as ET


def count(logs, label):
    passed = failed = skipped = 0
    for root, _, files in os.walk(logs):
        if "test.xml" not in files:
            continue
        path = os.path.join(root, "test.xml")
        try:
            tree = ET.parse(path)
        except ET.ParseError:
            failed += 1
            print(f"[{label}] unreadable {path}", file=sys.stderr)
            continue
        cases = tree.getroot().iter("testcase")
        n = 0
        for c in cases:
            n += 1
            if c.find("failure") is not None or c.find("error") is not None:
                failed += 1
                print(f"[{label}] FAILED {c.get('classname')}.{c.get('name')}", file=sys.stderr)
            elif c.find("skipped") is not None or c.get("result") == "skipped" or c.get("status") == "notrun":
                skipped += 1
                print(f"[{label}] skipped {c.get('classname')}.{c.get('name')}", file=sys.stderr)
            else:
                passed += 1
        if n == 0:
            failed += 1
            print(f"[{label}] no test cases in {path}", file=sys.stderr)
    return passed, failed, skipped


def main():
    if sys.argv[1] == "--total":
        p = f = s = 0
        for part in sys.argv[2:]:
            a, b, c = (int(x) for x in part.split())
            p, f, s = p + a, f + b, s + c
        print(f"{p} passed, {f} failed, {s} skipped")
        return
    p, f, s = count(sys.argv[1], sys.argv[2])
    print(f"[{sys.argv[2]}] {p} passed, {f} failed, {s} skipped", file=sys.stderr)
    print(p, f, s)


if __name__ == "__main__":
    main()
