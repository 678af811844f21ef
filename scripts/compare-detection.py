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
            return row["verdict"] in ("slower", "worse"), row["verdict"]
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
    names = {t: f'{docs[0]["runs"][t[0]]["scenario"]} {docs[0]["runs"][t[0]]["variants"][t[1]]["name"]}' for t in targets}
    splits = [rng.sample(range(len(paths)), 6) for _ in range(TRIALS)]
    with tempfile.TemporaryDirectory() as tmp:
        false_alarms = sum(
            compare(a.parbench, [paths[x] for x in pick[:3]], [paths[x] for x in pick[3:]])[0] == 1
            for pick in splits
        )
        out.append(f"- compare, 3 reports a side, {TRIALS} random splits, nothing planted: exit 1 in {false_alarms}")
        # Every timed variant in turn, planted in the new side of every split, at each factor.
        table = []
        for target in targets:
            rd = docs[0]["runs"][target[0]]
            vname = rd["variants"][target[1]]["name"]
            found = {}
            for f in FACTORS:
                hits = 0
                for t, pick in enumerate(splits):
                    base = [paths[x] for x in pick[:3]]
                    planted = []
                    for x in pick[3:]:
                        p = os.path.join(tmp, f"p-{t}-{x}.json")
                        save(plant(docs[x], target, f), p)
                        planted.append(p)
                    _, doc = compare(a.parbench, base, planted)
                    hits += planted_row_is_regression(doc, rd, vname)[0]
                found[f] = hits
            table.append((names[target], found))
        reliable = lambda found: next((f"×{f}" for f in FACTORS if found[f] >= 9), f"none up to ×{FACTORS[-1]}")
        out.append(f"- compare, 3 a side, each of the {len(targets)} timed variants planted in turn (flagged in how many of {TRIALS} splits, per factor; the smallest factor flagged in ≥ 9):\n")
        out.append("  | variant | " + " | ".join(f"×{f}" for f in FACTORS) + " | reliably from |")
        out.append("  |---|" + "---|" * (len(FACTORS) + 1))
        for name, found in table:
            out.append(f"  | {name} | " + " | ".join(str(found[f]) for f in FACTORS) + f" | {reliable(found)} |")
        at30 = sum(1 for _, found in table if found[1.3] >= 9)
        out.append(f"\n  ×1.3 flagged in ≥ 9 of {TRIALS} for {at30} of {len(table)} variants.")

        # History: the reruns as one commit; then A ×3 and planted B ×3.
        one = os.path.join(tmp, "one")
        os.makedirs(one)
        for k, d in enumerate(docs):
            save(as_commit(d, "aaaaaaa", 1, k), os.path.join(one, f"{k}.json"))
        code, md, err = history_steps(a.parbench, one)
        steps = [l for l in md.splitlines() if l.startswith("|") and "---" not in l][1:]
        env = "environment" in (md + err).lower() and "change" in (md + err).lower()
        out.append(f"- history, {len(docs)} reruns as one commit: exit {code}, {len(steps)} steps flagged")
        # Every timed variant in turn, planted ×1.3 in commit B's three reruns of every split.
        flagged = []
        for target in targets:
            rd = docs[0]["runs"][target[0]]
            vname = rd["variants"][target[1]]["name"]
            hits = 0
            for t, pick in enumerate(splits):
                two = os.path.join(tmp, f"two-{target[0]}-{target[1]}-{t}")
                os.makedirs(two)
                for n, x in enumerate(pick):
                    d = docs[x] if n < 3 else plant(docs[x], target, 1.3)
                    save(as_commit(d, "aaaaaaa" if n < 3 else "bbbbbbb", 1 + n, 0), os.path.join(two, f"{n}.json"))
                code, md, err = history_steps(a.parbench, two)
                row = f"{rd['scenario']}["
                hits += any(l.startswith(f"| `{row}") and f"] {vname}`" in l and "bbbbbbb" in l and "| regression |" in l for l in md.splitlines())
            flagged.append((names[target], hits))
        at30 = sum(1 for _, h in flagged if h >= 9)
        out.append(f"- history, 3 reruns of commit A then 3 of commit B with one variant ×1.3, each of the {len(flagged)} variants over {TRIALS} splits: B's step flagged in ≥ 9 of {TRIALS} for {at30} of them ("
                   + ", ".join(f"{n} {h}" for n, h in flagged) + ")")
        print("\n".join(out))
        if env:
            print("\n(history's output mentions an environment change: read it)")


if __name__ == "__main__":
    main()
