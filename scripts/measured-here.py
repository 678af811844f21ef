#!/usr/bin/env python3
"""Prints the table of results/measured-here.md from the outputs of scripts/measured-here.sh.

Every figure is read from a report or an output of that run: nothing here is typed in. Figures
of parbench's reports are quoted as parbench formats them (each variant's `median_display`, each
derived figure's `derived_display`), so this script and the table never disagree.
`python3 scripts/measured-here.py self-test` checks the table on a synthetic run.
"""
import json
import os
import re
import sys


def shown(run, variant):
    """A variant's median as parbench prints it."""
    for v in run["variants"]:
        if v["name"] == variant:
            return v["median_display"]
    raise KeyError(f"{run['scenario']} has no variant {variant}")


def fig(run, key):
    """A derived figure as parbench prints it, with its unit."""
    return run["derived_display"][key]


def nanoseconds(seconds):
    """A machine limit of tens to hundreds of ns (a cache line's trip, a closure handed to a
    thread) in ns: the report keeps the limits as numbers only."""
    return f"{seconds * 1e9:.1f} ns"


def runs_by_scenario(report):
    return {r["scenario"]: r for r in report["runs"]}


def engine_rows(bench, torture, torture_seconds):
    """Rows for the engine: `bench` maps a criterion id (`async/fresh-var/1000`) to its median
    in ns per iteration; `torture` is the torture test's stderr."""
    def by_size(group):
        """[(N, median)] of the benchmarks `group/N`, by N."""
        return sorted((int(k.rsplit("/", 1)[1]), v) for k, v in bench.items()
                      if k.startswith(f"{group}/"))

    out = []
    cells = []
    for kind, title in (("fresh-var", "fresh vars"), ("read-shared", "readers of one var"),
                        ("write-chain", "write chain")):
        sizes = by_size(f"async/{kind}")
        if sizes:
            per_op = " / ".join(f"{v / n:.0f}" for n, v in sizes)
            counts = " / ".join(f"{n:,}" for n, _ in sizes)
            cells.append(f"{title} {per_op} ns at {counts} ops")
    if cells:
        out.append(("engine, async, per op", "`cargo bench --bench engine`", "; ".join(cells)))
    floor = by_size("floor/boxed-closure-channel")
    fresh = dict(by_size("async/fresh-var"))
    if floor:
        per_op = " / ".join(f"{v / n:.0f}" for n, v in floor)
        counts = " / ".join(f"{n:,}" for n, _ in floor)
        ratios = " / ".join(f"{fresh[n] / v:.2f}×" for n, v in floor if n in fresh)
        out.append(("floor: boxed closures through a channel to one thread, no engine", "same",
                    f"{per_op} ns at {counts} closures; fresh-var ops cost {ratios} that"))
    trip = bench.get("round_trip/push+wait_to_read")
    if trip is not None:
        out.append(("engine, synchronous round trip", "same", f"{trip / 1000:.2f} µs"))
    line = next((l for l in torture.splitlines() if l.startswith("engine torture:")), None)
    if line:
        out.append((
            "engine torture", "`PARBENCH_TORTURE=1000000 cargo test --lib engine::torture -- --nocapture`",
            line[len("engine torture: "):] + f", {torture_seconds} s (debug build); CI runs about 20,000 ops"))
    return out


def read_criterion(root):
    """Criterion's median estimate (ns per iteration) of every benchmark under `root`."""
    found = {}
    for dirpath, _, files in os.walk(root):
        if "estimates.json" in files and os.path.basename(dirpath) == "new":
            bench_dir = os.path.dirname(dirpath)
            bench_id = os.path.relpath(bench_dir, root)
            est = json.load(open(os.path.join(dirpath, "estimates.json")))
            found[bench_id] = est["median"]["point_estimate"]
    return found


