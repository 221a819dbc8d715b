#!/usr/bin/env python3
"""The public C API as declared in include/cgrt/*.h: function names and parameter counts.

  public_api.py HEADER...  -> prints "name nparams" per function
Used by tests/shared (every function is exported by libcgrt.so) and by the Python
package's tests (every function has a ctypes signature with that many arguments).
"""
import re
import sys


def _strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    lines = []
    cont = False
    for line in text.split("\n"):  # drop preprocessor lines (and their continuations)
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            continue
        lines.append(line)
    return "\n".join(lines).replace('extern "C" {', "")


def _params(text, start):
    """The parameter list text from the '(' at `start`, and the index after its ')'."""
    depth, i = 0, start
    while i < len(text):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i + 1
        i += 1
    raise ValueError("unbalanced parentheses")


def _count(params):
    params = params.strip()
    if params in ("", "void"):
        return 0
    depth, n = 0, 1
    for ch in params:
        depth += ch in "([{"
        depth -= ch in ")]}"
        n += ch == "," and depth == 0
    return n


def declarations(paths):
    """{name: number of parameters} of every function declared in the headers."""
    out = {}
    for path in paths:
        with open(path) as f:
            text = _strip(f.read())
        # Top-level statements: typedefs and struct bodies are skipped whole.
        depth, start = 0, 0
        stmts = []
        for i, ch in enumerate(text):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == ";" and depth == 0:
                stmts.append(text[start:i])
                start = i + 1
        for s in stmts:
            s = s.strip()
            if not s or s.startswith(("typedef", "enum", "struct", "}")) or "(" not in s:
                continue
            m = re.search(r"\b(cgrt_[a-z0-9_]+)\s*\(", s)
            if not m or "(*" in s[:m.end()]:
                continue
            params, _ = _params(s, m.end() - 1)
            out[m.group(1)] = _count(params)
    return out


if __name__ == "__main__":
    for name, n in sorted(declarations(sys.argv[1:]).items()):
        print(name, n)
