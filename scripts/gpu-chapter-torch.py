#!/usr/bin/env python3
"""PyTorch's figures for the chapter on computational performance, on the same GPU, beside
parbench's GPU `async`, chained kernels and `hybridize` (CUDA graph) scenarios.

  python3 gpu-chapter-torch.py measure OUT.json [--iterations N] [--shape 1,2] [--layers 4]
                               [--width 64] [--batch 16] [--passes 200] [--repeats R]
  python3 gpu-chapter-torch.py self-test   # parsing, statistics, JSON writing: no torch, no GPU

float32 on cuda:0, TF32 off (as parbench computes). Each loop runs once as a warm-up, then
`repeats` times timed with time.perf_counter around the whole loop, started after a
torch.cuda.synchronize() so no earlier work leaks in; figures are medians, "samples" keeps them all.
- y = x + 1, N times, synchronizing after EACH op (every op pays launch + host round trip: the
  book's synchronous loop) against once after the loop (the host only queues launches, the GPU
  drains them behind it: asynchrony).
- N independent kernels y = x + 1 against a dependent chain y = y + 1: one stream runs both in
  order, so the ratio is what a data dependency costs when nothing waits on the host. Inputs are
  eighths, so every partial sum is exact in float32 and an untimed chain of min(N, 100000) steps
  must equal x + steps bit for bit.
- parbench's `hybridize` MLP, h = relu(h @ W + b) per layer: eager, three launches a layer
  (matmul, + b, relu), against one pass captured in a torch.cuda.CUDAGraph and replayed. As the
  PyTorch docs require, the pass is first run a few times on a side stream (lazy initialisation,
  cuBLAS workspaces, allocator pools must not happen during capture) and reads a static input
  tensor. The replay runs the same kernels, so it must equal eager exactly.
"""
import json
import os
import statistics
import sys
import tempfile
import time

DEFAULTS = {"iterations": 1000, "shape": [1, 2], "layers": 4, "width": 64, "batch": 16,
            "passes": 200, "repeats": 15}
FIGURES = ("add_one_sync_s_per_op", "add_one_async_s_per_op", "independent_kernels_s_per_kernel",
           "dependent_kernels_s_per_kernel", "mlp_eager_s_per_pass", "mlp_graph_s_per_pass")
CHAIN_CHECK_OPS = 100_000  # with inputs in eighths, every partial sum stays exact (< 2^21)
USAGE = "usage: gpu-chapter-torch.py measure OUT.json [--OPTION N ...] | self-test"


class UsageError(Exception):
    """Bad arguments: exit 2."""


class MeasureError(Exception):
    """No torch, no GPU: exit 1."""


def _shape(text):
    dims = text.replace("x", ",").split(",")
    if not 1 <= len(dims) <= 4 or not all(d.isdecimal() and int(d) >= 1 for d in dims):
        raise UsageError(f"--shape wants 1 to 4 positive integers like 1,2 or 1000x1000, not {text!r}")
    return [int(d) for d in dims]


def parse_args(argv):
    """argv without the program name -> (command, OUT path or None, parameters)."""
    if argv == ["self-test"]:
        return "self-test", None, None
    if not argv or argv[0] != "measure":
        raise UsageError(f"unknown command {' '.join(argv)!r}" if argv else "no command")
    params, positional, rest = dict(DEFAULTS), [], list(argv[1:])
    while rest:
        arg = rest.pop(0)
        if not arg.startswith("--"):
            positional.append(arg)
            continue
        name, eq, value = arg[2:].partition("=")
        if name not in DEFAULTS:
            raise UsageError(f"unknown option --{name}")
        if not eq:
            if not rest:
                raise UsageError(f"--{name} needs a value")
            value = rest.pop(0)
        if name == "shape":
            params[name] = _shape(value)
        elif value.isdecimal() and int(value) >= 1:
            params[name] = int(value)
        else:
            raise UsageError(f"--{name} wants a positive integer, not {value!r}")
    if len(positional) != 1:
        raise UsageError(f"measure wants one OUT.json, got {len(positional)}")
    return "measure", positional[0], params


def time_repeats(fn, repeats, sync, clock=time.perf_counter):
    """Warm fn up once, then the seconds of `repeats` runs of it, each started after sync()."""
    fn()
    sync()
    totals = []
    for _ in range(repeats):
        sync()
        start = clock()
        fn()  # its own synchronize is inside: the clock stops when the GPU is done
        totals.append(clock() - start)
    return totals


