#!/usr/bin/env python3
"""What `compare` and `history` tell apart on this machine: false alarms between reruns of one
build, and planted slowdowns found.

    scripts/compare-detection.py PARBENCH DIR [--suite scenarios/ci.toml] [--reruns 8]

Runs the suite `--reruns` times back to back with one binary into DIR (reports already there
are reused), then, from those real reruns:
- compare, one report a side: every ordered pair; the exit codes (0: no regression);
- compare, 3 reports a side: 10 random splits of the reruns, with nothing planted (false
  alarms) and with every timed variant of one entry slowed by a factor (1.1, 1.2, 1.3, 1.5, 2)
  in the 3 new reports, the entry rotating over the suite's timed variants: how often the
  planted row is a regression;
- history: the reruns as one commit (no step may be flagged, no environment change drawn),
  then 3 as commit A and 3 as commit B with B planted ×1.3: is B's step flagged?
A planted slowdown scales a variant's every sample and statistic in the report: the noise
between reruns stays the machine's own. Prints a Markdown summary.
"""

import argparse
import copy
import json
import os
import random
import subprocess
import sys
import tempfile

FACTORS = [1.1, 1.2, 1.3, 1.5, 2.0]
TRIALS = 10
TIME_KEYS = ["median_s", "mean_s", "min_s", "max_s", "stddev_s", "mad_s"]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def load(path):
    with open(path) as f:
        return json.load(f)


def save(doc, path):
    with open(path, "w") as f:
        json.dump(doc, f)


def timed_variants(doc):
    """(run index, variant index) of every timed variant in a report."""
    return [(i, j) for i, r in enumerate(doc["runs"]) for j, _ in enumerate(r.get("variants", []))]


def plant(doc, target, factor):
    """A copy of `doc` with one variant `factor` times slower in every sample and statistic."""
    d = copy.deepcopy(doc)
    i, j = target
    v = d["runs"][i]["variants"][j]
    v["samples_s"] = [s * factor for s in v.get("samples_s", [])]
    for k in TIME_KEYS:
        if isinstance(v.get(k), (int, float)):
            v[k] = v[k] * factor
    if isinstance(v.get("ci95_s"), list):
        v["ci95_s"] = [x * factor for x in v["ci95_s"]]
    return d


def compare(parbench, base, new):
    cmd = [parbench, "compare", "--format", "json", *base, "--", *new]
    p = run(cmd)
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        sys.exit(f"compare gave no JSON (exit {p.returncode}): {p.stderr.strip()}")
    return p.returncode, doc


def planted_row_is_regression(doc, run_doc, variant_name):
    scen = run_doc["scenario"]
    for row in doc["rows"]:
        if row["entry"].startswith(scen) and row["entry"].endswith(" " + variant_name):
            return row["verdict"] == "regression", row["verdict"]
    return False, "missing"


def history_steps(parbench, folder):
    p = run([parbench, "history", "--format", "markdown", folder])
    return p.returncode, p.stdout, p.stderr


def as_commit(doc, commit, day, hour):
    d = copy.deepcopy(doc)
    d["tool"]["git_commit"] = commit
    d["environment"]["started_at"] = f"2026-01-{day:02d}T{hour:02d}:00:00Z"
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("parbench")
    ap.add_argument("dir")
    ap.add_argument("--suite", default="scenarios/ci.toml")
    ap.add_argument("--reruns", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    paths = []
    for k in range(a.reruns):
        p = os.path.join(a.dir, f"rerun-{k}.json")
        if not os.path.exists(p):
            r = run([a.parbench, "run", a.suite, "-q", "-o", p])
            if r.returncode != 0:
                sys.exit(f"rerun {k} failed (exit {r.returncode}): {r.stderr.strip()[-300:]}")
            print(f"rerun {k} written", file=sys.stderr)
        paths.append(p)
    docs = [load(p) for p in paths]
    busy = sum(
        1 for d in docs if any("busy machine" in n for r in d["runs"] for n in r.get("notes", []))
    )
    rng = random.Random(a.seed)
    out = []
    out.append(f"{a.reruns} reruns of `{a.suite}` with one binary; {busy} of them warned of a busy machine.\n")

    # One report a side, every ordered pair.
    codes = [compare(a.parbench, [paths[x]], [paths[y]])[0] for x in range(len(paths)) for y in range(len(paths)) if x != y]
    out.append(f"- compare, 1 report a side, {len(codes)} ordered pairs: exit 0 in {codes.count(0)}, 1 in {codes.count(1)}, other {len(codes) - codes.count(0) - codes.count(1)}")

    targets = timed_variants(docs[0])
    with tempfile.TemporaryDirectory() as tmp:
        false_alarms = 0
        found = {f: 0 for f in FACTORS}
        for t in range(TRIALS):
            pick = rng.sample(range(len(paths)), 6)
            base = [paths[x] for x in pick[:3]]
            new = [paths[x] for x in pick[3:]]
            code, _ = compare(a.parbench, base, new)
            false_alarms += code == 1
            target = targets[t % len(targets)]
            rd = docs[0]["runs"][target[0]]
            vname = rd["variants"][target[1]]["name"]
            for f in FACTORS:
                planted = []
                for x in pick[3:]:
                    p = os.path.join(tmp, f"t{t}-{f}-{x}.json")
                    save(plant(docs[x], target, f), p)
                    planted.append(p)
                _, doc = compare(a.parbench, base, planted)
                hit, _ = planted_row_is_regression(doc, rd, vname)
                found[f] += hit
        out.append(f"- compare, 3 reports a side, {TRIALS} random splits, nothing planted: exit 1 in {false_alarms}")
        for f in FACTORS:
            out.append(f"- compare, 3 a side, one variant planted ×{f} (rotating over {len(targets)} variants): flagged a regression in {found[f]} of {TRIALS}")

        # History: the reruns as one commit; then A ×3 and planted B ×3.
        one = os.path.join(tmp, "one")
        os.makedirs(one)
        for k, d in enumerate(docs):
            save(as_commit(d, "aaaaaaa", 1, k), os.path.join(one, f"{k}.json"))
        code, md, err = history_steps(a.parbench, one)
        steps = [l for l in md.splitlines() if l.startswith("|") and "---" not in l][1:]
        env = "environment" in (md + err).lower() and "change" in (md + err).lower()
        out.append(f"- history, {len(docs)} reruns as one commit: exit {code}, {len(steps)} steps flagged")
        hits = 0
        for t in range(TRIALS):
            two = os.path.join(tmp, f"two-{t}")
            os.makedirs(two)
            pick = rng.sample(range(len(paths)), 6)
            target = targets[t % len(targets)]
            vname = docs[0]["runs"][target[0]]["variants"][target[1]]["name"]
            for n, x in enumerate(pick):
                d = docs[x] if n < 3 else plant(docs[x], target, 1.3)
                save(as_commit(d, "aaaaaaa" if n < 3 else "bbbbbbb", 1 + n, 0), os.path.join(two, f"{n}.json"))
            code, md, err = history_steps(a.parbench, two)
            hits += any(vname in l and "bbbbbbb" in l for l in md.splitlines())
        out.append(f"- history, 3 reruns of commit A then 3 of commit B planted ×1.3: B's step flagged in {hits} of {TRIALS}")
        print("\n".join(out))
        if env:
            print("\n(history's output mentions an environment change: read it)")


if __name__ == "__main__":
    main()
