#!/usr/bin/env python3
"""The import graph of src/core, drawn from its non-test code: prints each module's imports of
other core modules, and fails if they form a circle or if src/ffi imports src/commands.

A module is a file (`gcra.rs`) or a folder (`sliding_log/`, its files together). An import is any
`crate::core::<module>` path (in `use` lines or inline) or `super::` path of a folder's file;
`#[cfg(test)]` modules, `tests.rs` and `testkit.rs` are left out (tests may use anything).
usage: scripts/import_graph.py   (from the repository root)
"""
import pathlib
import re
import sys

CORE = pathlib.Path("src/core")


def code_without_tests(text):
    """The text minus comments and `#[cfg(test)] mod ... { ... }` blocks."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s*)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while depth and j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def module_of(path):
    rel = path.relative_to(CORE)
    return rel.parts[0].removesuffix(".rs") if len(rel.parts) == 1 else rel.parts[0]


graph = {}
for path in sorted(CORE.rglob("*.rs")):
    if path.name in ("tests.rs", "testkit.rs") or path == CORE / "mod.rs":
        continue
    mod = module_of(path)
    deps = graph.setdefault(mod, set())
    code = code_without_tests(path.read_text())
    for m in re.finditer(r"crate::core::(\w+)", code):
        deps.add(m.group(1))
    # `use crate::core::{a, b::C}` groups
    for m in re.finditer(r"crate::core::\{([^}]*)\}", code):
        deps.update(re.findall(r"(?:^|,)\s*(\w+)", m.group(1)))
deps_all = {m: sorted(d & graph.keys() - {m}) for m, d in graph.items()}
for m in sorted(deps_all):
    print(f"{m:16} -> {', '.join(deps_all[m]) or '(leaf)'}")

# Tarjan's strongly connected components: any with more than one module is a circle.
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in deps_all[v]:
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        sccs.append(comp)


for v in deps_all:
    if v not in index:
        visit(v)
circles = [c for c in sccs if len(c) > 1]
ffi_up = [
    f"{p}: {line.strip()}"
    for p in sorted(pathlib.Path("src/ffi").rglob("*.rs"))
    for line in code_without_tests(p.read_text()).splitlines()
    if "crate::commands" in line
]
for c in circles:
    print("import circle in src/core:", " -> ".join(sorted(c)))
for line in ffi_up:
    print("src/ffi imports src/commands:", line)
if circles or ffi_up:
    sys.exit(1)
print(f"no circle among {len(deps_all)} core modules; src/ffi does not import src/commands")