def ratio(num, den):
    return num / den if den else None


def build_result(params, meta, samples, checks):
    """The JSON object: metadata, the median of every figure, the ratios, checks, samples."""
    med = {key: statistics.median(samples[key]) for key in FIGURES}
    kernels = 3 * params["layers"]
    result = dict(meta, tf32=False, parameters=dict(params), repeats=params["repeats"])
    result.update(med)
    result["add_one_async_speedup"] = ratio(med["add_one_sync_s_per_op"], med["add_one_async_s_per_op"])
    result["dependent_over_independent"] = ratio(med["dependent_kernels_s_per_kernel"],
                                                 med["independent_kernels_s_per_kernel"])
    result["mlp_graph_speedup"] = ratio(med["mlp_eager_s_per_pass"], med["mlp_graph_s_per_pass"])
    result["kernels_per_pass"] = kernels
    result["launch_saved_s_per_kernel"] = (med["mlp_eager_s_per_pass"] - med["mlp_graph_s_per_pass"]) / kernels
    result["checks"] = dict(checks)
    result["samples"] = {key: list(samples[key]) for key in FIGURES}
    return result


def write_json(path, obj):
    """Write obj to path atomically: a temporary file beside it, then os.replace."""
    text = json.dumps(obj, indent=2, allow_nan=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".gpu-chapter-torch.", dir=os.path.dirname(os.path.abspath(path)))
    mask = os.umask(0)
    os.umask(mask)
    os.fchmod(fd, 0o666 & ~mask)  # as open() would create it, not mkstemp's 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return text


def cuda_measure(p):
    """-> (metadata, per-unit samples by figure, checks), measured with PyTorch on cuda:0."""
    try:
        import torch  # only here: self-test and argument errors need no torch
    except ImportError as e:
        raise MeasureError(f"PyTorch is not installed ({e})")
    if not torch.cuda.is_available():
        raise MeasureError("PyTorch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev, sync, n, passes = torch.device("cuda:0"), torch.cuda.synchronize, p["iterations"], p["passes"]
    samples, checks = {}, {}

    def timed(key, fn, units):
        samples[key] = [t / units for t in time_repeats(fn, p["repeats"], sync)]

    x = torch.rand(p["shape"], device=dev)
    xq = torch.floor(x * 8) / 8  # eighths: the chain's sums are exact

    def add_sync():
        for _ in range(n):
            y = x + 1
            sync()
        return y

    def add_async(src=x):
        for _ in range(n):
            y = src + 1
        sync()
        return y

    def chain(steps=n):
        y = xq
        for _ in range(steps):
            y = y + 1
        sync()
        return y

    timed("add_one_sync_s_per_op", add_sync, n)
    timed("add_one_async_s_per_op", add_async, n)
    timed("independent_kernels_s_per_kernel", lambda: add_async(xq), n)
    timed("dependent_kernels_s_per_kernel", chain, n)
    steps = min(n, CHAIN_CHECK_OPS)
    checks["dependent_chain_exact"] = bool(torch.equal(chain(steps), xq + steps))
    checks["dependent_chain_checked_ops"] = steps

    w = p["width"]
    hx = torch.rand(p["batch"], w, device=dev)
    layers = [(torch.rand(w, w, device=dev) / w, torch.rand(1, w, device=dev)) for _ in range(p["layers"])]

    def forward(h):
        for weight, bias in layers:
            h = torch.matmul(h, weight)
            h = h + bias
            h = torch.relu(h)
        return h

    def eager():
        for _ in range(passes):
            out = forward(hx)
        sync()
        return out

    static_x = hx.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            forward(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = forward(static_x)

    def replay():
        for _ in range(passes):
            graph.replay()
        sync()

    timed("mlp_eager_s_per_pass", eager, passes)
    timed("mlp_graph_s_per_pass", replay, passes)
    want = eager()
    replay()
    checks["graph_equals_eager"] = bool(torch.equal(static_out, want))
    checks["graph_max_abs_diff"] = (static_out - want).abs().max().item()
    meta = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0)}
    return meta, samples, checks


def measure(out_path, params, measure_fn=cuda_measure):
    try:
        meta, samples, checks = measure_fn(params)
        text = write_json(out_path, build_result(params, meta, samples, checks))
    except (MeasureError, RuntimeError, OSError, ValueError) as e:
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 1
    print(text, end="")
    return 0


