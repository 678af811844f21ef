#!/usr/bin/env python3
"""PyTorch's figures on the same GPU, and the summary that sets parbench's beside them.

Used by scripts/gpu-check.sh:

  python3 gpu-vs-torch.py measure OUT.json   # PyTorch with CUDA: matmul, D2H/H2D copies, run-then-copy
  python3 gpu-vs-torch.py summary DIR        # DIR's parbench reports + PyTorch's -> DIR/summary.md
  python3 gpu-vs-torch.py self-test          # the summary on synthetic reports: no torch, no GPU

The kit runs parbench's async, hybridize and run-copy and PyTorch's measures in rounds
(DIR/round-1/, ...); a folder without round-N/ folders is one round. Each goal's ratio is taken
per round and shown as the median and range across rounds; the verdict is the median's. The
training section (round-N/data-parallel.json beside PyTorch's round-N/torch-train.json) comes
from train-vs-torch.py, which must lie beside this script.

`summary` exits 1 when a parbench check failed, an error path failed, a report is missing or
a step of the kit failed; the GPU goals are reported as met or not, they do not change the exit
code. A figure a report does not have shows "-" and no verdict.

Where the kit recorded its steps (DIR/steps.tsv: step, seconds, result, phase, cap; a step's
name is its report's path without .json), the summary expects the reports of the steps that
ran: a step the plan skipped (for the deadline, or for want of NCCL, nvcc or compute-sanitizer)
shows "skipped" and its reason, not "missing", and fails nothing; a report no step of the plan
writes is not expected. The steps, their seconds and results close the summary, the
sanitizers' verdicts among the checks.
"""
import json
import os
import re
import statistics
import sys

MATMUL_N = 8192
COPY_BYTES = 256 << 20
RUN_COPY_N = 8192
RUN_COPY_OPS = 10


