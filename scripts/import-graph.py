#!/usr/bin/env python3
"""import-graph.py - the dependency graph between the files of a source folder
(src/cluster by default), and whether it has a cycle longer than 2 files.

Usage: python3 scripts/import-graph.py [--verbose] [DIR]

A file depends on another when it #includes it, or when it names a function or
global that the other (a .c file) defines without `static`: a call, or a function
pointer taken.  Every file includes the folder's headers, so the calls are what
show the layers: a file of a lower layer (the session) that calls up into a
feature makes one circle of everything between them.

Prints each strongly connected component of more than one file (a set of
files that all reach each other), its size and, with --verbose, the edges inside
it with the names that make them.  Exits 1 when a component has more than 2 files
(two files that call each other are tolerated), else 0.  Reads only the sources:
no build needed.

When DIR holds layers.txt ("LAYER: FILE.c ...", one line a layer, bottom
first), a .c file it does not list, and a call from a file to one of a layer
above its own, fail too.
"""
import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def strip(text):
    """The text without comments, string and character literals."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" ")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def definitions(code):
    """Names of the non-static functions and globals defined in `code` (a .c
    file, comments stripped): each statement at file scope that is not
    static, extern or a typedef and goes on with a body ({) or an
    initializer (=)."""
    names = set()
    depth = 0
    stmt = ""
    for line in code.split("\n"):
        if line.startswith("#"):
            continue
        for ch in line + "\n":
            if depth == 0:
                if ch in "{;=":
                    head = stmt.strip()
                    words = head.split()
                    if ch != ";" and words and words[0] not in ("static", "extern", "typedef"):
                        if ch == "{" and "(" in head:
                            m = re.findall(r"([A-Za-z_]\w*)\s*\(", head)
                        elif ch == "=":
                            m = re.findall(r"([A-Za-z_]\w*)\s*(?:\[[^]]*\]\s*)*$", head)
                        else:
                            m = []
                        if m:
                            names.add(m[0])
                    stmt = "" if ch != "=" else stmt + " = "
                    if ch == "=":
                        stmt = ""
                        depth = -1  # skip the initializer up to its ;
                    if ch == "{":
                        depth = 1
                    continue
                stmt += ch
            elif depth == -1:
                if ch == ";":
                    depth = 0
                elif ch == "{":
                    depth = -2
            elif depth < -1:
                depth += -1 if ch == "{" else 1 if ch == "}" else 0
            else:
                depth += 1 if ch == "{" else -1 if ch == "}" else 0
    return names


def graph(folder):
    files = sorted(f for f in os.listdir(folder) if f.endswith((".c", ".h")))
    code = {}
    for f in files:
        with open(os.path.join(folder, f), encoding="utf-8") as fh:
            code[f] = fh.read()
    owner = {}
    for f in files:
        if f.endswith(".c"):
            for name in definitions(strip(code[f])):
                owner[name] = f
    base = os.path.basename(os.path.normpath(folder))
    edges = {f: {} for f in files}
    for f in files:
        for inc in INCLUDE.findall(code[f]):
            name = inc[len(base) + 1:] if inc.startswith(base + "/") else inc
            if name in edges and name != f:
                edges[f].setdefault(name, set()).add("#include")
        if f.endswith(".c"):
            # a struct's tag is no call, even when a function has its name
            body = re.sub(r"\b(?:struct|union|enum)\s+\w+", " ", strip(code[f]))
            for word in set(IDENT.findall(body)):
                g = owner.get(word)
                if g and g != f:
                    edges[f].setdefault(g, set()).add(word)
    return files, edges


def components(files, edges):
    """Tarjan's strongly connected components."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in files:
        if v not in index:
            visit(v)
    return out


def layers(folder, files, edges):
    """Problems with DIR/layers.txt's layers (none when it has none)."""
    path = os.path.join(folder, "layers.txt")
    if not os.path.exists(path):
        return []
    rank, names = {}, []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, members = line.partition(":")
                names.append(name.strip())
                for f in members.split():
                    rank[f] = len(names) - 1
    out = ["%s: not in layers.txt" % f for f in files if f.endswith(".c") and f not in rank]
    for f in files:
        for g in sorted(edges[f]):
            if f in rank and g in rank and rank[g] > rank[f]:
                out.append("%s (%s) calls up into %s (%s): %s" % (
                    f, names[rank[f]], g, names[rank[g]], " ".join(sorted(edges[f][g]))))
    return out


def main(argv):
    verbose = "--verbose" in argv
    args = [a for a in argv if a != "--verbose"]
    folder = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "src", "cluster")
    files, edges = graph(folder)
    comps = [c for c in components(files, edges) if len(c) > 1]
    worst = 0
    for c in sorted(comps, key=len, reverse=True):
        worst = max(worst, len(c))
        print("cycle of %d files: %s" % (len(c), " ".join(c)))
        if verbose:
            for f in c:
                for g in sorted(edges[f]):
                    if g in c:
                        print("  %s -> %s: %s" % (f, g, " ".join(sorted(edges[f][g]))))
    bad = layers(folder, files, edges)
    for line in bad:
        print("layer: " + line)
    nedges = sum(len(e) for e in edges.values())
    print("%d files, %d edges, %d cycles, longest %d files (at most 2 allowed)"
          % (len(files), nedges, len(comps), worst))
    return 1 if worst > 2 or bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
