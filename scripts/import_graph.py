#!/usr/bin/env python3
"""The import graph of src, drawn from its non-test code: fails on any circle of imports, on a
source file over 900 lines, and if src/ffi imports src/commands.

A module is a file or a folder (its files together), at every level: src's files and folders,
then each folder's files and folders (a folder's `mod.rs` is one of its own modules). A circle
among the modules of any folder fails, so no circle of files is missed, and a folder that imports
one which imports it back is a circle too.

An import is every path that names a module of the crate, wherever it stands: `use` lines (with
`{..}` groups), inline paths, macro invocations (`crate::registry::algorithms!`), paths inside
macro bodies (a macro's paths are its own file's imports), `$crate::`, `super::` (climbing inline
modules first), `self::`, and a mod.rs's or lib.rs's paths through its own child modules. A path
through a re-export (`crate::core::Kind`, re-exported by core/mod.rs) is an import of the module
that defines the name. `#[cfg(test)]` modules and the files they declare are left out (tests may
use anything).
usage: scripts/import_graph.py   (from the repository root)
"""
import pathlib
import re
import sys

SRC = pathlib.Path("src")
MAX_LINES = 900
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_comments(text):
    """The text with comments blanked and string literals emptied (lengths kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' and not re.match(r"[A-Za-z0-9_]", text[i - 1 : i] or " "):
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('"' + re.sub(r"[^\n]", " ", text[i + 1 : j]) + '"')
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i : i + 4]):
            j = text.find("'", i + 1 if text[i + 1] != "\\" else i + 3)
            out.append(" " * (j + 1 - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def block_end(text, open_brace):
    """The index after the `}` matching the `{` at `open_brace`."""
    depth, j = 0, open_brace
    while j < len(text):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        j += 1
        if depth == 0:
            break
    return j


CFG_TEST = r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s*)?"


def without_tests(text):
    """The code minus `#[cfg(test)] mod x { .. }` blocks and other `#[cfg(test)]` items."""
    out, i = [], 0
    for m in re.finditer(CFG_TEST + r"(mod\s+\w+\s*\{|use\b[^;]*;|\w[^;{]*\{)", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        i = m.end() if m.group(1).endswith(";") else block_end(text, m.end() - 1)
        out.append("\n" * text.count("\n", m.start(), i))
    out.append(text[i:])
    return "".join(out)


def test_children(text):
    """Child modules declared under `#[cfg(test)]` (`#[cfg(test)] mod tests;`)."""
    return set(re.findall(CFG_TEST + r"mod\s+(\w+)\s*;", text))


def parse_tree(code, i):
    """The paths of a use tree starting at `code[i]` (after a `::`), each a list of segments."""
    m = re.compile(r"\s*(" + IDENT + r"|\{|\*)").match(code, i)
    if not m:
        return [[]], i
    tok, i = m.group(1), m.end()
    if tok == "{":
        paths = []
        while True:
            sub, i = parse_tree(code, i)
            paths.extend(sub)
            m = re.compile(r"\s*([,}])").match(code, i)
            if not m:
                return paths, i
            i = m.end()
            if m.group(1) == "}":
                return paths, i
            if re.compile(r"\s*\}").match(code, i):
                i = re.compile(r"\s*\}").match(code, i).end()
                return paths, i
    if tok == "*":
        return [[]], i
    m = re.compile(r"\s*::").match(code, i)
    if m:
        rest, i = parse_tree(code, m.end())
        return [[tok] + r for r in rest], i
    return [[tok]], i


class Crate:
    def __init__(self, src):
        self.files = {}  # module path (tuple) -> file
        self.children = {}  # module path -> names of its child modules
        self.tests = set()  # test-only module paths
        self.code = {}  # file -> code without comments
        self._collect(src / "lib.rs", ())
        self.reexports = {mp: self._reexports(mp) for mp in self.files}

    def _collect(self, path, mp):
        self.files[mp] = path
        code = strip_comments(path.read_text())
        self.code[path] = code
        tests = test_children(code)
        kids = set()
        for name in re.findall(r"(?:^|\n)\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s*)?mod\s+(\w+)\s*;", code):
            folder = path.parent if path.name in ("lib.rs", "mod.rs") else path.with_suffix("")
            child = folder / f"{name}.rs"
            if not child.exists():
                child = folder / name / "mod.rs"
            if not child.exists():
                continue
            kids.add(name)
            if name in tests or mp in self.tests:
                self.tests.add(mp + (name,))
            self._collect(child, mp + (name,))
        self.children[mp] = kids

    def _reexports(self, mp):
        """`pub use` names of module `mp`: name -> absolute path it stands for."""
        out = {}
        code = without_tests(self.code[self.files[mp]])
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+", code):
            for path in self.tree_paths(code, m.end(), mp, 0):
                if path:
                    out[path[-1]] = path
        return out

    def tree_paths(self, code, i, mp, depth):
        """Absolute paths of the use tree or path at `code[i]` seen from module `mp` nested
        `depth` inline modules deep; paths that do not start in the crate are dropped."""
        trees, _ = parse_tree(code, i)
        out = []
        for t in trees:
            if not t:
                continue
            head, rest = t[0], t[1:]
            if head == "crate":
                out.append(rest)
            elif head in ("super", "self"):
                base, j = list(mp), 0
                inline = depth
                while j < len(t) and t[j] in ("super", "self"):
                    if t[j] == "super":
                        if inline:
                            inline -= 1
                        elif base:
                            base.pop()
                    j += 1
                if inline == 0:
                    out.append(base + t[j:])
            elif head in self.children.get(mp, ()) and depth == 0:
                out.append(list(mp) + t)
        return out

    def resolve(self, path, seen=None):
        """The module path of the file that defines what `path` names."""
        mp = ()
        for k, seg in enumerate(path):
            if mp + (seg,) in self.files:
                mp = mp + (seg,)
                continue
            target = self.reexports.get(mp, {}).get(seg)
            seen = seen or set()
            if target is not None and (mp, seg) not in seen:
                seen.add((mp, seg))
                return self.resolve(target + list(path[k + 1 :]), seen)
            break
        return mp

    def imports(self, mp):
        """(target module path, path text) of every import of module `mp`'s file."""
        path = self.files[mp]
        code = without_tests(self.code[path]).replace("$crate", " crate")
        inline = [
            (m.start(), block_end(code, m.end() - 1))
            for m in re.finditer(r"\bmod\s+\w+\s*\{", code)
        ]
        out = []
        heads = ["crate", "super", "self"] + sorted(self.children.get(mp, ()))
        for m in re.finditer(r"(?<![\w:])(" + "|".join(heads) + r")\s*::", code):
            depth = sum(1 for a, b in inline if a < m.start() < b)
            for p in self.tree_paths(code, m.start(), mp, depth):
                out.append((self.resolve(p), "::".join(p)))
        return out


