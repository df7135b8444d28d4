#!/usr/bin/env python3
"""bench/lab_line.py - the figures of bench/lab.sh (issue 46).

  lab_line.py line OUT ROUND CFG N WALL_US USAGE LAB_ENV
      one run's LAB line from the clients' mapfs-bench JSON (OUT/ROUND-CFG-I
      .json) and the machines' CPU in the run (USAGE: "gw1=US c1=US ...")
  lab_line.py medians LINES
      a median line per configuration, each against its family's first
      (soloN / N x solo1, pgN / N x pg1) and pg1 against solo1
  lab_line.py calibrate LINES
      exit 1 ("LAB calibration FAILED") when a median soloN is below
      0.9 x N x solo1
  lab_line.py need GW CLIENT PG PGS CFG...
      the cores the biggest configuration's budgets add up to
"""
import json
import re
import statistics
import sys


def env_of(path):
    return dict(w.split("=", 1) for w in open(path).read().split() if "=" in w)


def line(out, r, cfg, n, wall_us, usage, envf):
    n, wall_us = int(n), int(wall_us)
    env = env_of(envf)
    use = {k: int(v) for k, v in (u.split("=") for u in usage.split())}
    rate = files = 0.0
    for i in range(1, n + 1):
        items = json.load(open(f"{out}/{r}-{cfg}-{i}.json"))["items"]
        it = [x for x in items if x["name"] == "create"][0]
        rate += it["value"]
        files += it["files"]

    def busy(names, budget):
        if budget == "none" or not names:
            return 0.0
        return max(use[m] for m in names) / (float(budget) * wall_us)

    gws = [m for m in use if m.startswith("gw")]
    s = (f"LAB cfg={cfg} item=create round={r} rate={rate:.0f} "
         f"gw_cpu_us={sum(use[m] for m in gws) / files:.0f}")
    if "pg" in use:
        s += f" pg_cpu_us={(use['pg'] + use.get('pgs', 0)) / files:.0f}"
    s += f" gw_busy={busy(gws, env['GW_CPU']):.2f}"
    if "pg" in use:
        s += f" pg_busy={busy(['pg'], env['PG_CPU']):.2f}"
    cls = [m for m in use if re.match(r"c\d", m)]
    s += f" cl_busy={busy(cls, env['CLIENT_CPU']):.2f}"
    print(s)


def read_lines(path):
    rows = {}
    for l in open(path):
        d = dict(kv.split("=", 1) for kv in l.split()[1:])
        rows.setdefault(d["cfg"], []).append(d)
    return rows


def split_cfg(cfg):
    fam, n = re.match(r"(\D+)(\d+)$", cfg).groups()
    return fam, int(n)


def medians(path):
    rows = read_lines(path)
    med = {c: statistics.median(float(d["rate"]) for d in ds)
           for c, ds in rows.items()}
    for cfg in sorted(rows, key=lambda c: (split_cfg(c)[0] != "solo", split_cfg(c))):
        ks = [k for k in rows[cfg][0] if k not in ("cfg", "item", "round")]
        m = {k: statistics.median(float(d[k]) for d in rows[cfg]) for k in ks}
        fam, n = split_cfg(cfg)
        vals = " ".join(f"{k}={m[k]:.0f}" if k == "rate" or k.endswith("_us")
                        else f"{k}={m[k]:.2f}" for k in ks)
        rel = ""
        if fam + "1" in med:
            rel = f" of_n_x_{fam}1={m['rate'] / (n * med[fam + '1']):.2f}"
        if cfg == "pg1" and "solo1" in med:
            rel += f" of_solo1={m['rate'] / med['solo1']:.2f}"
        print(f"LAB cfg={cfg} item=create median {vals}{rel}")


def calibrate(path):
    med = {split_cfg(c)[1]: statistics.median(float(d["rate"]) for d in ds)
           for c, ds in read_lines(path).items() if c.startswith("solo")}
    if 1 not in med:
        print("LAB calibration FAILED: solo1 was not run")
        return 1
    bad = [n for n in sorted(med) if med[n] < 0.9 * n * med[1]]
    if bad:
        n = bad[0]
        print(f"LAB calibration FAILED: solo{n} gives {med[n] / med[1]:.2f} x "
              f"solo1, needs {0.9 * n:.1f}: the box, not the design, sets "
              f"these figures")
        return 1
    print(f"LAB calibration passed: solo1..solo{max(med)} within 0.9 x N of solo1")
    return 0


def need(gw, cl, pg, pgs, *cfgs):
    f = lambda v: 0.0 if v == "none" else float(v)
    gw, cl, pg, pgs = f(gw), f(cl), f(pg), f(pgs)
    most = 0.0
    for cfg in cfgs:
        fam, n = split_cfg(cfg)
        most = max(most, n * (gw + cl) + (pg + pgs if fam == "pg" else 0))
    print(f"{most:.2f}")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "line":
        line(*args)
    elif cmd == "medians":
        medians(*args)
    elif cmd == "calibrate":
        sys.exit(calibrate(*args))
    elif cmd == "need":
        need(*args)
    else:
        sys.exit(f"lab_line.py: unknown command {cmd}")
