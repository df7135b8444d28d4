#!/usr/bin/env python3
"""tests/layer_calls.py ROOM "L1 L2 ..." - the files of ROOM (ROOM/L.c)
call only layers before them: no file names a function that a file later
in the list defines (not static).  A layer may be a knot, "( A B C )":
files that call each other in a circle, kept as one layer; no file
outside it calls into it from below, and it calls nothing above it.
Comments and strings are not read.  Exit 1, one line per call up; 0 if
none.  For tests/arrows.sh."""
import re, sys, os
room = sys.argv[1]
name = os.path.basename(room.rstrip('/'))
# The layers: each a list of files (one, or a knot's several).
layers, knot = [], None
for w in sys.argv[2].replace('(', ' ( ').replace(')', ' ) ').split():
    if w == '(':
        knot = []
    elif w == ')':
        layers.append(knot)
        knot = None
    elif knot is not None:
        knot.append(w)
    else:
        layers.append([w])
rank = {f: i for i, layer in enumerate(layers) for f in layer}
def strip(t):
    t = re.sub(r'/\*.*?\*/', ' ', t, flags=re.S)
    t = re.sub(r'//[^\n]*', ' ', t)
    t = re.sub(r'"(\\.|[^"\\])*"', '""', t)
    return t
src = {l: strip(open(os.path.join(room, l + '.c')).read()) for l in rank}
defs = {}
for l, t in src.items():
    # global function definitions: at line start, not static, name( ... ) {
    for m in re.finditer(r'^(?!static)[A-Za-z_][\w \*]*?\b(\w+)\([^;{]*?\)\s*\{',
                         t, re.M | re.S):
        defs.setdefault(l, set()).add(m.group(1))
bad = 0
for x in sorted(rank, key=lambda f: (rank[f], f)):
    for y in sorted(rank, key=lambda f: (rank[f], f)):
        if rank[y] <= rank[x]:
            continue
        for fn in sorted(defs.get(y, ())):
            # A struct, enum or union of the same name is not a call.
            if re.search(r'(?<!struct )(?<!enum )(?<!union )\b' + fn + r'\b',
                         src[x]):
                print(f"arrows: {name}/{x}.c uses {fn} of {name}/{y}.c, "
                      "a layer above it")
                bad = 1
sys.exit(bad)
