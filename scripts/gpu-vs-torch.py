#!/usr/bin/env python3
"""PyTorch's figures on the same GPU, and the summary that sets parbench's beside them.

Used by scripts/gpu-check.sh:

  python3 gpu-vs-torch.py measure OUT.json   # PyTorch with CUDA: matmul, D2H copy, run-then-copy
  python3 gpu-vs-torch.py summary DIR        # DIR's parbench reports + torch.json -> DIR/summary.md
  python3 gpu-vs-torch.py self-test          # the summary on synthetic reports: no torch, no GPU

`summary` exits 1 when a parbench check failed or a report is missing; the GPU goals (matmul and
copies against PyTorch, overlap) are reported as met or not, they do not change the exit code.
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


def _fmt(v, unit=""):
    return "-" if v is None else f"{v:.3g}{unit}"


# The parbench reports a GPU check writes, by file name (without .json).
REPORTS = ("matmul", "cpu-gpu", "run-copy", "async", "async-host-order", "hybridize", "memory")


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


def summarize(directory):
    """Write DIR/summary.md from the parbench reports and torch.json in DIR; return
    (markdown, all checks passed)."""
    reports = {name: _load(os.path.join(directory, f"{name}.json")) for name in REPORTS}
    torch = _load(os.path.join(directory, "torch.json")) or {}
    chapter = _load(os.path.join(directory, "torch-chapter.json")) or {}
    ok = True
    lines = ["# GPU check", ""]
    devices = _load(os.path.join(directory, "devices.json"))
    if devices:
        gpu = devices.get("gpu", {})
        lines.append(f"GPU: {gpu.get('name', '?')}, driver {gpu.get('driver', '?')}, CUDA {gpu.get('cuda', '?')}")
        for lib in gpu.get("libraries", []):
            lines.append(f"- {lib['name']} {lib['version']}: `{lib['path']}`")
        lines.append("")
    lines += ["## Checks", "", "| report | check | result |", "|---|---|---|"]
    tests, tests_ok = _tests_line(os.path.join(directory, "tests.txt"))
    ok &= tests_ok
    lines.append(f"| library tests | all pass, the GPU ones on the GPU | {tests} |")
    for name, report in reports.items():
        run = _run(report)
        if run is None:
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
    for name, passed in (chapter.get("checks") or {}).items():
        if isinstance(passed, bool):
            ok &= passed
            lines.append(f"| PyTorch | {name} | {'ok' if passed else '**FAILED**'} |")
    derived = lambda name, key: ((_run(reports[name]) or {}).get("derived") or {}).get(key)  # noqa: E731
    p_mm, t_mm = derived("matmul", "gflops"), torch.get("matmul_gflops")
    p_cp, t_cp = derived("run-copy", "copy_gbytes_per_s"), torch.get("d2h_gbytes_per_s")
    eff = derived("cpu-gpu", "overlap_efficiency")
    ideal = derived("run-copy", "overlapped_over_ideal_ratio")
    ratio = lambda p, t: (p / t) if p is not None and t else None  # noqa: E731
    rows = [
        (f"fp32 matmul {MATMUL_N}² (TF32 off)", _fmt(p_mm, " GFLOP/s"), _fmt(t_mm, " GFLOP/s"), ratio(p_mm, t_mm), ">= 0.95 × torch", lambda r: r >= 0.95),
        ("D2H copy 256 MiB, pinned", _fmt(p_cp, " GB/s"), _fmt(t_cp, " GB/s"), ratio(p_cp, t_cp), ">= 0.9 × torch", lambda r: r >= 0.9),
        ("cpu-gpu overlap efficiency", _fmt(eff), "-", eff, ">= 0.95", lambda r: r >= 0.95),
        ("run-copy overlapped / (max(run, copy) + one copy)", _fmt(ideal), _fmt(torch.get("overlapped_over_ideal_ratio")), ideal, "<= 1.05", lambda r: r <= 1.05),
    ]
    # The chapter on the GPU: y = x + 1, chains, CUDA graphs.
    p_async, t_async = derived("async", "async_per_op_s"), chapter.get("add_one_async_s_per_op")
    p_speed, t_speed = derived("async", "async_speedup"), chapter.get("add_one_async_speedup")
    p_chain, t_chain = derived("async", "chain_over_async_ratio"), chapter.get("dependent_over_independent")
    p_chain_host = derived("async-host-order", "chain_over_async_ratio")
    p_graph, t_graph = derived("hybridize", "hybridize_speedup"), chapter.get("mlp_graph_speedup")
    rows += [
        ("`async` y = x + 1 per op, asynchronous (torch / parbench time)", _fmt(p_async, " s"), _fmt(t_async, " s"), ratio(t_async, p_async), ">= 1 (no slower than torch eager)", lambda r: r >= 1.0),
        ("`async` speed-up, sync / async", _fmt(p_speed, "×"), _fmt(t_speed, "×"), p_speed, ">= 5", lambda r: r >= 5.0),
        ("`async` per op / a bare driver launch of the same kernel (same run)", _fmt(derived("async", "async_over_driver_launch_ratio"), "×"), "-", None, "(for comparison)", lambda r: True),
        ("1,000 dependent kernels / 1,000 independent (stream order)", _fmt(p_chain), _fmt(t_chain), p_chain, "<= 2", lambda r: r <= 2.0),
        ("the same with --gpu-order host (a host round trip per op)", _fmt(p_chain_host), "-", None, "(for comparison)", lambda r: True),
        ("`hybridize` CUDA-graph speed-up (parbench / torch)", _fmt(p_graph, "×"), _fmt(t_graph, "×"), ratio(p_graph, t_graph), ">= 0.9 × torch", lambda r: r >= 0.9),
    ]
    lines += ["", "## Against the goals (ratios from this run)", "", "| figure | parbench | PyTorch | ratio | goal | met |", "|---|---:|---:|---:|---|---|"]
    for figure, p, t, r, goal, met in rows:
        verdict = "-" if r is None else ("yes" if met(r) else "**no**")
        lines.append(f"| {figure} | {p} | {t} | {_fmt(r)} | {goal} | {verdict} |")
    if chapter and not torch:
        torch = chapter
    if torch:
        lines += ["", f"PyTorch {torch.get('torch', '?')} (CUDA {torch.get('cuda', '?')}) on {torch.get('device', '?')}."]
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
        text, ok = summarize(d)
        assert ok, text
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
        assert "| fp32 matmul 8192² (TF32 off) | 5e+04 GFLOP/s | 5.1e+04 GFLOP/s | 0.98 | >= 0.95 × torch | yes |" in text, text
        assert "| D2H copy 256 MiB, pinned | 20 GB/s | 25 GB/s | 0.8 | >= 0.9 × torch | **no** |" in text, text
        assert "| `async` y = x + 1 per op, asynchronous (torch / parbench time) | 2e-06 s | 3e-06 s | 1.5 |" in text, text
        assert "| `hybridize` CUDA-graph speed-up (parbench / torch) | 3× | 4× | 0.75 | >= 0.9 × torch | **no** |" in text, text
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
    print("gpu-vs-torch self-test: 1 passed, 0 failed")
    return 0


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