def numpy_row(size, lines):
    """The table row of one `scripts/matmul-vs-blas.sh SIZE ROUNDS` output: per thread count,
    the ratios of the medians over the rounds to NumPy's and MKL's (the script's `median`
    lines), with the range of the single rounds' ratios to NumPy beside them, and each side's
    fraction of the FMA peak (its `of-peak` lines)."""
    per_round, medians, of_peak, rounds = {}, {}, {}, 0
    for line in lines:
        parts = line.split()
        if len(parts) == 7 and parts[0].isdigit():
            per_round.setdefault(parts[1], []).append(float(parts[5]))
            rounds = max(rounds, int(parts[0]))
        elif len(parts) == 7 and parts[0] == "median":
            medians[parts[1]] = tuple(float(x) for x in parts[2:])
        elif len(parts) == 5 and parts[0] == "of-peak":
            of_peak[parts[1]] = parts[2:]
    if not medians:
        return None
    cells = []
    for t in sorted(medians):
        p, n, m, to_numpy, to_mkl = medians[t]
        rs = sorted(per_round.get(t, [to_numpy]))
        peaks = of_peak.get(t)
        peak_words = (f"; of the FMA peak: parbench {peaks[0]}, NumPy {peaks[1]}, MKL {peaks[2]}"
                      if peaks else "")
        cells.append(f"{t} thread{'s' if t != '1' else ''} {to_numpy:.2f}× NumPy, {to_mkl:.2f}× MKL "
                     f"({p:.0f} vs {n:.0f} and {m:.0f} GFLOP/s; single rounds {rs[0]:.2f}–{rs[-1]:.2f}× "
                     f"NumPy{peak_words})")
    kernel = next((l[2:] for l in lines if l.startswith("# numpy")), "kernel not reported")
    return (f"CPU matmul vs NumPy/OpenBLAS and MKL, {size}²", f"`scripts/matmul-vs-blas.sh {size} {rounds}`",
            "parbench / NumPy and / MKL, medians of interleaved rounds: " + ", ".join(cells) + f" ({kernel})")


def limits_cell(env, run):
    """async's cost per op against the machine's limits the report's environment records (the
    channel hand-off and the cache line between two cores, measured once at the start of the
    process), those measured."""
    limits = env.get("limits") or {}
    per_op = run["derived"].get("async_per_op_s")

    def measured(probe, key):
        value = ((limits.get(probe) or {}).get("measured") or {}).get(key)
        return value if isinstance(value, (int, float)) and value > 0 else None

    parts = []
    channel = measured("channel", "per_op_s")
    if channel and per_op:
        parts.append(f"{per_op / channel:.2f}× a closure handed to another thread through a channel "
                     f"({nanoseconds(channel)} each)")
    line = measured("line", "one_way_s")
    if line and per_op:
        parts.append(f"{per_op / line:.1f}× a cache line between the two CPUs ({nanoseconds(line)} one way)")
    if not parts:
        return ""
    return "; async per op " + ", ".join(parts) + " (the machine's limits, measured at the start of the run)"


def rows(all_report, all_seconds, ci_seconds, ci_compare, numpy_runs):
    r = runs_by_scenario(all_report)
    out = []
    cmd = "`parbench all -o all.json`"

    a = r["async"]
    out.append((
        "`async`, book sizes", f"{cmd}: its `async` run",
        f"sync {shown(a, 'sync')}, async {shown(a, 'async')}: "
        f"{fig(a, 'async_speedup')}; the push-only pitfall on 10 products of 1000²: "
        f"{shown(a, 'products-push-only')} pushed vs {shown(a, 'products')} computed "
        f"({fig(a, 'products_over_push_only_ratio')} too little); ping-pong between two lanes: "
        f"a hop {fig(a, 'handoff_p50_s')} (median), {fig(a, 'handoff_p99_s')} "
        f"(99th percentile)" + limits_cell(all_report["environment"], a)))

    m = r["matmul"]
    out.append((
        "`matmul` 2000², all cores", f"{cmd}: its `matmul` run",
        f"{fig(m, 'gflops')} ({fig(m, 'threads')} threads)"))

    for size, lines in numpy_runs:
        row = numpy_row(size, lines)
        if row:
            out.append(row)

    c = r["cpu-gpu"]
    out.append((
        "`cpu-gpu` on two CPU devices (no GPU)", f"{cmd}: its `cpu-gpu` run",
        f"a {shown(c, 'a-alone')}, b {shown(c, 'b-alone')}, "
        f"parallel {shown(c, 'parallel')}: overlap efficiency "
        f"{fig(c, 'overlap_efficiency')}, speed-up {fig(c, 'parallel_speedup')}"))

    rc = r["run-copy"]
    out.append((
        "`run-copy` on the CPU fallback", f"{cmd}: its `run-copy` run",
        f"run {shown(rc, 'run')}, copy {shown(rc, 'copy')}, "
        f"run-then-copy {shown(rc, 'run-then-copy')}, overlapped "
        f"{shown(rc, 'overlapped')} = {fig(rc, 'overlapped_over_ideal_ratio')} "
        f"(max(run, copy) + one copy)"))

    dp = r["deps"]
    out.append((
        "`deps`", f"{cmd}: its `deps` run",
        f"op by op {shown(dp, 'op-by-op')}, parallel "
        f"{shown(dp, 'parallel')}: {fig(dp, 'parallel_speedup')}; each parallel "
        f"sample {fig(dp, 'parallel_over_bound_ratio')} its own lower bound (median; at least "
        f"{fig(dp, 'parallel_over_bound_ratio_min')}×)"))

    me = r["memory"]
    out.append((
        "`memory`", f"{cmd}: its `memory` run",
        f"peak {fig(me, 'unbounded_peak_bytes')} unbounded, {fig(me, 'sync_per_batch_peak_bytes')} "
        f"with a wait per minibatch, {fig(me, 'bounded_peak_bytes')} bounded: "
        f"{fig(me, 'memory_ratio')} less memory for {fig(me, 'bounded_time_ratio')} the time"))

    h = r["hybridize"]
    out.append((
        "`hybridize`", f"{cmd}: its `hybridize` run",
        f"imperative {shown(h, 'imperative')}, hybridized "
        f"{shown(h, 'hybridized')}: {fig(h, 'hybridize_speedup')}, about "
        f"{fig(h, 'overhead_per_op_s')} per engine op saved"))

    t = r["data-parallel"]
    k = t["parameters"]["devices"]
    out.append((
        "`data-parallel`", f"{cmd}: its `data-parallel` run",
        f"{k} devices: ring {fig(t, 'ring_samples_per_second')}, scaling efficiency "
        f"{fig(t, 'ring_scaling_efficiency')} (parameter server "
        f"{fig(t, 'parameter_server_scaling_efficiency')}) against one device's "
        f"{fig(t, 'one_device_samples_per_second')}; loss {fig(t, 'initial_loss')} → "
        f"{fig(t, 'ring_final_loss')} in {t['parameters']['steps']} steps"))

    out.append(("`parbench all`", "`time parbench all`", f"{all_seconds} s (all eight scenarios)"))
    times = [row for row in ci_compare["rows"] if row["is_time"] and row["change"] is not None]
    largest = max((abs(row["change"]) for row in times), default=float("nan"))
    out.append((
        "`scenarios/ci.toml`", "`time parbench run scenarios/ci.toml`, twice, then `compare`",
        f"{ci_seconds} s; two runs back to back: largest median change {largest * 100:.1f}%, "
        f"{ci_compare['regressions']} flagged"))
    return out


