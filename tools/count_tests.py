#!/usr/bin/env python3
"""Counts test cases in Bazel's test.xml files (GoogleTest JUnit output).

  count_tests.py TESTLOGS_DIR LABEL   -> prints "passed failed skipped" for that run
  count_tests.py --junit FILE LABEL   -> the same for one JUnit XML file (pytest's)
  count_tests.py --total "p f s" ...  -> prints "N passed, N failed, N skipped"
A test target without test cases in its XML counts as one case (by its exit status).
"""
import os
import sys
import xml.etree.ElementTree as ET


def count(logs, label):
    paths = [os.path.join(root, "test.xml") for root, _, files in os.walk(logs) if "test.xml" in files]
    return count_files(paths, label)


def count_files(paths, label):
    passed = failed = skipped = 0
    for path in paths:
        if not os.path.exists(path):
            failed += 1
            print(f"[{label}] missing {path}", file=sys.stderr)
            continue
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
    if sys.argv[1] == "--junit":
        p, f, s = count_files([sys.argv[2]], sys.argv[3])
        label = sys.argv[3]
    else:
        p, f, s = count(sys.argv[1], sys.argv[2])
        label = sys.argv[2]
    print(f"[{label}] {p} passed, {f} failed, {s} skipped", file=sys.stderr)
    print(p, f, s)


if __name__ == "__main__":
    main()