def self_test():
    import contextlib
    import io

    def t_parse():
        assert parse_args(["measure", "o.json"]) == ("measure", "o.json", DEFAULTS)
        _, out, p = parse_args(["measure", "--iterations", "7", "o.json", "--shape=1000x1000", "--layers", "2",
                                "--width=8", "--batch", "3", "--passes", "5", "--repeats=4"])
        assert out == "o.json" and p == {"iterations": 7, "shape": [1000, 1000], "layers": 2, "width": 8,
                                         "batch": 3, "passes": 5, "repeats": 4}, p
        assert parse_args(["measure", "o", "--shape", "2,3,4"])[2]["shape"] == [2, 3, 4]
        assert parse_args(["self-test"])[0] == "self-test"

    def t_bad_args():
        bad = ["", "measure", "measure a b", "measure o --bogus 1", "measure o --passes", "measure o --passes 0",
               "measure o --passes -3", "measure o --width=x", "measure o --batch ²", "measure o --shape 1,,2",
               "measure o --shape 0,2", "measure o --shape=1,1,1,1,1", "self-test extra", "frobnicate"]
        for argv in bad:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                assert main(["prog"] + argv.split()) == 2, argv
            assert err.getvalue().count("\n") == 1 and err.getvalue().startswith("error: "), (argv, err.getvalue())

    def t_time_repeats():
        log, ticks = [], iter([10.0, 10.5, 20.0, 20.25, 30.0, 31.0])
        totals = time_repeats(lambda: log.append("fn"), 3, lambda: log.append("sync"), clock=lambda: next(ticks))
        assert totals == [0.5, 0.25, 1.0], totals
        assert log == ["fn", "sync"] + ["sync", "fn"] * 3, log
        assert statistics.median(totals) == 0.5 and ratio(1.0, 0.0) is None and ratio(3.0, 2.0) == 1.5

    fake_samples = {key: [(i + 1) * v for v in (3.0, 1.0, 2.0)] for i, key in enumerate(FIGURES)}
    fake_checks = {"dependent_chain_exact": True, "graph_equals_eager": True, "graph_max_abs_diff": 0.0}

    def t_build():
        r = build_result(DEFAULTS, {"torch": "t", "cuda": "c", "device": "d"}, fake_samples, fake_checks)
        assert r["add_one_sync_s_per_op"] == 2.0 and r["add_one_async_s_per_op"] == 4.0, r
        assert r["add_one_async_speedup"] == 0.5 and r["dependent_over_independent"] == 8.0 / 6.0, r
        assert r["mlp_graph_speedup"] == 10.0 / 12.0 and r["kernels_per_pass"] == 12, r
        assert r["launch_saved_s_per_kernel"] == (10.0 - 12.0) / 12, r
        assert r["samples"] == fake_samples and r["checks"] == fake_checks and r["repeats"] == 15, r
        assert r["parameters"] == DEFAULTS and r["device"] == "d" and r["tf32"] is False, r
        zero = dict(fake_samples, add_one_async_s_per_op=[0.0])
        assert build_result(DEFAULTS, {}, zero, {})["add_one_async_speedup"] is None

    def t_measure_json():
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "chapter.json")
            with open(path, "w") as f:
                f.write("old")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                assert measure(path, DEFAULTS, lambda p: ({"torch": "t"}, fake_samples, fake_checks)) == 0
            with open(path) as f:
                doc = json.load(f)
            assert json.loads(out.getvalue()) == doc and doc["mlp_eager_s_per_pass"] == 10.0, doc
            assert os.listdir(d) == ["chapter.json"], os.listdir(d)

            def no_gpu(p):
                raise MeasureError("PyTorch sees no CUDA device")
            err, other = io.StringIO(), os.path.join(d, "none.json")
            with contextlib.redirect_stderr(err):
                assert measure(other, DEFAULTS, no_gpu) == 1
            assert err.getvalue() == "error: PyTorch sees no CUDA device\n" and not os.path.exists(other)

    tests = [t_parse, t_bad_args, t_time_repeats, t_build, t_measure_json]
    failed = 0
    for test in tests:
        try:
            test()
        except Exception as e:  # report every failing test, not only the first
            failed += 1
            print(f"FAIL {test.__name__}: {type(e).__name__}: {e}", file=sys.stderr)
    print(f"gpu-chapter-torch self-test: {len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv):
    try:
        command, out_path, params = parse_args(argv[1:])
    except UsageError as e:
        print(f"error: {e} ({USAGE})", file=sys.stderr)
        return 2
    return self_test() if command == "self-test" else measure(out_path, params)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