def table(env, probes, out_rows):
    lines = [
        f"## {env['cpu_model']}, {env['cores']} cores, "
        f"{'GPU ' + env['gpu']['name'] if env['gpu'].get('available') else 'no GPU'}, "
        f"{os.environ.get('FIGURES_DATE') or __import__('datetime').date.today().isoformat()}",
        "",
        "One run of `scripts/measured-here.sh`; medians, and ratios from the same run. "
        "Machine FMA peak " + "; ".join(probes) + ".",
        "",
        "| what | command | figure |",
        "|---|---|---|",
    ]
    lines += [f"| {w} | {c} | {f} |" for w, c, f in out_rows]
    busy = [p for p in probes if scaling(p) is not None and scaling(p) < 0.9]
    if busy:
        lines += ["", "The machine was busy during part of this run (" + "; ".join(busy) + "): "
                  "figures taken then are suspect; run the script again."]
    return "\n".join(lines)


def scaling(probe):
    """The 2-thread scaling a machine-probe line reports (`(0.99x of ideal scaling)`)."""
    m = re.search(r"\(([0-9.]+)x of ideal scaling\)", probe)
    return float(m.group(1)) if m else None


def main(out):
    report = json.load(open(os.path.join(out, "all.json")))
    ci_compare = json.load(open(os.path.join(out, "ci-compare.json")))
    all_seconds = open(os.path.join(out, "all-seconds.txt")).read().strip()
    ci_seconds = open(os.path.join(out, "ci-seconds.txt")).read().strip()
    # One numpy-SIZE.txt per size measured-here.sh ran, smallest first.
    numpy_runs = sorted(
        (int(m.group(1)), open(os.path.join(out, f)).read().splitlines())
        for f in os.listdir(out) if (m := re.fullmatch(r"numpy-(\d+)\.txt", f)))
    probes = open(os.path.join(out, "probes.txt")).read().strip().splitlines()
    bench = read_criterion(os.path.join(out, "criterion"))
    torture = open(os.path.join(out, "torture.txt")).read()
    torture_seconds = open(os.path.join(out, "torture-seconds.txt")).read().strip()
    print(table(report["environment"], probes,
                engine_rows(bench, torture, torture_seconds)
                + rows(report, all_seconds, ci_seconds, ci_compare, numpy_runs)))


