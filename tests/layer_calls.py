#!/usr/bin/env python3
"""tests/layer_calls.py ROOM "L1 L2 ..." - the files of ROOM (ROOM/L.c)
call only layers before them: no file names a function that a file later
in the list defines (not static).  Comments and strings are not read.
Exit 1, one line per call up; 0 if none.  For tests/arrows.sh."""
import re, sys, os
room, layers = sys.argv[1], sys.argv[2].split()
name = os.path.basename(room.rstrip('/'))
def strip(t):
    t = re.sub(r'/\*.*?\*/', ' ', t, flags=re.S)
    t = re.sub(r'//[^\n]*', ' ', t)
    t = re.sub(r'"(\\.|[^"\\])*"', '""', t)
    return t
src = {l: strip(open(os.path.join(room, l + '.c')).read()) for l in layers}
defs = {}
for l, t in src.items():
    # global function definitions: at line start, not static, name( ... ) {
    for m in re.finditer(r'^(?!static)[A-Za-z_][\w \*]*?\b(\w+)\([^;{]*?\)\s*\{',
                         t, re.M | re.S):
        defs.setdefault(l, set()).add(m.group(1))
bad = 0
for i, x in enumerate(layers):
    for y in layers[i + 1:]:
        for fn in sorted(defs.get(y, ())):
            # A struct, enum or union of the same name is not a call.
            if re.search(r'(?<!struct )(?<!enum )(?<!union )\b' + fn + r'\b',
                         src[x]):
                print(f"arrows: {name}/{x}.c uses {fn} of {name}/{y}.c, "
                      "a layer above it")
                bad = 1
sys.exit(bad)