def name(mp, crate):
    f = crate.files[mp]
    return str(f)


def sccs(nodes, edges):
    """Tarjan's strongly connected components of more than one node."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def shortest_cycle(start, comp, edges):
    """The shortest circle through `start` within the component (breadth-first)."""
    members = set(comp)
    prev, queue = {start: None}, [start]
    for v in queue:
        for w in sorted(edges.get(v, ())):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return path[::-1]
            if w in members and w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


def main():
    sys.setrecursionlimit(10000)
    crate = Crate(SRC)
    live = [mp for mp in crate.files if mp not in crate.tests]
    # file-level imports: (from, to) -> example paths
    file_edges = {}
    for mp in live:
        for target, text in crate.imports(mp):
            if target != mp and target in crate.files and target not in crate.tests:
                file_edges.setdefault((mp, target), set()).add(text)

    def label(prefix, mp):
        """The module of `mp` one level below folder `prefix`: (name, is a folder)."""
        rest = mp[len(prefix) :]
        if not rest:
            return "mod.rs" if prefix else "lib.rs"
        f = crate.files[prefix + rest[:1]]
        return rest[0] + ("/" if f.name == "mod.rs" else ".rs")

    failed = False
    folders = sorted({mp[:k] for mp in live for k in range(len(mp)) if crate.files[mp[:k]].name in ("lib.rs", "mod.rs")})
    count = 0
    for prefix in folders:
        members = [mp for mp in live if mp[: len(prefix)] == prefix]
        nodes = {label(prefix, mp) for mp in members}
        count += len(nodes)
        edges, why = {}, {}
        for (a, b), texts in file_edges.items():
            if a[: len(prefix)] != prefix or b[: len(prefix)] != prefix:
                continue
            la, lb = label(prefix, a), label(prefix, b)
            if la != lb:
                edges.setdefault(la, set()).add(lb)
                why.setdefault((la, lb), []).append((a, b, texts))
        folder = crate.files[prefix].parent
        for comp in sccs(nodes, edges):
            failed = True
            print(f"import circle in {folder}/ ({len(comp)} modules: {', '.join(comp)}):")
            covered = set()
            for start in comp:
                if start in covered:
                    continue
                cycle = shortest_cycle(start, comp, edges)
                covered.update(cycle)
                print("    " + " -> ".join(cycle + cycle[:1]))
                for la, lb in zip(cycle, cycle[1:] + cycle[:1]):
                    for a, b, texts in why[(la, lb)][:2]:
                        print(f"      {crate.files[a]} -> {crate.files[b]}: {', '.join(sorted(texts))}")
    for (a, b), texts in sorted(file_edges.items()):
        if a[:1] == ("ffi",) and b[:1] == ("commands",):
            failed = True
            print(f"src/ffi imports src/commands: {crate.files[a]}: {', '.join(sorted(texts))}")
    for path in sorted(SRC.rglob("*.rs")):
        lines = path.read_text().count("\n")
        if lines > MAX_LINES:
            failed = True
            print(f"{path}: {lines} lines, over {MAX_LINES}")
    if failed:
        sys.exit(1)
    print(
        f"no import circle among {len(live)} files in {len(folders)} folders of src ({count} modules);"
        f" no file over {MAX_LINES} lines; src/ffi does not import src/commands"
    )


if __name__ == "__main__":
    main()