def self_test():
    def run(scenario, variants, derived, parameters=None):
        """A run as a report holds it: `variants` maps a name to its median and how parbench
        prints it; `derived` a key to its value and how parbench prints it (None: a series)."""
        return {"scenario": scenario, "parameters": parameters or {},
                "variants": [{"name": n, "median_s": s, "median_display": t}
                             for n, (s, t) in variants.items()],
                "derived": {k: v for k, (v, _) in derived.items()},
                "derived_display": {k: t for k, (_, t) in derived.items() if t is not None}}
    limits = {"line": {"measured": {"one_way_s": 5e-8, "method": "m"}},
              "channel": {"measured": {"per_op_s": 2e-7, "method": "m"}}}
    report = {"environment": {"cpu_model": "CPU", "cores": 2, "gpu": {"available": False}, "limits": limits}, "runs": [
        run("async", {"sync": (1e-3, "1.000 ms"), "async": (5e-4, "500.0 µs"),
                      "products": (0.2, "200.0 ms"), "products-push-only": (1e-5, "10.00 µs")},
            {"async_speedup": (2.0, "2.00×"), "products_over_push_only_ratio": (20000.0, "20000×"),
             "handoff_p50_s": (6.5e-7, "650.0 ns"), "handoff_p99_s": (2.1e-6, "2.100 µs"),
             "async_per_op_s": (5e-7, "500.0 ns")}),
        run("matmul", {"matmul": (1.0, "1.000 s")},
            {"gflops": (150.0, "150.0 GFLOP/s"), "threads": (2.0, "2")}),
        run("cpu-gpu", {"a-alone": (1.0, "1.000 s"), "b-alone": (1.0, "1.000 s"), "parallel": (1.1, "1.100 s")},
            {"overlap_efficiency": (0.91, "0.910"), "parallel_speedup": (1.82, "1.82×")}),
        run("run-copy", {"run": (2.0, "2.000 s"), "copy": (0.02, "20.00 ms"),
                         "run-then-copy": (2.03, "2.030 s"), "overlapped": (2.02, "2.020 s")},
            {"overlapped_over_ideal_ratio": (1.0, "1.00×")}),
        run("deps", {"op-by-op": (0.01, "10.00 ms"), "parallel": (0.003, "3.000 ms")},
            {"parallel_speedup": (3.33, "3.33×"), "parallel_over_bound_ratio": (1.7, "1.70×"),
             "parallel_over_bound_ratio_min": (1.5, "1.50")}),
        run("memory", {}, {"unbounded_peak_bytes": (50 * 2**20, "50.0 MiB"),
                           "sync_per_batch_peak_bytes": (768 * 2**10, "768.0 KiB"),
                           "bounded_peak_bytes": (3 * 2**20, "3.0 MiB"), "memory_ratio": (16.7, "16.67×"),
                           "bounded_time_ratio": (1.05, "1.05×")}),
        run("hybridize", {"imperative": (3e-3, "3.000 ms"), "hybridized": (2e-3, "2.000 ms")},
            {"hybridize_speedup": (1.5, "1.50×"), "overhead_per_op_s": (4.5e-7, "450.0 ns")}),
        run("data-parallel", {"one-device": (0.6, "600.0 ms"), "ring": (0.35, "350.0 ms")},
            {"ring_samples_per_second": (14484.2, "14,484 samples/s"),
             "ring_scaling_efficiency": (0.8812, "0.881"),
             "parameter_server_scaling_efficiency": (0.851, "0.851"),
             "one_device_samples_per_second": (8219.4, "8,219 samples/s"),
             "initial_loss": (2.3211, "2.32"), "ring_final_loss": (0.07791, "0.0779")},
            {"steps": 20, "devices": 2}),
    ]}
    compare = {"regressions": 0, "rows": [{"is_time": True, "change": -0.034}, {"is_time": True, "change": 0.02}]}
    numpy = ["# numpy 2.3.5: openblas 0.3.30, kernel Zen, 2 threads",
             "round threads parbench numpy mkl p/numpy p/mkl",
             "1 1 92.0 95.0 90.0 0.97 1.02", "1 2 178.0 180.0 170.0 0.99 1.05",
             "2 1 91.0 93.0 90.0 0.98 1.01", "2 2 176.0 181.0 170.0 0.97 1.04",
             "3 1 93.0 94.0 91.0 0.99 1.02", "3 2 177.0 182.0 171.0 0.97 1.04",
             "median   1 92.0 94.0 90.0 0.98 1.02", "median   2 177.0 181.0 170.0 0.98 1.04",
             "of-peak  1 0.89-0.90 0.91-0.92 0.87-0.88", "of-peak  2 0.86-0.88 0.88-0.90 0.83-0.84"]
    # One size without the script's median lines (an older output): no row for it.
    numpy_runs = [(2000, numpy), (4000, numpy[:4])]
    bench = {"async/fresh-var/1000": 309e3, "async/fresh-var/100000": 200e5,
             "floor/boxed-closure-channel/1000": 150e3, "floor/boxed-closure-channel/100000": 100e5,
             "round_trip/push+wait_to_read": 520.0}
    torture = "noise\nengine torture: 896 random programs, 1000440 ops, all equal to the sequential interpretation\n"
    text = table(report["environment"], ["probe before: x", "probe after: y"],
                 engine_rows(bench, torture, "72.0") + rows(report, "80.1", "3.4", compare, numpy_runs))
    for want in ["sync 1.000 ms, async 500.0 µs: 2.00×", "(20000× too little)",
                 "a hop 650.0 ns (median), 2.100 µs (99th percentile)",
                 "| CPU matmul vs NumPy/OpenBLAS and MKL, 2000² | `scripts/matmul-vs-blas.sh 2000 3` | parbench / NumPy "
                 "and / MKL, medians of interleaved rounds: 1 thread 0.98× NumPy, 1.02× MKL (92 vs 94 and 90 "
                 "GFLOP/s; single rounds 0.97–0.99× NumPy; of the FMA peak: parbench 0.89-0.90, NumPy "
                 "0.91-0.92, MKL 0.87-0.88), 2 threads 0.98× NumPy, 1.04× MKL (177 vs 181 and 170 GFLOP/s; "
                 "single rounds 0.97–0.99× NumPy; of the FMA peak: parbench 0.86-0.88, NumPy 0.88-0.90, "
                 "MKL 0.83-0.84)", "(numpy 2.3.5: openblas 0.3.30, kernel Zen, 2 threads)", "largest median change 3.4%, 0 flagged",
                 "2 devices: ring 14,484 samples/s, scaling efficiency 0.881 (parameter server 0.851) "
                 "against one device's 8,219 samples/s; loss 2.32 → 0.0779 in 20 steps",
                 "150.0 GFLOP/s (2 threads)", "overlap efficiency 0.910, speed-up 1.82×",
                 "overlapped 2.020 s = 1.00× (max(run, copy) + one copy)",
                 "peak 50.0 MiB unbounded, 768.0 KiB with a wait per minibatch, 3.0 MiB bounded: "
                 "16.67× less memory for 1.05× the time",
                 "1.50×, about 450.0 ns per engine op saved",
                 "fresh vars 309 / 200 ns at 1,000 / 100,000 ops", "| same | 0.52 µs |",
                 "150 / 100 ns at 1,000 / 100,000 closures; fresh-var ops cost 2.06× / 2.00× that",
                 "(99th percentile); async per op 2.50× a closure handed to another thread through a "
                 "channel (200.0 ns each), 10.0× a cache line between the two CPUs (50.0 ns one way) "
                 "(the machine's limits, measured at the start of the run)",
                 "896 random programs, 1000440 ops, all equal to the sequential interpretation, 72.0 s", "| `parbench all` | `time parbench all` | 80.1 s"]:
        assert want in text, (want, text)
    # A debug build's report measures no limit: the row quotes none.
    debug = {"line": {"not_measured": "debug build"}, "channel": {"not_measured": "debug build"}}
    assert limits_cell({"limits": debug}, report["runs"][0]) == ""
    # A report written before the channel probe: only the line.
    assert limits_cell({"limits": {"line": limits["line"]}}, report["runs"][0]) == (
        "; async per op 10.0× a cache line between the two CPUs (50.0 ns one way) "
        "(the machine's limits, measured at the start of the run)")
    assert "4000²" not in text, text
    assert "busy" not in text, text
    busy = table(report["environment"], ["probe before: 2 threads 118 GFLOP/s (0.54x of ideal scaling)"], [])
    assert "The machine was busy during part of this run" in busy, busy
    # A report without the display fields (older than them) is refused by name, not misquoted.
    try:
        shown({"scenario": "async", "variants": [{"name": "sync", "median_s": 1.0}]}, "sync")
    except KeyError as e:
        assert "median_display" in str(e), e
    else:
        raise AssertionError("a variant without median_display was quoted")
    print("measured-here self-test: 1 passed, 0 failed")


if __name__ == "__main__":
    if sys.argv[1:] == ["self-test"]:
        self_test()
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit("usage: measured-here.py OUTPUT_DIR | self-test")
