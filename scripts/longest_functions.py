#!/usr/bin/env python3
"""Prints the longest functions of planner/, configs/, diagnose/ and cli/ (issue 25: none should
exceed 100 lines). A small brace scanner, not a C++ parser: a function is a `name(...) ... {` at
namespace or class depth whose body is counted from its opening to its closing brace; comments and
string literals are skipped so their braces do not count.
    python3 scripts/longest_functions.py [N]      # default 10
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DIRS = ["planner", "configs", "diagnose", "cli", "layout"]


def strip(text):
    """Blanks comments and string/char literals, keeping newlines so line numbers hold."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j])); i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + (m.group(1) if m else "") + '"', i)
            end = n if end < 0 else end + len(m.group(1) if m else "") + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end])); i = end
        elif c == "'" and i > 0 and text[i - 1].isalnum():
            out.append(c); i += 1  # a digit separator (1'000'000), not a character literal
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i)); i = j + 1
        else:
            out.append(c); i += 1
    return "".join(out)


HEAD = re.compile(r"([A-Za-z_][\w:<>~]*)\s*\([^;{}]*\)\s*(const)?\s*(noexcept)?\s*(->\s*[\w:<>]+)?\s*(:[^;{]*)?$", re.S)
KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "do"}


def functions(path):
    text = strip(path.read_text())
    depth_stack = []  # for each open brace: (start line, name or None)
    found = []
    last = 0
    for i, ch in enumerate(text):
        if ch == "{":
            head = text[last:i].split(";")[-1].split("}")[-1].strip()
            m = HEAD.search(head)
            name = m.group(1) if m else None
            if name in KEYWORDS or (name and any(s[1] for s in depth_stack)):
                name = None  # inside a function: lambdas and blocks count toward it
            depth_stack.append((text.count("\n", 0, i) + 1, name))
            last = i + 1
        elif ch == "}":
            if depth_stack:
                start, name = depth_stack.pop()
                if name:
                    found.append((text.count("\n", 0, i) + 1 - start + 1, name, start))
            last = i + 1
        elif ch == ";":
            last = i + 1
    return found


def main():
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    rows = []
    for d in DIRS:
        for p in sorted((ROOT / d).rglob("*.cpp")):
            for lines, name, start in functions(p):
                rows.append((lines, f"{p.relative_to(ROOT)}:{start}", name))
    rows.sort(reverse=True)
    over = sum(1 for r in rows if r[0] > 100)
    print(f"longest functions ({over} over 100 lines of {len(rows)} in {', '.join(DIRS)}):")
    for lines, where, name in rows[:top]:
        print(f"  {lines:5d}  {name:40s} {where}")


if __name__ == "__main__":
    main()
