#!/usr/bin/env python3
"""The relay's structure, from its own imports and calls (docs/development.md).

  layers.py OBJDIR [--walk FILE] [--show]

A module is include/NAME.h with relay/NAME.c and the sources that define
what it declares without a header of their own (relay/target_connect.c is
module target's); a header without a source (types, constants) is no
module. Module A uses module B when A's sources or header include B's
header, or A's objects call a function B's objects define (nm). Fails
(exit 1) on:
  - a circle: modules that use each other, directly or round about;
  - a relay/*.c over MAX_LINES lines;
  - the walk of one batch entering more than MAX_WALK files: drain.c and
    the sources whose functions drain_run calls, itself or through
    drain.c's own functions (the ones it reaches from drain_run).
--show prints every module's layer (0: uses no other module) and the walk.
"""
import glob
import os
import re
import subprocess
import sys

MAX_LINES = 600
MAX_WALK = 12
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)\.h"', re.M)


def sources():
    return sorted(os.path.basename(p)[:-2] for p in glob.glob("relay/*.c"))


def declared(name):
    with open("include/%s.h" % name, encoding="utf-8") as f:
        return f.read()


def module_of(srcs, defined):
    """Each source's module: its own header's, else the header that declares
    most of the functions and extern data it defines, else its own (main,
    gen_man)."""
    heads = {s: declared(s) for s in srcs if os.path.exists("include/%s.h" % s)}
    out = {}
    for s in srcs:
        if s in heads:
            out[s] = s
            continue
        score = {h: sum(1 for f in defined[s] if re.search(r"\b%s\(|^extern [^;]*\b%s\b" % (re.escape(f), re.escape(f)), text, re.M))
                 for h, text in heads.items()}
        best = max(score, key=lambda h: score[h], default=None)
        out[s] = best if best and score[best] > 0 else s
    return out


def includes(path, mods):
    if not os.path.exists(path):
        return set()
    with open(path, encoding="utf-8") as f:
        return {m for m in INCLUDE.findall(f.read()) if m in mods}


def symbols(objdir, mod):
    out = subprocess.run(["nm", os.path.join(objdir, mod + ".o")], capture_output=True, text=True, check=True)
    defined, used = set(), set()
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBR":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
    return defined, used


DEF = re.compile(r"^(?:static )?[a-z][^;(]*?\b(\w+)\((?:[^;{]|\n)*?\)\n\{\n(.*?)\n\}\n", re.M | re.S)
CALL = re.compile(r"\b(\w+)\s*\(")


def batch_walk(src, root, owner):
    """The sources the functions of src reached from root call into."""
    with open("relay/%s.c" % src, encoding="utf-8") as f:
        bodies = {m.group(1): m.group(2) for m in DEF.finditer(f.read())}
    seen, todo, files = set(), [root], {src}
    while todo:
        fn = todo.pop()
        if fn in seen or fn not in bodies:
            continue
        seen.add(fn)
        for c in CALL.findall(bodies[fn]):
            if c in bodies:
                todo.append(c)
            elif c in owner:
                files.add(owner[c])
    return files


def graph(objdir):
    """The modules, what each uses, and what each source calls (by source)."""
    srcs = sources()
    defined, used, owner = {}, {}, {}
    for s in srcs:
        defined[s], used[s] = symbols(objdir, s)
        for f in defined[s]:
            owner[f] = s
    mod = module_of(srcs, defined)
    mods = sorted(set(mod.values()))
    calls = {s: {owner[f] for f in used[s] if f in owner} - {s} for s in srcs}
    edges = {m: set() for m in mods}
    for s in srcs:
        m = mod[s]
        inc = includes("relay/%s.c" % s, mods) | includes("include/%s.h" % s, mods)
        edges[m] |= inc | {mod[c] for c in calls[s]}
    for m in mods:
        edges[m].discard(m)
    return mods, edges, calls, owner


def circles(mods, edges):
    """Tarjan's strongly connected components of more than one module."""
    index, low, stack, on, out = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in mods:
        if v not in index:
            visit(v)
    return out


def layers(mods, edges):
    depth = {}

    def d(v, seen=()):
        if v in depth:
            return depth[v]
        if v in seen:
            return 0
        depth[v] = 1 + max((d(w, seen + (v,)) for w in edges[v]), default=-1)
        return depth[v]

    for v in mods:
        d(v)
    return depth


def main():
    objdir, walk_from, show = sys.argv[1], "drain", "--show" in sys.argv
    if "--walk" in sys.argv:
        walk_from = sys.argv[sys.argv.index("--walk") + 1]
    mods, edges, calls, owner = graph(objdir)
    bad = []
    found = circles(mods, edges)
    for comp in found:
        back = [(a, b) for a in comp for b in sorted(edges[a]) if b in comp]
        bad.append("circle: %s (%s)" % (" <-> ".join(comp), ", ".join("%s uses %s" % e for e in back)))
    for path in sorted(glob.glob("relay/*.c")):
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > MAX_LINES:
            bad.append("%s: %d lines (at most %d: split it by concern)" % (path, n, MAX_LINES))
    walk = sorted(batch_walk(walk_from, walk_from + "_run", owner))
    if len(walk) > MAX_WALK:
        bad.append("one batch's walk from %s.c enters %d files (at most %d): %s" %
                   (walk_from, len(walk), MAX_WALK, " ".join(walk)))
    depth = layers(mods, edges)
    print("layers: %d modules on %d layers, %d circles; the batch's walk enters %d files: %s" %
          (len(mods), 1 + max(depth.values()), len(found), len(walk), " ".join(walk)))
    if show:
        for lay in range(max(depth.values()), -1, -1):
            print("  %2d: %s" % (lay, " ".join(m for m in mods if depth[m] == lay)))
    for b in bad:
        print("layers: " + b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
