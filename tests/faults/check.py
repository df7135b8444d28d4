#!/usr/bin/env python3
"""tests/faults/check.py RUN_DIR SEED MINUTES - the fault campaign's checkers.

Reads what tests/faults/campaign.sh left in RUN_DIR: the clients' call logs
(client*.log, tests/faults/fclient.c's lines), the final walks of /fc
through every gateway and through a fresh one (walk.*.txt), each gateway's
`mapfs-gw fsck` (fsck.*.txt, its exit status on the first line) and the
faults (faults.log: START_NS END_NS KIND TARGET).  Prints operations by
type and outcome, faults by type, the recovery after each fault, every
violation with the calls that show it, and last, exactly:

  CAMPAIGN seed=S minutes=M ops=N ok=K unknown=U faults=F violations=V

A violation is: an acknowledged name missing at the end, a name no call
made, a removed one back; a change answering NOENT or EXIST against what
the client's own answered calls say is there; an unknown rename that
happened and did not (both names, or neither); a manifest file (answered
COMMIT and close) whose bytes differ, or are missing, through any gateway
or a fresh one; the walks of the gateways not the same; a read that began
after a write's close returned, on any gateway, returning a value
overwritten before the read began (close-to-open, docs/CLUSTER.md), or a
value never written; fsck finding anything after the heal; a gateway
that cannot upload everything once all is mended (heal.txt).  An unknown
outcome may have happened or not, never both.  Exit 0 with no violation,
1 with some, 2 when the run's own files cannot be read (never a pass).
"""
import collections
import glob
import os
import sys

NEG = float("-inf")
POS = float("inf")


class Call:
    __slots__ = ("t0", "t1", "client", "gw", "op", "a", "b", "out", "line")

    def __init__(self, line):
        f = line.rstrip("\n").split("\t")
        if len(f) != 8:
            raise ValueError("not a call line: %r" % line)
        self.t0, self.t1 = int(f[0]), int(f[1])
        self.client, self.gw = int(f[2]), int(f[3])
        self.op, self.a, self.b, self.out = f[4], f[5], f[6], f[7]
        self.line = line.rstrip("\n")

    @property
    def ok(self):
        return self.out == "ok"

    @property
    def unknown(self):
        return self.out == "unknown"

    def err(self):
        return int(self.out[5:]) if self.out.startswith("fail:") else 0


ENOENT, EEXIST = 2, 17


def die(msg):
    print("check: " + msg)
    print("CAMPAIGN could not be checked: " + msg)
    sys.exit(2)


def load(run):
    calls = []
    logs = sorted(glob.glob(os.path.join(run, "client*.log")))
    if not logs:
        die("no client logs in " + run)
    for p in logs:
        with open(p) as f:
            for line in f:
                if line.strip():
                    calls.append(Call(line))
    walks = {}
    for p in sorted(glob.glob(os.path.join(run, "walk.*.txt"))):
        label = os.path.basename(p)[5:-4]
        entries = {}
        with open(p) as f:
            first = f.readline().strip()
            if first != "status 0":
                die("walk %s did not finish (%s)" % (label, first))
            for line in f:
                path, kind, size, digest, first_bytes = line.rstrip("\n").split("\t")
                entries[path] = (kind, digest, first_bytes)
        walks[label] = entries
    if not walks:
        die("no final walks")
    fscks = {}
    for p in sorted(glob.glob(os.path.join(run, "fsck.*.txt"))):
        with open(p) as f:
            lines = f.read().splitlines()
        fscks[os.path.basename(p)[5:-4]] = lines
    faults = []
    fp = os.path.join(run, "faults.log")
    if os.path.exists(fp):
        with open(fp) as f:
            for line in f:
                t0, t1, kind, target = line.split()[:4]
                faults.append((int(t0), int(t1), kind, target))
    return calls, walks, fscks, faults


# docs/CLUSTER.md's consistency model, point 2: another gateway sees a
# change within the propagation window (at worst one poll, 1 s, at rest),
# longer while a machine is unreachable.  A call through another gateway
# than the one that answered the change, inside that window (or with a
# fault in between), may see the state before it.
WINDOW_NS = 1000000000


class Checker:
    def __init__(self, faults):
        self.violations = collections.defaultdict(list)
        self.faults = faults
        self.in_window = collections.Counter()

    def bad(self, checker, what, history):
        self.violations[checker].append((what, history))

    def settled(self, gw_then, end_then, gw_now, start_now):
        """Whether a call through gw_now begun at start_now must see what
        a call through gw_then answered at end_then."""
        if gw_then == gw_now:
            return True
        if start_now - end_then <= WINDOW_NS:
            return False
        return not any(f0 <= start_now and f1 >= end_then
                       for f0, f1, _k, _t in self.faults)


def history_of(calls, client, names):
    return [c.line for c in calls if c.client == client and
            (c.a in names or c.b in names)]