def _events_ms(torch, fn, repeats, warmup=3):
    """Median milliseconds of fn() on the current stream, timed with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure(out_path):
    import torch  # only here: summary and self-test need no torch

    if not torch.cuda.is_available():
        print("error: PyTorch sees no CUDA device", file=sys.stderr)
        return 1
    # fp32 as parbench computes it: no TF32 anywhere.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda:0")

    n = MATMUL_N
    a = torch.rand(n, n, device=dev)
    b = torch.rand(n, n, device=dev)
    ms = _events_ms(torch, lambda: torch.matmul(a, b), 10)
    matmul_gflops = 2 * n**3 / (ms * 1e-3) / 1e9
    del a, b

    src = torch.empty(COPY_BYTES // 4, device=dev)
    dst = torch.empty(COPY_BYTES // 4, pin_memory=True)
    ms = _events_ms(torch, lambda: dst.copy_(src, non_blocking=True), 10)
    d2h = COPY_BYTES / (ms * 1e-3) / 1e9
    del src, dst

    src = torch.empty(COPY_BYTES // 4, pin_memory=True)
    dst = torch.empty(COPY_BYTES // 4, device=dev)
    ms = _events_ms(torch, lambda: dst.copy_(src, non_blocking=True), 10)
    h2d = COPY_BYTES / (ms * 1e-3) / 1e9
    del src, dst

    # The book's run-then-copy (section 13.3.2): products on one stream, each copied to pinned
    # host memory on another stream as soon as it is ready.
    import time

    x = torch.rand(RUN_COPY_N, RUN_COPY_N, device=dev)
    hosts = [torch.empty(RUN_COPY_N, RUN_COPY_N, pin_memory=True) for _ in range(RUN_COPY_OPS)]
    compute, copy = torch.cuda.Stream(), torch.cuda.Stream()

    def timed(fn, repeats=5):
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    ys = []

    def run():
        ys.clear()
        with torch.cuda.stream(compute):
            ys.extend(torch.matmul(x, x) for _ in range(RUN_COPY_OPS))

    def copy_all():
        with torch.cuda.stream(copy):
            for y, h in zip(ys, hosts):
                h.copy_(y, non_blocking=True)

    def overlapped():
        for h in hosts:
            with torch.cuda.stream(compute):
                y = torch.matmul(x, x)
                done = torch.cuda.Event()
                done.record(compute)
            with torch.cuda.stream(copy):
                copy.wait_event(done)
                h.copy_(y, non_blocking=True)
                y.record_stream(copy)

    run_s = timed(run)
    copy_s = timed(copy_all)
    overlapped_s = timed(overlapped)
    one_copy = copy_s / RUN_COPY_OPS
    result = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0),
        "tf32": False,
        "matmul_n": n,
        "matmul_gflops": matmul_gflops,
        "d2h_bytes": COPY_BYTES,
        "d2h_gbytes_per_s": d2h,
        "h2d_bytes": COPY_BYTES,
        "h2d_gbytes_per_s": h2d,
        "run_copy_n": RUN_COPY_N,
        "run_copy_ops": RUN_COPY_OPS,
        "run_s": run_s,
        "copy_s": copy_s,
        "overlapped_s": overlapped_s,
        "overlapped_over_ideal_ratio": overlapped_s / (max(run_s, copy_s) + one_copy),
    }
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))
    return 0


def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _run(report):
    return report["runs"][0] if report and report.get("runs") else None


def _gpu_limit(report, key, old_key):
    """One of the GPU's limits a report's environment records (`gpu_limits.measured[key]`, where
    parbench keeps the driver's floor), or in a report written before, its first run's own
    `old_key` figure (`async` measured the driver's tiers itself then); None where neither is."""
    env = report.get("environment") if isinstance(report, dict) else None
    probe = env.get("gpu_limits") if isinstance(env, dict) else None
    measured = probe.get("measured") if isinstance(probe, dict) else None
    value = measured.get(key) if isinstance(measured, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return ((_run(report) or {}).get("derived") or {}).get(old_key)


def _fmt(v, unit=""):
    return "-" if v is None else f"{v:.3g}{unit}"


# The parbench reports a GPU check writes once, by file name (without .json), and those it
# writes each round; run-copy-h2d only where the binary has `run-copy --direction`, and
# data-parallel (beside PyTorch's torch-train.json) only where `data-parallel` has `--device`.
# deps on 2 and 4 streams of the GPU where the kit ran them (older runs did not).
REPORTS = ("matmul", "cpu-gpu", "async-host-order", "memory")
OPTIONAL_REPORTS = ("deps-streams-2", "deps-streams-4")
ROUND_REPORTS = ("run-copy", "async", "hybridize")
OPTIONAL_ROUND_REPORTS = ("run-copy-h2d", "data-parallel")

# nvidia-smi's clock event (throttle) reasons, by bit; 0x1 is the idle GPU's.
THROTTLE_REASONS = {
    0x1: "GPU idle", 0x2: "applications clocks setting", 0x4: "SW power cap",
    0x8: "HW slowdown", 0x10: "sync boost", 0x20: "SW thermal slowdown",
    0x40: "HW thermal slowdown", 0x80: "HW power brake slowdown", 0x100: "display clock setting",
}


def _steps(directory):
    """The kit's steps from DIR/steps.tsv, {step: {"seconds", "result", "phase", "cap"}} in their
    order, or None where the kit recorded none (a run before steps.tsv)."""
    try:
        with open(os.path.join(directory, "steps.tsv"), errors="replace") as f:
            rows = [line.rstrip("\n").split("\t") for line in f][1:]
    except OSError:
        return None
    steps = {}
    for r in rows:
        if r and r[0]:
            r = (r + [""] * 5)[:5]
            steps[r[0]] = {"seconds": r[1], "result": r[2], "phase": r[3], "cap": r[4]}
    return steps


def _expect(steps, name, required=True):
    """What the summary expects of a report or a file the step `name` writes: "run" (it must be
    there), "skipped: why" (the plan skipped the step), or None (no step of the plan writes it).
    Without steps.tsv, `required` says (the layout before it)."""
    if steps is None:
        return "run" if required else None
    step = steps.get(name)
    if step is None:
        return None
    result = step["result"]
    return result if result.startswith("skipped") else "run"


def _step_failed(step):
    """Whether a step's result is a failure: an exit code other than 0, or a kill."""
    result = step["result"]
    return not (result == "0" or result.startswith("skipped"))


def _sanitizer_line(directory, name, step):
    """A sanitizer step's verdict: the tool's error summary, and its tests' result line."""
    result = step["result"]
    if result.startswith("skipped"):
        return result, True
    try:
        with open(os.path.join(directory, f"{name}.txt"), errors="replace") as f:
            text = f.read()
    except OSError:
        text = ""
    found = re.findall(r"(?:ERROR|RACECHECK|SYNCCHECK|INITCHECK) SUMMARY: ([^\n]*)", text)
    tests = re.findall(r"test result: (\w+)\. (\d+) passed; (\d+) failed", text)
    parts = [f"tool: {found[-1]}" if found else "no tool summary"]
    if tests:
        parts.append(f"tests: {tests[-1][1]} passed, {tests[-1][2]} failed")
    if result == "0":
        return "ok: " + "; ".join(parts), True
    cut = " (cut off at its cap)" if result in ("124", "137") else ""
    return f"**FAILED**: exit {result}{cut}; " + "; ".join(parts), False


def _tests_line(path):
    """(what the library tests' output says, whether it is a pass with no GPU test skipped)."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return "**missing**: no tests.txt", False
    results = re.findall(r"test result: (\w+)\. (\d+) passed; (\d+) failed", text)
    skipped = re.findall(r"^(\S+): skipped, no usable GPU", text, re.M)
    if not results:
        return "**no result line** in tests.txt", False
    verdict, passed, failed = results[-1]
    ok = verdict == "ok" and failed == "0" and not skipped
    detail = f"{passed} passed, {failed} failed"
    if skipped:
        detail += f", {len(skipped)} GPU tests skipped ({', '.join(skipped)})"
    return ("ok: " if ok else "**FAILED**: ") + detail, ok


def _gpu_tests_line(path):
    """(what the GPU tests' output says, whether they all ran and passed). A run cut off by
    the step's timeout has no result line: its finished tests and the ones still running are
    named."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return "**missing**: no gpu-tests.txt", False
    passed = re.findall(r"^test (\S+) \.\.\. ok$", text, re.M)
    failed = re.findall(r"^test (\S+) \.\.\. FAILED$", text, re.M)
    running = re.findall(r"^test (\S+) has been running for over", text, re.M)
    results = re.findall(r"test result: (\w+)\. (\d+) passed; (\d+) failed", text)
    detail = f"{len(passed)} passed, {len(failed)} failed"
    if failed:
        detail += f" ({', '.join(t.rsplit('::', 1)[-1] for t in failed)})"
    if not results:
        hung = [t.rsplit("::", 1)[-1] for t in running]
        detail += ", no result line (cut off" + (f"; still running: {', '.join(hung)})" if hung else ")")
        return "**FAILED**: " + detail, False
    ok = results[-1][0] == "ok" and not failed and len(passed) > 0
    return ("ok: " if ok else "**FAILED**: ") + detail, ok


def _round_dirs(directory):
    """The round folders (round-1, round-2, ... in order), or the folder itself as one round."""
    rounds = []
    for name in os.listdir(directory):
        m = re.fullmatch(r"round-(\d+)", name)
        if m and os.path.isdir(os.path.join(directory, name)):
            rounds.append((int(m.group(1)), name))
    return [name for _, name in sorted(rounds)] or [""]


def _csv_rows(path):
    """The rows of an nvidia-smi CSV (header first), or None when there is none or it is an
    error message rather than CSV."""
    try:
        with open(path, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return None
    rows = [[cell.strip() for cell in line.split(",")] for line in lines]
    if not rows or len(rows[0]) < 2:
        return None
    return rows


def _tenants(path):
    """Other compute processes on the GPU before the timed steps: their rows, or None if not
    recorded."""
    rows = _csv_rows(path)
    if rows is None or not rows[0][0].startswith("pid"):
        return None
    return [", ".join(r) for r in rows[1:] if r and r[0].isdigit()]


def _number(cell):
    m = re.match(r"[-+]?\d+(\.\d+)?", cell)
    return float(m.group(0)) if m else None


def _sampler_lines(path):
    """The clock sampler's summary: SM clock min/median/max and any non-idle throttle reason."""
    rows = _csv_rows(path)
    if rows is None:
        return ["GPU samples: none recorded"]
    header = [h.lower() for h in rows[0]]
    col = lambda word: next((i for i, h in enumerate(header) if word in h), None)  # noqa: E731
    sm, reasons, power, temp = col("clocks.sm") or col("clocks.current.sm"), col("reasons"), col("power"), col("temperature")
    data = [r for r in rows[1:] if len(r) == len(header)]
    if not data or sm is None:
        return ["GPU samples: none recorded"]
    clocks = [c for c in (_number(r[sm]) for r in data) if c is not None]
    lines = []
    if clocks:
        lines.append(f"GPU samples ({len(data)}, every 250 ms over the timed steps): SM clock "
                     f"min {min(clocks):.0f} / median {statistics.median(clocks):.0f} / max {max(clocks):.0f} MHz")
    for name, i, unit in (("power", power, "W"), ("temperature", temp, "C")):
        values = [v for v in (_number(r[i]) for r in data) if v is not None] if i is not None else []
        if values:
            lines.append(f"- {name}: median {statistics.median(values):.0f} {unit}, max {max(values):.0f} {unit}")
    seen = {}
    if reasons is not None:
        for r in data:
            try:
                bits = int(r[reasons], 16)
            except ValueError:
                continue
            for bit, what in THROTTLE_REASONS.items():
                if bits & bit and bit != 0x1:
                    seen[what] = seen.get(what, 0) + 1
    if seen:
        lines.append("- **throttled**: " + ", ".join(f"{what} in {n} of {len(data)} samples" for what, n in seen.items()))
    elif reasons is not None:
        lines.append("- no throttle reason but idle in any sample")
    return lines


def _error_paths(path):
    """The kit's error-path verdicts: [(path, verdict, detail)], or None if not recorded."""
    try:
        with open(path, errors="replace") as f:
            rows = [line.rstrip("\n").split("\t") for line in f][1:]
    except OSError:
        return None
    return [(r + ["", ""])[:3] for r in rows if r and r[0]]


def _per_pass(report, variant):
    """A `hybridize` variant's median time per pass."""
    run = _run(report) or {}
    passes = (run.get("parameters") or {}).get("passes")
    for v in run.get("variants", []):
        if v.get("name") == variant and passes and v.get("median_s") is not None:
            return v["median_s"] / passes
    return None


def _spread(values, fmt):
    """"median (min–max)" of the values there are, "-" when none."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    med = fmt(statistics.median(values))
    low, high = fmt(min(values)), fmt(max(values))
    return med if low == high else f"{med} ({low}–{high})"


def _training(directory, rounds):
    """The training section (parbench's data-parallel beside PyTorch's same job, each round's
    round-N/data-parallel.json and torch-train.json) from train-vs-torch.py beside this script:
    (markdown lines, whether its reports are there and its checks passed)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train-vs-torch.py")
    try:
        spec = importlib.util.spec_from_file_location("train_vs_torch", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (OSError, ImportError, SyntaxError) as e:
        return ["", f"## Training: **could not load** {path}: {e}"], False
    per_round = [(rd or "the run", _load(os.path.join(directory, rd, "data-parallel.json")),
                  _load(os.path.join(directory, rd, "torch-train.json"))) for rd in rounds]
    return module.section(per_round)


def summarize(directory):
    """Write DIR/summary.md from the parbench reports and PyTorch's figures in DIR (and its
    round folders); return (markdown, all checks passed)."""
    reports = {name: _load(os.path.join(directory, f"{name}.json")) for name in REPORTS + OPTIONAL_REPORTS}
    steps = _steps(directory)
    rounds = _round_dirs(directory)
    per_round = []
    for rd in rounds:
        at = lambda name: os.path.join(directory, rd, name)  # noqa: E731
        per_round.append({
            "reports": {name: _load(at(f"{name}.json")) for name in ROUND_REPORTS + OPTIONAL_ROUND_REPORTS},
            "torch": _load(at("torch.json")) or {},
            "chapter": _load(at("torch-chapter.json")) or {},
        })
    ok = True
    lines = ["# GPU check", ""]
    devices = _load(os.path.join(directory, "devices.json"))
    if devices:
        gpu = devices.get("gpu", {})
        lines.append(f"GPU: {gpu.get('name', '?')}, driver {gpu.get('driver', '?')}, CUDA {gpu.get('cuda', '?')}")
        for lib in gpu.get("libraries", []):
            lines.append(f"- {lib['name']} {lib['version']}: `{lib['path']}`")
        for g in devices.get("gpus", []):
            mark = " (opened)" if g.get("selected") else ""
            lines.append(f"- GPU {g.get('ordinal')}{mark}: {g.get('name')}, {g.get('sm_count', '?')} SMs, "
                         f"SM clock {g.get('max_sm_clock_mhz', '?')} MHz, PCI {g.get('pci_bus_id', '?')}"
                         f"{', MIG instance' if g.get('mig') else ''}")
        variables = (devices.get("cuda_env") or {}).get("variables") or {}
        if variables:
            lines.append("- CUDA environment: " + " ".join(f"{k}={v}" for k, v in sorted(variables.items())))
        lines.append("")
    try:
        with open(os.path.join(directory, "COMMIT")) as f:
            lines += [f"Kit built at commit {f.read().strip()}; {len(rounds)} round(s).", ""]
    except OSError:
        pass
    try:
        with open(os.path.join(directory, "nccl.txt"), errors="replace") as f:
            nccl = f.readline().strip()
        if nccl.startswith(("found: ", "missing: ")):
            lines += [f"NCCL: {nccl} (nccl.txt)", ""]
    except OSError:
        pass
    if steps is not None:
        failed = [n for n, st in steps.items() if _step_failed(st)]
        skipped = [f"{n} ({st['result'][len('skipped: '):] or 'skipped'})" for n, st in steps.items()
                   if st["result"].startswith("skipped")]
        lines.append(f"Steps: {len(steps)} recorded, {len(failed)} failed"
                     + (f" ({', '.join(failed)})" if failed else "")
                     + f", {len(skipped)} skipped" + (f": {'; '.join(skipped)}" if skipped else "")
                     + ". Each step with its seconds: the last section.")
        lines.append("")
    tenants = _tenants(os.path.join(directory, "compute-apps.csv"))
    if tenants:
        lines += [f"WARNING: another tenant was on the GPU before the timed steps: {'; '.join(tenants)}", ""]
    sampler = os.path.join(directory, "gpu-samples.csv")
    if os.path.exists(sampler):
        lines += _sampler_lines(sampler) + [""]
    lines += ["## Checks", "", "| report | check | result |", "|---|---|---|"]
    for step, label, check, parse in (
            ("tests", "library tests", "all pass, the GPU ones on the GPU", _tests_line),
            ("gpu-tests", "GPU tests", "every `gpu_` test runs on the GPU and passes", _gpu_tests_line),
            ("nccl-tests", "NCCL tests", "NCCL's `gpu_nccl_` tests, alone on one thread", _gpu_tests_line)):
        expect = _expect(steps, step, required=step != "nccl-tests")
        path = os.path.join(directory, f"{step}.txt")
        if expect is None and not os.path.exists(path):
            continue
        if expect is not None and expect.startswith("skipped"):
            lines.append(f"| {label} | {check} | {expect} |")
            continue
        text, passed = parse(path)
        ok &= passed
        lines.append(f"| {label} | {check} | {text} |")
    labelled = []
    for name, report in reports.items():
        labelled.append((name, report, _expect(steps, name, required=name in REPORTS)))
    for rd, r in zip(rounds, per_round):
        for name in ROUND_REPORTS + OPTIONAL_ROUND_REPORTS:
            label = f"{rd}/{name}" if rd else name
            labelled.append((label, r["reports"][name], _expect(steps, label, required=name in ROUND_REPORTS)))
    for name, report, expect in labelled:
        run = _run(report)
        if run is None:
            if expect is None:
                continue  # no step of this plan writes it
            if expect.startswith("skipped"):
                lines.append(f"| {name} | report | {expect} |")
                continue
            lines.append(f"| {name} | report | missing |")
            ok = False
            continue
        for note in run.get("notes", []):
            if note.startswith("GPU unavailable"):
                lines.append(f"| {name} | ran on the GPU | **no**: {note} |")
                ok = False
        for check in run.get("checks", []):
            passed = bool(check.get("passed"))
            ok &= passed
            lines.append(f"| {name} | {check['name']} | {'ok' if passed else '**FAILED**'}: {check.get('detail', '')} |")
    for rd, r in zip(rounds, per_round):
        for name, passed in (r["chapter"].get("checks") or {}).items():
            if isinstance(passed, bool):
                ok &= passed
                lines.append(f"| PyTorch{' ' + rd if rd else ''} | {name} | {'ok' if passed else '**FAILED**'} |")
    for path, verdict, detail in _error_paths(os.path.join(directory, "error-paths.tsv")) or []:
        failed = verdict == "FAILED"
        ok &= not failed
        shown = "**FAILED**" if failed else verdict
        lines.append(f"| error path | {path} | {shown}: {detail} |")
    expect = _expect(steps, "error-paths", required=False)
    if expect is not None and expect.startswith("skipped"):
        lines.append(f"| error paths | each one line, the right exit code, no hang | {expect} |")
    for name, step in (steps or {}).items():
        if name.startswith("sanitizer"):
            text, passed = _sanitizer_line(directory, name, step)
            ok &= passed
            lines.append(f"| compute-sanitizer | {name[len('sanitizer-'):] or name} | {text} |")

    top = lambda name, key: ((_run(reports[name]) or {}).get("derived") or {}).get(key)  # noqa: E731
    derived = lambda r, name, key: ((_run(r["reports"][name]) or {}).get("derived") or {}).get(key)  # noqa: E731
    div = lambda a, b: (a / b) if a is not None and b else None  # noqa: E731
    h2d = lambda r: derived(r, "run-copy-h2d", "h2d_gbytes_per_s") or derived(r, "run-copy", "h2d_gbytes_per_s")  # noqa: E731
    # The driver's floor: the GPU's limits in the async report's environment.
    launch = lambda r: _gpu_limit(r["reports"]["async"], "launch_s", "driver_launch_s")  # noqa: E731
    launch_wait = lambda r: _gpu_limit(r["reports"]["async"], "launch_and_wait_s", "driver_launch_and_wait_s")  # noqa: E731

    def goal(figure, p, t, ratio, text, met, unit=""):
        """A row from per-round functions: parbench's figure, PyTorch's, and their ratio."""
        ps = [p(r) for r in per_round]
        ts = [t(r) for r in per_round] if t else []
        rs = [ratio(r) for r in per_round]
        return figure, ps, ts, rs, text, met, unit

    comparison = "(for comparison)"
    mm = top("matmul", "gflops")
    ideal = top("cpu-gpu", "overlap_efficiency")
    rows = [
        goal(f"fp32 matmul {MATMUL_N}² (TF32 off), GFLOP/s", lambda r: mm, lambda r: r["torch"].get("matmul_gflops"),
             lambda r: div(mm, r["torch"].get("matmul_gflops")), ">= 0.95 × torch", lambda x: x >= 0.95),
        goal("D2H copy 256 MiB, pinned, GB/s", lambda r: derived(r, "run-copy", "copy_gbytes_per_s"),
             lambda r: r["torch"].get("d2h_gbytes_per_s"),
             lambda r: div(derived(r, "run-copy", "copy_gbytes_per_s"), r["torch"].get("d2h_gbytes_per_s")),
             ">= 0.9 × torch", lambda x: x >= 0.9),
        goal("H2D copy 256 MiB, pinned, GB/s", h2d, lambda r: r["torch"].get("h2d_gbytes_per_s"),
             lambda r: div(h2d(r), r["torch"].get("h2d_gbytes_per_s")), ">= 0.9 × torch", lambda x: x >= 0.9),
        goal("cpu-gpu overlap efficiency", lambda r: ideal, None, lambda r: ideal, ">= 0.95", lambda x: x >= 0.95),
        goal("run-copy overlapped / (max(run, copy) + one copy)",
             lambda r: derived(r, "run-copy", "overlapped_over_ideal_ratio"),
             lambda r: r["torch"].get("overlapped_over_ideal_ratio"),
             lambda r: derived(r, "run-copy", "overlapped_over_ideal_ratio"), "<= 1.05", lambda x: x <= 1.05),
        # The chapter on the GPU: y = x + 1, chains, CUDA graphs.
        goal("`async` y = x + 1 per op, asynchronous / a bare driver launch (s)",
             lambda r: derived(r, "async", "async_per_op_s"), launch,
             lambda r: div(derived(r, "async", "async_per_op_s"), launch(r)),
             "<= 1.3 × launch", lambda x: x <= 1.3),
        goal("`async` y = x + 1 per op, asynchronous, parbench / torch (s)",
             lambda r: derived(r, "async", "async_per_op_s"), lambda r: r["chapter"].get("add_one_async_s_per_op"),
             lambda r: div(derived(r, "async", "async_per_op_s"), r["chapter"].get("add_one_async_s_per_op")),
             "<= 1 × torch", lambda x: x <= 1.0),
        goal("`async` y = x + 1 per op, synchronous / a driver launch and wait (s)",
             lambda r: derived(r, "async", "sync_per_op_s"), launch_wait,
             lambda r: div(derived(r, "async", "sync_per_op_s"), launch_wait(r)),
             "<= 1.3 × launch+wait", lambda x: x <= 1.3),
        goal("`hybridize` graph pass, parbench / torch (s)", lambda r: _per_pass(r["reports"]["hybridize"], "hybridized"),
             lambda r: r["chapter"].get("mlp_graph_s_per_pass"),
             lambda r: div(_per_pass(r["reports"]["hybridize"], "hybridized"), r["chapter"].get("mlp_graph_s_per_pass")),
             "<= 1.05 × torch", lambda x: x <= 1.05),
        goal("`hybridize` eager pass, parbench / torch (s)", lambda r: _per_pass(r["reports"]["hybridize"], "imperative"),
             lambda r: r["chapter"].get("mlp_eager_s_per_pass"),
             lambda r: div(_per_pass(r["reports"]["hybridize"], "imperative"), r["chapter"].get("mlp_eager_s_per_pass")),
             "<= 1 × torch", lambda x: x <= 1.0),
        goal("`hybridize` replay: host time / GPU time", lambda r: derived(r, "hybridize", "hybridized_host_over_gpu_ratio"),
             None, lambda r: derived(r, "hybridize", "hybridized_host_over_gpu_ratio"), "<= 1.1", lambda x: x <= 1.1),
        goal("1,000 dependent kernels / 1,000 independent (stream order)",
             lambda r: derived(r, "async", "chain_over_async_ratio"), lambda r: r["chapter"].get("dependent_over_independent"),
             lambda r: derived(r, "async", "chain_over_async_ratio"), "<= 2", lambda x: x <= 2.0),
        # For comparison: the GPU's floor and the driver's tiers, and the older ratios.
        goal("the GPU's per-kernel floor: a CUDA graph's kernels (s)",
             lambda r: _gpu_limit(r["reports"]["async"], "graph_per_kernel_s", "driver_graph_per_kernel_s"),
             None, lambda r: None, comparison, None),
        goal("driver tier: launch, alloc and free (s)",
             lambda r: _gpu_limit(r["reports"]["async"], "launch_alloc_free_s", "driver_launch_alloc_free_s"),
             None, lambda r: None, comparison, None),
        goal("driver tier: launch, alloc, free and an event (s)",
             lambda r: _gpu_limit(r["reports"]["async"], "launch_alloc_free_event_s", "driver_launch_alloc_free_event_s"),
             None, lambda r: None, comparison, None),
        goal("`async` speed-up, sync / async (was: >= 5)", lambda r: derived(r, "async", "async_speedup"),
             lambda r: r["chapter"].get("add_one_async_speedup"), lambda r: derived(r, "async", "async_speedup"), comparison, None),
        goal("`hybridize` CUDA-graph speed-up, parbench / torch (was: >= 0.9 × torch)",
             lambda r: derived(r, "hybridize", "hybridize_speedup"), lambda r: r["chapter"].get("mlp_graph_speedup"),
             lambda r: div(derived(r, "hybridize", "hybridize_speedup"), r["chapter"].get("mlp_graph_speedup")), comparison, None),
        goal("the chain with --gpu-order host (a host round trip per op)", lambda r: top("async-host-order", "chain_over_async_ratio"),
             None, lambda r: None, comparison, None),
    ]
    lines += ["", f"## Against the goals (per-round ratios: median (min–max) over {len(rounds)} round(s))", "",
              "| figure | parbench | PyTorch / reference | ratio | goal | met |", "|---|---:|---:|---:|---|---|"]
    fmt = lambda v: f"{v:.3g}"  # noqa: E731
    for figure, ps, ts, rs, text, met, _unit in rows:
        values = [x for x in rs if x is not None]
        verdict = "-" if met is None or not values else ("yes" if met(statistics.median(values)) else "**no**")
        lines.append(f"| {figure} | {_spread(ps, fmt)} | {_spread(ts, fmt)} | {_spread(rs, fmt)} | {text} | {verdict} |")
    torch = next((r["torch"] for r in per_round if r["torch"]), None) or next((r["chapter"] for r in per_round if r["chapter"]), None)
    if torch:
        lines += ["", f"PyTorch {torch.get('torch', '?')} (CUDA {torch.get('cuda', '?')}) on {torch.get('device', '?')}."]
    # Training: the rounds whose training steps ran (a round the plan skipped them in says so).
    train_rounds, train_skipped = [], []
    for rd in rounds:
        label = rd or "the run"
        expects = [_expect(steps, f"{rd}/{n}" if rd else n, required=False) for n in ("data-parallel", "torch-train")]
        skipped = [e for e in expects if e is not None and e.startswith("skipped")]
        if steps is not None and skipped:
            train_skipped.append(f"| {label} | training beside PyTorch | {skipped[0]} |")
            continue
        if steps is not None and all(e is None for e in expects):
            continue
        train_rounds.append(rd)
    train_lines, train_ok = _training(directory, train_rounds)
    ok &= train_ok
    lines += train_lines
    if train_skipped:
        if train_rounds and any(line.startswith("| round | check |") for line in train_lines):
            lines += train_skipped
        else:
            lines += ["", "| round | check | result |", "|---|---|---|"] + train_skipped
    if steps is not None:
        failed_steps = [n for n, st in steps.items() if _step_failed(st)]
        ok &= not failed_steps
        lines += ["", "## Steps", "", "Each step of the kit in its order: its phase, its cap and the seconds it took "
                  "(a step gets min(its cap, the time left before the deadline's margin)).", "",
                  "| step | phase | cap (s) | seconds | result |", "|---|---|---:|---:|---|"]
        for name, st in steps.items():
            result = st["result"]
            if _step_failed(st):
                result = f"**FAILED**: {'exit ' + result if result.isdigit() else result}"
            elif result == "0":
                result = "ok"
            lines.append(f"| {name} | {st['phase']} | {st['cap']} | {st['seconds']} | {result} |")
        by_phase = {}
        for st in steps.values():
            try:
                by_phase[st["phase"]] = by_phase.get(st["phase"], 0.0) + float(st["seconds"])
            except ValueError:
                pass
        if by_phase:
            lines += ["", "Seconds by phase: " + ", ".join(f"{p or '-'} {v:.0f} s" for p, v in by_phase.items())
                      + f"; {sum(by_phase.values()):.0f} s in all."]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(directory, "summary.md"), "w") as f:
        f.write(text)
    return text, ok


def self_test():
    import tempfile

    def report(name, derived, checks, notes=()):
        return {"schema": "parbench/1", "runs": [{"scenario": name, "derived": derived, "notes": list(notes),
                                                   "checks": [{"name": c, "passed": p, "detail": "d"} for c, p in checks]}]}

    with tempfile.TemporaryDirectory() as d:
        def write(name, doc):
            with open(os.path.join(d, f"{name}.json"), "w") as f:
                json.dump(doc, f)

        write("matmul", report("matmul", {"gflops": 50000.0}, [("matches float64 reference", True)]))
        write("cpu-gpu", report("cpu-gpu", {"overlap_efficiency": 0.97}, [("ran on the intended devices", True)]))
        write("run-copy", report("run-copy", {"copy_gbytes_per_s": 20.0, "overlapped_over_ideal_ratio": 1.02},
                                 [("host copies equal the device values", True)]))
        write("torch", {"matmul_gflops": 51000.0, "d2h_gbytes_per_s": 25.0, "overlapped_over_ideal_ratio": 1.01})
        write("async", report("async", {"async_per_op_s": 2e-6, "async_speedup": 6.0, "chain_over_async_ratio": 1.1},
                              [("timed loops computed x + 1", True)]))
        write("async-host-order", report("async", {"chain_over_async_ratio": 5.0}, [("timed loops computed x + 1", True)]))
        write("hybridize", report("hybridize", {"hybridize_speedup": 3.0}, [("replay gives identical results", True)]))
        write("memory", report("memory", {}, [("bounded stays within its minibatches' bytes", True)]))
        write("torch-chapter", {"add_one_async_s_per_op": 3e-6, "add_one_async_speedup": 4.0,
                                "dependent_over_independent": 1.0, "mlp_graph_speedup": 4.0,
                                "checks": {"graph_equals_eager": True, "dependent_chain_exact": True}})
        tests = os.path.join(d, "tests.txt")
        with open(tests, "w") as f:
            f.write("running 3 tests\ntest result: ok. 3 passed; 0 failed; 0 ignored\n")
        gpu_tests = os.path.join(d, "gpu-tests.txt")
        passing = "running 2 tests\ntest a::gpu_a ... ok\ntest b::gpu_b ... ok\ntest result: ok. 2 passed; 0 failed\n"
        with open(gpu_tests, "w") as f:
            f.write("running 2 tests\ntest a::gpu_a ... ok\ntest b::gpu_b has been running for over 60 seconds\n")
        text, ok = summarize(d)
        assert not ok and "1 passed, 0 failed, no result line (cut off; still running: gpu_b)" in text, text
        with open(gpu_tests, "w") as f:
            f.write(passing)
        text, ok = summarize(d)
        assert ok, text
        assert "| GPU tests | every `gpu_` test runs on the GPU and passes | ok: 2 passed, 0 failed |" in text, text
        assert "| library tests | all pass, the GPU ones on the GPU | ok: 3 passed, 0 failed |" in text, text
        # A skipped GPU test fails the check even when the harness says ok.
        with open(tests, "w") as f:
            f.write("gpu_copy: skipped, no usable GPU (no driver)\ntest result: ok. 3 passed; 0 failed\n")
        text, ok = summarize(d)
        assert not ok and "1 GPU tests skipped (gpu_copy)" in text, text
        os.remove(tests)
        text, ok = summarize(d)
        assert not ok and "no tests.txt" in text, text
        with open(tests, "w") as f:
            f.write("running 3 tests\ntest result: ok. 3 passed; 0 failed; 0 ignored\n")
        text, ok = summarize(d)
        assert ok, text
        assert "| fp32 matmul 8192² (TF32 off), GFLOP/s | 5e+04 | 5.1e+04 | 0.98 | >= 0.95 × torch | yes |" in text, text
        assert "| D2H copy 256 MiB, pinned, GB/s | 20 | 25 | 0.8 | >= 0.9 × torch | **no** |" in text, text
        assert "| `async` y = x + 1 per op, asynchronous, parbench / torch (s) | 2e-06 | 3e-06 | 0.667 | <= 1 × torch | yes |" in text, text
        # A figure no report has: "-" and no verdict, not a failure.
        assert "| `hybridize` replay: host time / GPU time | - | - | - | <= 1.1 | - |" in text, text
        assert "| `hybridize` CUDA-graph speed-up, parbench / torch (was: >= 0.9 × torch) | 3 | 4 | 0.75 | (for comparison) | - |" in text, text
        assert "| 1,000 dependent kernels / 1,000 independent (stream order) | 1.1 | 1 | 1.1 | <= 2 | yes |" in text, text
        # A failed check, a CPU fallback and a missing report each fail the summary.
        write("matmul", report("matmul", {"gflops": 1.0}, [("matches float64 reference", False)]))
        text, ok = summarize(d)
        assert not ok and "**FAILED**" in text, text
        write("matmul", report("matmul", {"gflops": 1.0}, [], notes=["GPU unavailable: no driver; using cpu:0"]))
        text, ok = summarize(d)
        assert not ok and "ran on the GPU | **no**" in text, text
        os.remove(os.path.join(d, "matmul.json"))
        text, ok = summarize(d)
        assert not ok and "| matmul | report | missing |" in text, text
    _self_test_rounds(report)
    _self_test_steps(report)
    print("gpu-vs-torch self-test: 3 passed, 0 failed")
    return 0


def _self_test_rounds(report):
    """The kit's layout: round folders, the GPU's state, the error paths."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        def write(name, doc):
            os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
            with open(os.path.join(d, name), "w") as f:
                f.write(doc if isinstance(doc, str) else json.dumps(doc))

        write("tests.txt", "running 3 tests\ntest result: ok. 3 passed; 0 failed; 0 ignored\n")
        write("gpu-tests.txt", "running 1 test\ntest a::gpu_a ... ok\ntest result: ok. 1 passed; 0 failed\n")
        write("COMMIT", "abc1234-dirty\n")
        write("matmul.json", report("matmul", {"gflops": 50000.0}, [("matches float64 reference", True)]))
        write("cpu-gpu.json", report("cpu-gpu", {"overlap_efficiency": 0.97}, []))
        write("async-host-order.json", report("async", {"chain_over_async_ratio": 5.0}, []))
        write("memory.json", report("memory", {}, []))
        hyb = lambda imp, gr: dict(report("hybridize", {"hybridize_speedup": imp / gr}, [("replay equal", True)]),  # noqa: E731
                                   runs=[{"scenario": "hybridize", "parameters": {"passes": 100}, "checks": [], "notes": [],
                                          "derived": {"hybridize_speedup": imp / gr},
                                          "variants": [{"name": "imperative", "median_s": imp},
                                                       {"name": "hybridized", "median_s": gr}]}])
        # Three rounds: async per op 2, 3, 4 µs against a 2.5 µs launch; PyTorch 3 µs. The driver's
        # floor is the GPU's limits in the report's environment; round 3's report is one written
        # before, with the floor among async's own figures.
        for r, per_op in ((1, 2e-6), (2, 3e-6), (3, 4e-6)):
            rd = f"round-{r}"
            floor = {"launch_s": 2.5e-6, "launch_and_wait_s": 9e-6, "graph_per_kernel_s": 1e-6,
                     "launch_alloc_free_s": 3e-6, "launch_alloc_free_event_s": 3.5e-6}
            figures = {"async_per_op_s": per_op, "sync_per_op_s": 10e-6, "async_speedup": 5.0,
                       "chain_over_async_ratio": 1.0}
            if r == 3:
                doc = report("async", dict(figures, **{f"driver_{k}": v for k, v in floor.items()}), [("x + 1", True)])
            else:
                doc = dict(report("async", figures, [("x + 1", True)]),
                           environment={"gpu_limits": {"measured": floor}})
            write(f"{rd}/async.json", doc)
            write(f"{rd}/hybridize.json", hyb(0.01, 0.002))
            write(f"{rd}/run-copy.json", report("run-copy", {"copy_gbytes_per_s": 24.0, "overlapped_over_ideal_ratio": 1.0}, []))
            write(f"{rd}/run-copy-h2d.json", report("run-copy", {"h2d_gbytes_per_s": 20.0}, []))
            write(f"{rd}/torch.json", {"matmul_gflops": 50000.0, "d2h_gbytes_per_s": 25.0, "h2d_gbytes_per_s": 25.0})
            write(f"{rd}/torch-chapter.json", {"add_one_async_s_per_op": 3e-6, "mlp_eager_s_per_pass": 1e-4,
                                               "mlp_graph_s_per_pass": 2e-5, "checks": {"graph_equals_eager": True}})
            # Training: parbench 0.9, 1.0, 1.1 × PyTorch eager's 1e6 samples/s; its graph 0.95 × 2e6.
            job = {"layers": [784, 1024, 1024, 10], "batch": 512, "steps": 20, "samples": 8192, "lr": 0.1}
            write(f"{rd}/data-parallel.json", {"runs": [{"scenario": "data-parallel", "parameters": dict(job, devices=2),
                                                         "checks": [{"name": "graph equals eager", "passed": True, "detail": "d"}],
                                                         "notes": [], "derived": {
                "initial_loss": 2.3, "one_device_samples_per_second": (0.8 + r / 10) * 1e6,
                "one_device_graph_samples_per_second": 1.9e6, "one_device_final_loss": 1.2,
                "one_device_graph_final_loss": 1.2, "one_device_loss_curve": [[19.0, 1.25, 0.1]]}}]})
            write(f"{rd}/torch-train.json", {"parameters": job, "initial_loss": 2.3, "eager_samples_per_second": 1e6,
                                             "graph_samples_per_second": 2e6, "eager_final_loss": 1.2,
                                             "graph_final_loss": 1.2, "eager_loss_curve": [[19.0, 1.25, 0.05]],
                                             "checks": {"graph_equals_eager": True}})
        write("compute-apps.csv", "pid, process_name, used_gpu_memory [MiB]\n4242, python3, 1024 MiB\n")
        write("gpu-samples.csv", "timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], "
                                 "temperature.gpu, clocks_event_reasons.active, utilization.gpu [%]\n"
                                 "t, 1980 MHz, 3201 MHz, 300.5 W, 40, 0x0000000000000001, 0 %\n"
                                 "t, 1500 MHz, 3201 MHz, 690.0 W, 70, 0x0000000000000004, 100 %\n"
                                 "t, 1755 MHz, 3201 MHz, 500.0 W, 60, 0x0000000000000000, 100 %\n")
        write("error-paths.tsv", "path\tverdict\tdetail\nhidden-gpu\tok\texit 2, 1 line(s): error: x\n"
                                 "injected-fault\tnot built\tno PARBENCH_GPU_INJECT_FAULT\n")
        text, ok = summarize(d)
        assert ok, text
        assert "Kit built at commit abc1234-dirty; 3 round(s)." in text, text
        assert "WARNING: another tenant was on the GPU before the timed steps: 4242, python3, 1024 MiB" in text, text
        assert "SM clock min 1500 / median 1.76e+03" not in text and "SM clock min 1500 / median 1755 / max 1980 MHz" in text, text
        assert "- **throttled**: SW power cap in 1 of 3 samples" in text, text
        assert "| round-2/async | x + 1 | ok: d |" in text, text
        assert "| error path | injected-fault | not built: no PARBENCH_GPU_INJECT_FAULT |" in text, text
        # Per-round ratios: 0.8, 1.2, 1.6 of the launch -> median 1.2, met; against torch 0.667..1.33.
        assert "| `async` y = x + 1 per op, asynchronous / a bare driver launch (s) | 3e-06 (2e-06–4e-06) | 2.5e-06 | 1.2 (0.8–1.6) | <= 1.3 × launch | yes |" in text, text
        assert "| `async` y = x + 1 per op, asynchronous, parbench / torch (s) | 3e-06 (2e-06–4e-06) | 3e-06 | 1 (0.667–1.33) | <= 1 × torch | yes |" in text, text
        assert "| `async` y = x + 1 per op, synchronous / a driver launch and wait (s) | 1e-05 | 9e-06 | 1.11 | <= 1.3 × launch+wait | yes |" in text, text
        assert "| `hybridize` graph pass, parbench / torch (s) | 2e-05 | 2e-05 | 1 | <= 1.05 × torch | yes |" in text, text
        assert "| `hybridize` eager pass, parbench / torch (s) | 0.0001 | 0.0001 | 1 | <= 1 × torch | yes |" in text, text
        assert "| H2D copy 256 MiB, pinned, GB/s | 20 | 25 | 0.8 | >= 0.9 × torch | **no** |" in text, text
        assert "| the GPU's per-kernel floor: a CUDA graph's kernels (s) | 1e-06 | - | - | (for comparison) | - |" in text, text
        assert "| driver tier: launch, alloc, free and an event (s) | 3.5e-06 | - | - | (for comparison) | - |" in text, text
        assert "| training samples/s, eager: one-device / PyTorch eager | 1e+06 (9e+05–1.1e+06) | 1e+06 | 1 (0.9–1.1) | >= 1 × torch | yes |" in text, text
        assert "| training samples/s, CUDA graph: one-device-graph / torch.cuda.CUDAGraph | 1.9e+06 | 2e+06 | 0.95 | >= 0.95 × torch | yes |" in text, text
        assert "| loss curve's last point, eager | 1.25 | 1.25 | 1 | (same job) | - |" in text, text
        assert "| round-3/data-parallel | graph equals eager | ok: d |" in text, text
        # PyTorch on another job fails the summary; so does a round without its training reports.
        write("round-2/torch-train.json", {"parameters": dict(job, steps=10), "checks": {}})
        text, ok = summarize(d)
        assert not ok and "| round-2 | same job: layers, batch, steps, samples, lr | **FAILED**: parbench" in text, text
        os.remove(os.path.join(d, "round-2", "torch-train.json"))
        os.remove(os.path.join(d, "round-2", "data-parallel.json"))
        text, ok = summarize(d)
        assert not ok and "| round-2 | parbench's data-parallel report | **missing** |" in text, text
        for r in (1, 3):
            os.remove(os.path.join(d, f"round-{r}", "torch-train.json"))
            os.remove(os.path.join(d, f"round-{r}", "data-parallel.json"))
        text, ok = summarize(d)
        assert ok and "No training rounds recorded" in text, text
        # A failed error path, and a report missing from one round, each fail the summary.
        write("error-paths.tsv", "path\tverdict\tdetail\nhidden-gpu\tFAILED\twanted exit 2\n")
        text, ok = summarize(d)
        assert not ok and "| error path | hidden-gpu | **FAILED**: wanted exit 2 |" in text, text
        os.remove(os.path.join(d, "error-paths.tsv"))
        assert summarize(d)[1]
        os.remove(os.path.join(d, "round-2", "hybridize.json"))
        text, ok = summarize(d)
        assert not ok and "| round-2/hybridize | report | missing |" in text, text


def _self_test_steps(report):
    """A first run's layout with steps.tsv: skipped steps show "skipped", reports no step of the
    plan writes are not expected, the sanitizers' verdicts and the steps table are there."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        def write(name, doc):
            os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
            with open(os.path.join(d, name), "w") as f:
                f.write(doc if isinstance(doc, str) else json.dumps(doc))

        def steps(rows):
            write("steps.tsv", "step\tseconds\tresult\tphase\tcap\n"
                  + "".join(f"{n}\t{sec}\t{res}\t{ph}\t{cap}\n" for n, sec, res, ph, cap in rows))

        rows = [("state", "1.2", "0", "A", "6"), ("locate-nccl", "0.3", "0", "A", "4"),
                ("tests", "2.0", "0", "A", "10"), ("gpu-tests", "9.5", "0", "A", "24"),
                ("nccl-tests", "0", "skipped: no NCCL: libnccl.so.2 not found (see nccl.txt)", "A", ""),
                ("error-paths", "6.1", "0", "A", "16"), ("deps-streams-2", "3.0", "0", "A", "10"),
                ("deps-streams-4", "0", "skipped: deadline", "A", "10"),
                ("round-1/data-parallel", "20.0", "0", "A", "40"), ("round-1/torch-train", "14.0", "0", "A", "35"),
                ("memory", "0", "skipped: deadline", "A", "8"), ("round-1/hybridize", "3.0", "0", "A", "8"),
                ("round-1/async", "3.1", "0", "A", "8"), ("matmul", "4.0", "0", "A", "8"),
                ("sanitizer-memcheck-fixed", "8.0", "0", "B", "12"),
                ("sanitizer-memcheck-new", "30.0", "0", "B", "33"),
                ("sanitizer-initcheck-new", "0", "skipped: deadline", "B", "18"),
                ("round-2/async", "3.0", "0", "C", "8"), ("round-2/hybridize", "3.0", "0", "C", "8"),
                ("round-2/data-parallel", "0", "skipped: deadline", "C", "40"),
                ("round-2/torch-train", "0", "skipped: deadline", "C", "35")]
        steps(rows)
        write("nccl.txt", "missing: libnccl.so.2 is in none of 12 places searched\n")
        write("tests.txt", "running 3 tests\ntest result: ok. 3 passed; 0 failed; 0 ignored\n")
        write("gpu-tests.txt", "running 1 test\ntest a::gpu_a ... ok\ntest result: ok. 1 passed; 0 failed\n")
        write("error-paths.tsv", "path\tverdict\tdetail\nhidden-gpu\tok\texit 2, 1 line(s): error: x\n")
        write("matmul.json", report("matmul", {"gflops": 50000.0}, [("matches float64 reference", True)]))
        write("deps-streams-2.json", report("deps", {}, [("2 streams equal op by op, bit for bit", True)]))
        for rd in ("round-1", "round-2"):
            write(f"{rd}/async.json", report("async", {"async_per_op_s": 2e-6}, [("x + 1", True)]))
            write(f"{rd}/hybridize.json", report("hybridize", {}, [("replay equal", True)]))
        job = {"layers": [784, 1024, 1024, 10], "batch": 512, "steps": 20, "samples": 8192, "lr": 0.1}
        write("round-1/data-parallel.json", {"runs": [{"scenario": "data-parallel", "parameters": dict(job, devices=1),
                                                       "checks": [{"name": "one-device equals host SGD", "passed": True,
                                                                   "detail": "d"}], "notes": [],
                                                       "derived": {"initial_loss": 2.3, "one_device_final_loss": 1.2,
                                                                   "one_device_graph_final_loss": 1.2,
                                                                   "one_device_samples_per_second": 1e6}}]})
        write("round-1/torch-train.json", {"parameters": job, "initial_loss": 2.3, "eager_final_loss": 1.2,
                                           "graph_final_loss": 1.2, "eager_samples_per_second": 1e6,
                                           "checks": {"graph_equals_eager": True}})
        write("sanitizer-memcheck-fixed.txt", "test result: ok. 3 passed; 0 failed\n========= LEAK SUMMARY: 0 bytes\n"
                                              "========= ERROR SUMMARY: 0 errors\n")
        write("sanitizer-memcheck-new.txt", "test result: ok. 8 passed; 0 failed\n========= ERROR SUMMARY: 0 errors\n")
        text, ok = summarize(d)
        assert ok, text
        assert "missing" not in text.replace("missing: libnccl", ""), text
        for row in ("| memory | report | skipped: deadline |", "| deps-streams-4 | report | skipped: deadline |",
                    "| deps-streams-2 | 2 streams equal op by op, bit for bit | ok: d |",
                    "| NCCL tests | NCCL's `gpu_nccl_` tests, alone on one thread | skipped: no NCCL: libnccl.so.2 not found (see nccl.txt) |",
                    "| round-2 | training beside PyTorch | skipped: deadline |",
                    "| round-1/data-parallel | one-device equals host SGD | ok: d |",
                    "| compute-sanitizer | memcheck-fixed | ok: tool: 0 errors; tests: 3 passed, 0 failed |",
                    "| compute-sanitizer | initcheck-new | skipped: deadline |",
                    "| memory | A | 8 | 0 | skipped: deadline |", "| round-1/async | A | 8 | 3.1 | ok |",
                    "NCCL: missing: libnccl.so.2 is in none of 12 places searched (nccl.txt)",
                    "Steps: 21 recorded, 0 failed, 6 skipped: nccl-tests (no NCCL: libnccl.so.2 not found (see nccl.txt)); "
                    "deps-streams-4 (deadline); memory (deadline)"):
            assert row in text, (row, text)
        # Reports no step of this plan writes are not expected: no cpu-gpu, no run-copy.
        assert "cpu-gpu" not in text.split("## Against")[0] and "run-copy |" not in text, text
        assert "Seconds by phase: A 66 s, B 38 s, C 6 s; 110 s in all." in text, text
        # A sanitizer's errors, a step cut off, a step that ran without its report: each fails.
        write("sanitizer-memcheck-new.txt", "test result: ok. 8 passed; 0 failed\n========= ERROR SUMMARY: 2 errors\n")
        rows[15] = ("sanitizer-memcheck-new", "30.0", "99", "B", "33")
        steps(rows)
        text, ok = summarize(d)
        assert not ok and "| compute-sanitizer | memcheck-new | **FAILED**: exit 99; tool: 2 errors; tests: 8 passed, 0 failed |" in text, text
        assert "| sanitizer-memcheck-new | B | 33 | 30.0 | **FAILED**: exit 99 |" in text, text
        rows[15] = ("sanitizer-memcheck-new", "33.0", "124", "B", "33")
        rows[3] = ("gpu-tests", "2.0", "killed: SIGTERM", "A", "24")
        steps(rows)
        text, ok = summarize(d)
        assert not ok and "exit 124 (cut off at its cap)" in text and "| gpu-tests | A | 24 | 2.0 | **FAILED**: killed: SIGTERM |" in text, text
        rows[15], rows[3] = ("sanitizer-memcheck-new", "30.0", "0", "B", "33"), ("gpu-tests", "9.5", "0", "A", "24")
        steps(rows)
        write("sanitizer-memcheck-new.txt", "========= ERROR SUMMARY: 0 errors\n")
        assert summarize(d)[1]
        os.remove(os.path.join(d, "round-1", "async.json"))
        text, ok = summarize(d)
        assert not ok and "| round-1/async | report | missing |" in text, text


def main(argv):
    if len(argv) == 3 and argv[1] == "measure":
        return measure(argv[2])
    if len(argv) == 3 and argv[1] == "summary":
        text, ok = summarize(argv[2])
        print(text)
        return 0 if ok else 1
    if len(argv) == 2 and argv[1] == "self-test":
        return self_test()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
