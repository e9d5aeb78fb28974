#!/usr/bin/env python3
"""Fails when two or more files of one crate import each other.

A circle of imports between files means one concept is split across two
places; the fix is to move the shared piece into a module of its own. Each
non-test `.rs` file under `<crate>/src` is a node; an edge goes from a file
to the module file that a `crate::...` or `super::...` path in its code
(comments excluded) names. Child modules a file declares are not edges.

Usage: scripts/check-import-cycles.py CRATE_DIR...
"""

import os
import re
import sys
from collections import defaultdict


def module_files(src):
    files = {}
    for root, _, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            module = os.path.relpath(path, src)[:-3].split(os.sep)
            if module[-1] in ("mod", "lib", "main"):
                module = module[:-1]
            files[tuple(module)] = path
    return files


def resolve(files, parts):
    """The longest prefix of a path that is a module file."""
    for i in range(len(parts), 0, -1):
        if tuple(parts[:i]) in files:
            return tuple(parts[:i])
    return None


def is_test_file(path):
    name = os.path.basename(path)
    return name.endswith("_tests.rs") or name in ("test_support.rs", "testing.rs")


def edges_of(files):
    edges = defaultdict(set)
    for module, path in files.items():
        if is_test_file(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        text = re.sub(r"//[^\n]*", "", text)
        cut = text.find("#[cfg(test)]\nmod tests {")
        if cut >= 0:
            text = text[:cut]
        for m in re.finditer(r"\b(crate|super)((?:::\w+)+)", text):
            parts = m.group(2).split("::")[1:]
            base = [] if m.group(1) == "crate" else list(module[:-1])
            target = resolve(files, base + parts)
            # A path into the file's own module, or one of its ancestors, is not an edge.
            if target and target != module and target != tuple(module[: len(target)]):
                edges[module].add(target)
    return edges


def cycles(files, edges):
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    sys.setrecursionlimit(10000)
    for v in list(files):
        if v not in index:
            visit(v)
    return found


def main():
    failed = False
    for crate in sys.argv[1:]:
        files = module_files(os.path.join(crate, "src"))
        for component in cycles(files, edges_of(files)):
            failed = True
            names = ", ".join(files[m] for m in sorted(component))
            print(f"import cycle in {crate}: {names}")
    if failed:
        sys.exit(1)
    print(f"no import cycles in {', '.join(sys.argv[1:])}")


if __name__ == "__main__":
    main()