def must_see(ck, state, est, name, c):
    """name is there for certain, and call c must see it (the model)."""
    if state.get(name) != "present":
        return False
    e = est.get(name)
    if e is None or ck.settled(e.gw, e.t1, c.gw, c.t0):
        return True
    ck.in_window["set"] += 1
    return False


def check_set(ck, calls, walks):
    """The namespace as a set: each client's names in /fc/cID."""
    by_client = collections.defaultdict(list)
    for c in calls:
        if c.op in ("create", "mkdir", "link", "rename", "remove", "manifest"):
            by_client[c.client].append(c)
    for client, cs in by_client.items():
        cs.sort(key=lambda c: c.t0)
        state = {}      # name -> present | absent | maybe
        est = {}        # name -> the call that made its state certain
        digest = {}     # manifest name -> "size:hash"
        made = set()
        xor = []        # (from, to) of unknown renames
        for c in cs:
            if c.op in ("create", "mkdir", "manifest"):
                name = c.a
                if c.ok:
                    state[name] = "present"
                    est[name] = c
                    made.add(name)
                    if c.op == "manifest":
                        digest[name] = c.b
                elif c.unknown or c.op == "manifest":
                    state[name] = "maybe"
                    made.add(name)
                elif c.err() == EEXIST and state.get(name, "absent") == "absent":
                    ck.bad("set", "%s of c%d/%s answered EXIST for a name no call made"
                           % (c.op, client, name), history_of(calls, client, {name}))
            elif c.op == "link":
                src, dst = c.a, c.b
                if c.ok:
                    state[dst] = "present"
                    est[dst] = c
                    made.add(dst)
                elif c.unknown:
                    state[dst] = "maybe"
                    made.add(dst)
                elif c.err() == ENOENT and must_see(ck, state, est, src, c):
                    ck.bad("set", "link of c%d/%s answered NOENT though it is there"
                           % (client, src), history_of(calls, client, {src}))
            elif c.op == "rename":
                src, dst = c.a, c.b
                if c.ok:
                    state[src], state[dst] = "absent", "present"
                    est[src] = est[dst] = c
                    made.add(dst)
                    if src in digest:
                        digest[dst] = digest.pop(src)
                elif c.unknown:
                    state[src], state[dst] = "maybe", "maybe"
                    made.add(dst)
                    xor.append((src, dst, c))
                elif c.err() == ENOENT and must_see(ck, state, est, src, c):
                    ck.bad("set", "rename of c%d/%s answered NOENT though it is there"
                           % (client, src), history_of(calls, client, {src}))
            elif c.op == "remove":
                if c.ok:
                    state[c.a] = "absent"
                    est[c.a] = c
                elif c.unknown:
                    state[c.a] = "maybe"
                elif c.err() == ENOENT and must_see(ck, state, est, c.a, c):
                    ck.bad("set", "remove of c%d/%s answered NOENT though it is there"
                           % (client, c.a), history_of(calls, client, {c.a}))
        prefix = "/fc/c%d/" % client
        for label, entries in walks.items():
            there = {p[len(prefix):]: v for p, v in entries.items()
                     if p.startswith(prefix) and "/" not in p[len(prefix):]}
            for name, st in state.items():
                if st == "present" and name not in there:
                    ck.bad("set", "c%d/%s acknowledged and missing (walk %s)"
                           % (client, name, label), history_of(calls, client, {name}))
                elif st == "absent" and name in there:
                    ck.bad("set", "c%d/%s removed and back (walk %s)"
                           % (client, name, label), history_of(calls, client, {name}))
            for name in there:
                if name not in made:
                    ck.bad("set", "c%d/%s: no call made it (walk %s)"
                           % (client, name, label), [])
            for src, dst, rc in xor:
                a, b = src in there, dst in there
                later = [c for c in cs if c.t0 > rc.t0 and
                         (c.a in (src, dst) or c.b in (src, dst))]
                if a == b and not later:
                    ck.bad("set", "unknown rename c%d/%s -> %s: %s (walk %s)"
                           % (client, src, dst, "both there" if a else "neither there",
                              label), history_of(calls, client, {src, dst}))
            for name, want in digest.items():
                if state.get(name) != "present":
                    continue
                got = there.get(name)
                if not got:
                    continue  # said above
                if got[1] != want:
                    ck.bad("manifest", "c%d/%s reads back %s, COMMITted %s (walk %s)"
                           % (client, name, got[1], want, label),
                           history_of(calls, client, {name}))


