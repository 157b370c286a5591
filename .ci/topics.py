#!/usr/bin/env python3
"""One topic catalogue: fail when a topic name is written outside it.

The catalogue is crates/rpc/src/catalog.rs (`Topic::new("name", ...)`).
Every other non-test Rust source under crates/ must name a topic through
it (`rpc::catalog::Drain::TOPIC`, a typed call), never as a string
literal that is a topic name (`"resource.drain"`, `"/v1/resource.drain"`).
Prose that mentions a topic (an error text, a help line) is not a topic
string; comments and docs may name topics; tests may too (files under
tests/ or benches/, files named tests.rs or *_tests.rs, and the
`#[cfg(test)]` module that ends a file).

Usage: .ci/topics.py [--list]   (exit 1 and one line per offence)
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CATALOG = os.path.join("crates", "rpc", "src", "catalog.rs")


def catalogue_names():
    text = open(os.path.join(ROOT, CATALOG)).read()
    names = re.findall(r'Topic::new\(\s*"([^"]+)"', text)
    if len(names) < 10:
        sys.exit(f"topics.py: found only {len(names)} topics in {CATALOG}")
    return names


def string_literals(src):
    """(line, text) of every string literal outside comments."""
    i, n, line = 0, len(src), 1
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += src.count("\n", i, j)
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 8]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            j = n if j < 0 else j
            yield line, src[i + len(m.group(0)):j]
            line += src.count("\n", i, j)
            i = j + len(end)
        elif c == "'" :
            # a char literal ('"' or '\'') or a lifetime: skip it whole
            m = re.match(r"'(\\.|[^\\'])'", src[i:i + 4])
            i += len(m.group(0)) if m else 1
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            yield line, src[i + 1:j]
            line += src.count("\n", i, j)
            i = j + 1
        else:
            i += 1


def non_test_part(path, src):
    base = os.path.basename(path)
    parts = path.split(os.sep)
    if "tests" in parts or "benches" in parts or "examples" in parts:
        return None
    if base == "tests.rs" or base.endswith("_tests.rs"):
        return None
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod \w+ \{", src, re.M)
    return src[: m.start()] if m else src


def main():
    names = catalogue_names()
    pat = re.compile(
        r"^(?:/v1/)?(" + "|".join(re.escape(t) for t in sorted(names, key=len, reverse=True)) + r")$"
    )
    bad = []
    crates = os.path.join(ROOT, "crates")
    for dirpath, _, files in os.walk(crates):
        for f in files:
            if not f.endswith(".rs"):
                continue
            full = os.path.join(dirpath, f)
            rel = os.path.relpath(full, ROOT)
            if rel == CATALOG:
                continue
            src = non_test_part(rel, open(full, encoding="utf-8").read())
            if src is None:
                continue
            for line, lit in string_literals(src):
                for m in pat.finditer(lit.strip()):
                    bad.append(f"{rel}:{line}: topic \"{m.group(1)}\" written outside the catalogue (use rpc::catalog)")
    if "--list" in sys.argv:
        print("\n".join(names))
    for b in sorted(set(bad)):
        print(b)
    if bad:
        print(f"topics.py: {len(set(bad))} topic names outside {CATALOG}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