def check_registers(ck, calls, walks):
    """Close-to-open: a read after a write's close sees it or a later one."""
    writes = collections.defaultdict(list)
    reads = collections.defaultdict(list)
    for c in calls:
        if c.op == "write":
            writes[c.a].append(c)
        elif c.op == "read" and c.ok:
            reads[c.a].append(c)
    for reg, rs in reads.items():
        ws = writes.get(reg, [])
        by_val = {w.b: w for w in ws}
        oks = sorted((w for w in ws if w.ok), key=lambda w: w.t1)
        for r in rs:
            if r.b == "init":
                v_end = NEG
            else:
                w = by_val.get(r.b)
                if w is None or w.t0 > r.t1:
                    ck.bad("registers", "%s read %s, a value never written (before it)"
                           % (reg, r.b), [r.line] + ([w.line] if w else []))
                    continue
                v_end = w.t1 if w.ok else POS
            # A write answered before the read began, and begun after the
            # read value's write had answered: the read is stale.
            for w2 in oks:
                if w2.t1 >= r.t0:
                    break
                if w2.t0 > v_end:
                    if not ck.settled(w2.gw, w2.t1, r.gw, r.t0):
                        ck.in_window["registers"] += 1
                        continue
                    hist = [x.line for x in ws if x.b == r.b] + [w2.line, r.line]
                    ck.bad("registers", "%s read %s after %s's close had returned"
                           % (reg, r.b, w2.b), hist)
                    break
    vals = {w.b for ws in writes.values() for w in ws} | {"init"}
    for label, entries in walks.items():
        for path, (kind, _digest, first) in entries.items():
            if path.startswith("/fc/reg/") and first not in vals:
                ck.bad("registers", "%s holds %r, never written (walk %s)"
                       % (path, first, label), [])


def check_walks(ck, walks):
    labels = sorted(walks)
    base = walks[labels[0]]
    for label in labels[1:]:
        w = walks[label]
        diff = sorted(set(base.items()) ^ set(w.items()))
        if diff:
            ck.bad("gateways", "walk %s differs from walk %s in %d entries"
                   % (label, labels[0], len(diff)),
                   ["%s %s" % d for d in diff[:10]])


def check_heal(ck, run):
    p = os.path.join(run, "heal.txt")
    if os.path.exists(p):
        with open(p) as f:
            for line in f:
                if line.strip():
                    ck.bad("heal", line.strip(), [])


def check_fsck(ck, fscks):
    for label, lines in fscks.items():
        if not lines or lines[0] != "status 0":
            ck.bad("fsck", "fsck through %s: %s" % (label, lines[0] if lines else "no output"),
                   lines[1:20])


def pct(v, p):
    if not v:
        return 0.0
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100.0))]


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    run, seed, minutes = sys.argv[1], sys.argv[2], sys.argv[3]
    calls, walks, fscks, faults = load(run)
    ck = Checker(faults)
    check_set(ck, calls, walks)
    check_registers(ck, calls, walks)
    check_walks(ck, walks)
    check_fsck(ck, fscks)
    check_heal(ck, run)

    outcomes = collections.Counter()
    for c in calls:
        outcomes[(c.op, "ok" if c.ok else "unknown" if c.unknown else "failed")] += 1
    print("operations by type and outcome:")
    for op in sorted({k[0] for k in outcomes}):
        print("  %-9s ok %6d  failed %5d  unknown %4d" % (
            op, outcomes[(op, "ok")], outcomes[(op, "failed")], outcomes[(op, "unknown")]))
    print("faults by type:")
    for kind, n in sorted(collections.Counter(f[2] for f in faults).items()):
        print("  %-20s %d" % (kind, n))
    # Recovery: after each fault's end, until the first ok through each gateway.
    gws = sorted({c.gw for c in calls})
    oks = collections.defaultdict(list)
    for c in calls:
        if c.ok:
            oks[c.gw].append(c.t1)
    for g in gws:
        oks[g].sort()
    rec = []
    import bisect
    for t0, t1, kind, target in faults:
        for g in gws:
            i = bisect.bisect_left(oks[g], t1)
            if i < len(oks[g]):
                rec.append((oks[g][i] - t1) / 1e9)
    if rec:
        print("recovery after a fault, until the first ok through each gateway: "
              "p50 %.2f s, p99 %.2f s, max %.2f s (%d)" % (
                  pct(rec, 50), pct(rec, 99), max(rec), len(rec)))
    print("inside the propagation window (another gateway, within %.1f s or a "
          "fault: allowed by docs/CLUSTER.md): %d NOENT of names made, %d reads "
          "of the value before" % (WINDOW_NS / 1e9, ck.in_window["set"],
                                    ck.in_window["registers"]))
    nviol = sum(len(v) for v in ck.violations.values())
    print("violations by checker:")
    for name in ("set", "manifest", "registers", "gateways", "fsck", "heal"):
        vs = ck.violations.get(name, [])
        print("  %-9s %d" % (name, len(vs)))
        for what, hist in vs[:5]:
            print("    " + what)
            for h in sorted(hist, key=lambda x: x.split("\t")[0])[:12]:
                print("      | " + h)
    nok = sum(1 for c in calls if c.ok)
    nunk = sum(1 for c in calls if c.unknown)
    print("CAMPAIGN seed=%s minutes=%s ops=%d ok=%d unknown=%d faults=%d violations=%d"
          % (seed, minutes, len(calls), nok, nunk, len(faults), nviol))
    sys.exit(1 if nviol else 0)


if __name__ == "__main__":
    main()
