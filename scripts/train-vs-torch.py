#!/usr/bin/env python3
"""PyTorch on parbench's `data-parallel` training job, on the same GPU, and the summary that
sets the two side by side.

  python3 train-vs-torch.py measure OUT.json [--steps N] [--batch B] [--layers 784x1024x1024x10]
                            [--samples S] [--lr LR] [--repeats R]
  python3 train-vs-torch.py check-against PARBENCH_BINARY   # the port against a real parbench run
  python3 train-vs-torch.py summarize PARBENCH.json TORCH.json [PARBENCH.json TORCH.json ...]
  python3 train-vs-torch.py self-test   # the port, parsing, statistics, JSON, summary: no torch, no GPU

The job is parbench's, to the bit where it can be: the seeded data and initial parameters of
src/scenario/data_parallel/mlp.rs (`Dataset::new`, `Layers::initial_parameters`, seed 20, the
splitmix64 `uniform` of src/device/cpu.rs) are ported here, in pure Python (and with NumPy when
it is there: the same float32 operations, bit for bit); step s trains on rows s·batch ..
s·batch + batch − 1 modulo the samples; the loss is the mean softmax cross-entropy over the
batch; the update is plain SGD, p −= lr · g. The MLP is ReLU hidden layers with `x @ W + b`,
W stored fan_in × fan_out.

`measure` runs it in PyTorch, float32 on cuda:0, TF32 off:
- eager: forward, loss, backward (autograd), SGD under torch.no_grad() (torch._foreach_add_,
  what torch.optim.SGD does on CUDA; a loop of add_ where it is missing), the loss read back
  once a step with .item(), as parbench reads its loss;
- graph: the same step captured whole in a torch.cuda.CUDAGraph as the PyTorch docs capture a
  training step: warmed up a few times on a side stream, static input and target tensors the
  batch is copied into before each replay, the gradients set to None before the capture so
  backward allocates them in the graph's pool, the SGD update inside the capture, the loss kept
  in a static tensor and read back after each replay.
Each timed run starts from the initial parameters (copied in, as parbench's runs load them);
eager and graph runs alternate, one warm-up each, then `repeats` of each; samples/s is
steps × batch / the median run. Before timing, the small job below is trained both ways and
must give parbench's own figures (initial loss, every step's loss, final loss).

`summarize` (and gpu-vs-torch.py's summary, which imports `section` from here) sets parbench's
`data-parallel --device cuda` report beside this script's, round by round: samples/s of
one-device / PyTorch eager (goal >= 1.0) and of one-device-graph / PyTorch's CUDA graph (goal
>= 0.95), as the median and range of the per-round ratios, and the loss curves' final values;
it exits 1 when a report is missing, a check failed, or the two did not train the same job.
"""
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from array import array

# src/scenario/data_parallel/mod.rs: the seed of the data and the initial parameters, and the
# rows the initial and final losses are measured on (the first ones).
SEED = 20
EVAL_ROWS = 1024
# parbench's data-parallel defaults: the job both sides train.
DEFAULTS = {"layers": [784, 1024, 1024, 10], "batch": 512, "steps": 20, "samples": 8192, "lr": 0.1,
            "repeats": 15}
JOB_KEYS = ("layers", "batch", "steps", "samples", "lr")
# A job small enough for pure Python, whose batches wrap around the samples mid-batch (step 10
# takes rows 480..499 and 0..27). parbench's figures for it, from a real run:
#   parbench data-parallel --json --layers 16x24x4 --samples 500 --batch 48 --steps 12 --lr 0.1
# (initial_loss, one_device_final_loss, and one_device_loss_curve's losses; --devices 1 or the
# default 2 give the same one-device figures).
CHECK_JOB = {"layers": [16, 24, 4], "batch": 48, "steps": 12, "samples": 500, "lr": 0.1}
PARBENCH_CHECK = {
    "initial_loss": 1.394161587357521,
    "final_loss": 1.1964468426704407,
    "curve": [1.3872821641465027, 1.3542698758343856, 1.3616696844498317, 1.4330798362692196,
              1.3222651034593582, 1.2892625716825326, 1.2571442872285843, 1.322314480940501,
              1.1474380493164062, 1.3403523626426856, 1.1890484901765983, 1.199970333526532],
}
# Relative differences accepted between two computations of the same loss in float32 (another
# summation order): the pure-Python port (float64 sums of the float32 data) differs from
# parbench's figures above by under 1e-7.
LOSS_TOLERANCE = 1e-5
# parbench against PyTorch after the whole default job: summation orders differ on every
# product, and ReLU's kinks let that grow a little over the steps (parbench's own devices agree
# within 2e-5 of the parameters' norm, src/scenario/data_parallel/training.rs). The default job
# trained with NumPy's float32 products from this port ended 3.8e-7 from a CPU run of parbench.
FINAL_TOLERANCE = 1e-4
AGREEMENT = 2e-5
CURVE_POINTS = 200  # parbench thins its stored curves to this many points
GOALS = {"eager": 1.0, "graph": 0.95}
USAGE = ("usage: train-vs-torch.py measure OUT.json [--OPTION VALUE ...] | check-against PARBENCH_BINARY "
         "| summarize PARBENCH.json TORCH.json [...] | self-test")


class UsageError(Exception):
    """Bad arguments: exit 2."""


class MeasureError(Exception):
    """No torch, no GPU, no parbench: exit 1."""


# ---- the port of parbench's seeded job -----------------------------------------------------

MASK = (1 << 64) - 1


def splitmix64(z):
    """src/device/cpu.rs's splitmix64, on Python ints modulo 2^64."""
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def uniform(n, seed):
    """src/device/cpu.rs's `uniform`: element i is splitmix64(splitmix64(seed) ^ i)'s 24 high
    bits / 2^24, exact in float32."""
    key = splitmix64(seed & MASK)
    scale = 1.0 / (1 << 24)
    return [(splitmix64(key ^ i) >> 40) * scale for i in range(n)]


def f32(values):
    """The values rounded to float32 (an array('f') stores each as the nearest float32).

    An operation on float32 inputs done in float64 and rounded once to float32 is the float32
    operation's result for +, −, ×, / and sqrt (float64 carries more than 2 × 24 + 2 bits), so
    each float32 step of the Rust code is one rounding here."""
    return array("f", values)


def dataset(samples, inputs, classes, seed=SEED):
    """`Dataset::new`: (row-major samples × inputs float32 array, labels)."""
    centroids = uniform(classes * inputs, seed)
    pick = f32(u * classes for u in uniform(samples, seed ^ 0x5EED))
    labels = [min(int(v), classes - 1) for v in pick]
    noise = uniform(samples * inputs, (seed + 1) & MASK)
    # centre = c - 0.5 and n - 0.5 are exact; 1.5 * (n - 0.5) is rounded, then the sum.
    spread = f32(1.5 * (n - 0.5) for n in noise)
    x = f32(centroids[labels[i // inputs] * inputs + i % inputs] - 0.5 + spread[i]
            for i in range(samples * inputs))
    return x, labels


def glorot_bound(fan_in, fan_out):
    return f32([math.sqrt(f32([6.0 / (fan_in + fan_out)])[0])])[0]


def initial_parameters(layers, seed=SEED):
    """`Layers::initial_parameters`: per layer (W as a row-major fan_in × fan_out float32
    array, b as zeros); layer l's weights from uniform(seed + l)."""
    params = []
    for l, (fan_in, fan_out) in enumerate(zip(layers, layers[1:])):
        a = glorot_bound(fan_in, fan_out)
        w = f32((2.0 * u - 1.0) * a for u in uniform(fan_in * fan_out, (seed + l) & MASK))
        params.append((w, array("f", bytes(4 * fan_out))))
    return params


def batch_rows(step, batch, samples):
    """The rows step `step` trains on: the batches walk through the samples, wrapping."""
    return [(step * batch + k) % samples for k in range(batch)]


def _splitmix64_np(np, z):
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def uniform_np(np, n, seed):
    key = np.uint64(splitmix64(seed & MASK))
    bits = _splitmix64_np(np, key ^ np.arange(n, dtype=np.uint64)) >> np.uint64(40)
    return bits.astype(np.float32) / np.float32(1 << 24)


def dataset_np(np, samples, inputs, classes, seed=SEED):
    """`dataset` with NumPy's float32 operations (the same ones, bit for bit)."""
    centroids = uniform_np(np, classes * inputs, seed).reshape(classes, inputs)
    pick = uniform_np(np, samples, seed ^ 0x5EED) * np.float32(classes)
    labels = np.minimum(pick.astype(np.int64), classes - 1)
    noise = uniform_np(np, samples * inputs, (seed + 1) & MASK).reshape(samples, inputs)
    x = (centroids[labels] - np.float32(0.5)) + np.float32(1.5) * (noise - np.float32(0.5))
    return x.astype(np.float32), labels


def initial_parameters_np(np, layers, seed=SEED):
    params = []
    for l, (fan_in, fan_out) in enumerate(zip(layers, layers[1:])):
        a = np.float32(glorot_bound(fan_in, fan_out))
        u = uniform_np(np, fan_in * fan_out, (seed + l) & MASK)
        w = ((np.float32(2.0) * u - np.float32(1.0)) * a).reshape(fan_in, fan_out)
        params.append((w.astype(np.float32), np.zeros(fan_out, dtype=np.float32)))
    return params


def _forward(layers, params, x, rows):
    """Activations of every layer (input first) and the logits, in float64."""
    d = layers[0]
    h = [list(x[i * d:(i + 1) * d]) for i in rows]
    acts = [h]
    for l, (w, b) in enumerate(params):
        fan_in, fan_out = layers[l], layers[l + 1]
        cols = [w[j::fan_out] for j in range(fan_out)]  # W's columns
        last = l + 1 == len(params)
        out = []
        for row in h:
            z = [sum(a * c for a, c in zip(row, col)) + b[j] for j, col in enumerate(cols)]
            out.append(z if last else [v if v > 0.0 else 0.0 for v in z])
        h = out
        acts.append(h)
    return acts


def _softmax_loss(logits, labels, scale):
    """(summed cross-entropy / scale, its gradient by the logits)."""
    loss, delta = 0.0, []
    for z, y in zip(logits, labels):
        top = max(z)
        e = [math.exp(v - top) for v in z]
        total = sum(e)
        loss += math.log(total) + top - z[y]
        g = [v / total / scale for v in e]
        g[y] -= 1.0 / scale
        delta.append(g)
    return loss / scale, delta


def mean_loss(layers, params, x, labels, rows):
    acts = _forward(layers, params, x, rows)
    return _softmax_loss(acts[-1], [labels[i] for i in rows], float(len(rows)))[0]


def gradient(layers, params, x, labels, rows):
    """(mean loss over the rows, per layer (dW, db) as flat lists): mlp.rs's `gradient`."""
    acts = _forward(layers, params, x, rows)
    loss, delta = _softmax_loss(acts[-1], [labels[i] for i in rows], float(len(rows)))
    grads = [None] * len(params)
    for l in range(len(params) - 1, -1, -1):
        fan_in, fan_out = layers[l], layers[l + 1]
        a = acts[l]
        dw = [0.0] * (fan_in * fan_out)
        for arow, drow in zip(a, delta):
            for i, av in enumerate(arow):
                if av != 0.0:
                    base = i * fan_out
                    for j, dv in enumerate(drow):
                        dw[base + j] += av * dv
        db = [sum(col) for col in zip(*delta)]
        grads[l] = (dw, db)
        if l > 0:
            w = params[l][0]
            wrows = [w[i * fan_out:(i + 1) * fan_out] for i in range(fan_in)]
            delta = [[sum(d * wv for d, wv in zip(drow, wr)) if av > 0.0 else 0.0
                      for wr, av in zip(wrows, arow)] for drow, arow in zip(delta, a)]
    return loss, grads


def train_reference(job, lr_offset=0.0, seed=SEED):
    """The job in pure Python: {"initial_loss", "curve" (each step's batch loss, before its
    update), "final_loss"}, the parameters rounded to float32 after each update as parbench
    stores them. `lr_offset` and `seed` plant errors for the self-test."""
    layers, batch, samples = job["layers"], job["batch"], job["samples"]
    x, labels = dataset(samples, layers[0], layers[-1], seed)
    params = initial_parameters(layers, seed)
    lr = f32([job["lr"] + lr_offset])[0]
    evaluation = list(range(min(EVAL_ROWS, samples)))
    initial = mean_loss(layers, params, x, labels, evaluation)
    curve = []
    for step in range(job["steps"]):
        loss, grads = gradient(layers, params, x, labels, batch_rows(step, batch, samples))
        curve.append(loss)
        params = [(f32(p - f32([lr * g])[0] for p, g in zip(w, dw)),
                   f32(p - f32([lr * g])[0] for p, g in zip(b, db)))
                  for (w, b), (dw, db) in zip(params, grads)]
    return {"initial_loss": initial, "curve": curve, "final_loss": mean_loss(layers, params, x, labels, evaluation)}


def relative(a, b):
    """|a − b| / |b|, inf where either is missing or not finite."""
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(b), 1e-30)


def compare_job(got, want, tolerance=LOSS_TOLERANCE):
    """[(what, ok, detail)]: a run's initial loss, every step's loss and final loss against
    parbench's (`want`: PARBENCH_CHECK's shape)."""
    rows = []
    for key in ("initial_loss", "final_loss"):
        r = relative(got.get(key), want[key])
        rows.append((key, r <= tolerance, f"{got.get(key)!r} vs parbench's {want[key]!r}: relative {r:.1e}"))
    curve, wanted = list(got.get("curve") or []), want["curve"]
    worst = max((relative(g, w) for g, w in zip(curve, wanted)), default=math.inf)
    ok = len(curve) == len(wanted) and worst <= tolerance
    rows.append(("loss curve", ok, f"{len(curve)} of {len(wanted)} steps, worst relative difference {worst:.1e}"))
    return rows


# ---- arguments -----------------------------------------------------------------------------

def _layers(text):
    dims = text.split("x")
    if not 2 <= len(dims) <= 8 or not all(d.isdecimal() and int(d) >= 1 for d in dims):
        raise UsageError(f"--layers wants 2 to 8 positive widths like 784x1024x10, not {text!r}")
    return [int(d) for d in dims]


def _lr(text):
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 10.0:
        raise UsageError(f"--lr wants a number from 0 to 10, not {text!r}")
    return value


def parse_args(argv):
    """argv without the program name -> (command, arguments, parameters or None)."""
    if argv == ["self-test"]:
        return "self-test", [], None
    if not argv or argv[0] not in ("measure", "check-against", "summarize"):
        raise UsageError(f"unknown command {' '.join(argv)!r}" if argv else "no command")
    command, rest = argv[0], list(argv[1:])
    if command == "summarize":
        if not rest or len(rest) % 2 or any(a.startswith("--") for a in rest):
            raise UsageError(f"summarize wants pairs PARBENCH.json TORCH.json, got {len(rest)} argument(s)")
        return command, rest, None
    params, positional = dict(DEFAULTS), []
    allowed = DEFAULTS if command == "measure" else {k: DEFAULTS[k] for k in JOB_KEYS}
    if command == "check-against":
        params = dict(CHECK_JOB)
    while rest:
        arg = rest.pop(0)
        if not arg.startswith("--"):
            positional.append(arg)
            continue
        name, eq, value = arg[2:].partition("=")
        if name not in allowed:
            raise UsageError(f"unknown option --{name}")
        if not eq:
            if not rest:
                raise UsageError(f"--{name} needs a value")
            value = rest.pop(0)
        if name == "layers":
            params[name] = _layers(value)
        elif name == "lr":
            params[name] = _lr(value)
        elif value.isdecimal() and int(value) >= 1:
            params[name] = int(value)
        else:
            raise UsageError(f"--{name} wants a positive integer, not {value!r}")
    want = "OUT.json" if command == "measure" else "PARBENCH_BINARY"
    if len(positional) != 1:
        raise UsageError(f"{command} wants one {want}, got {len(positional)}")
    return command, positional, params


# ---- measuring -----------------------------------------------------------------------------

def interleaved_repeats(fns, repeats, sync, clock=time.perf_counter):
    """Warm each of fns (name -> function) up once, then `repeats` rounds running each once in
    turn: (seconds of each run by name, each one's last result). Every run starts after sync()
    and its clock stops after sync()."""
    for fn in fns.values():
        fn()
    sync()
    seconds = {name: [] for name in fns}
    last = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            sync()
            start = clock()
            last[name] = fn()
            sync()
            seconds[name].append(clock() - start)
    return seconds, last


def thin(curve, n=CURVE_POINTS):
    """At most n points, evenly spread, the last one kept (parbench's `thin`)."""
    if len(curve) <= n:
        return list(curve)
    stride = -(-len(curve) // n)
    last = len(curve) - 1
    return [p for i, p in enumerate(curve) if (last - i) % stride == 0]


def build_result(params, meta, seconds, curves, figures, checks, details):
    """The JSON object: metadata, the job, samples/s of each way, the loss curves, checks and
    every run's seconds."""
    job = {k: params[k] for k in JOB_KEYS}
    samples = params["steps"] * params["batch"]
    result = dict(meta, tf32=False, parameters=job, repeats=params["repeats"])
    for way in ("eager", "graph"):
        med = statistics.median(seconds[way]) if seconds.get(way) else None
        result[f"{way}_samples_per_second"] = samples / med if med else None
        result[f"{way}_loss_curve"] = thin(curves.get(way) or [])
    eager, graph = result["eager_samples_per_second"], result["graph_samples_per_second"]
    result["graph_over_eager"] = graph / eager if eager and graph else None
    result.update(figures)
    result["checks"] = dict(checks)
    result["check_details"] = dict(details)
    result["samples"] = {f"{way}_s": list(seconds.get(way) or []) for way in ("eager", "graph")}
    return result


def write_json(path, obj):
    """Write obj to path atomically: a temporary file beside it, then os.replace."""
    text = json.dumps(obj, indent=2, allow_nan=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".train-vs-torch.", dir=os.path.dirname(os.path.abspath(path)))
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


def _torch_job(torch, dev, job):
    """The job on `dev`: its tensors and the eager and graph ways of training it."""
    import torch.nn.functional as F

    layers, batch, samples, steps, lr = (job[k] for k in ("layers", "batch", "samples", "steps", "lr"))
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is not None:
        x, labels = dataset_np(np, samples, layers[0], layers[-1])
        X, Y = torch.from_numpy(x), torch.from_numpy(labels)
        init = [torch.from_numpy(t) for pair in initial_parameters_np(np, layers) for t in pair]
    else:  # pure Python: some seconds for the default job
        x, labels = dataset(samples, layers[0], layers[-1])
        X = torch.frombuffer(bytearray(x.tobytes()), dtype=torch.float32).view(samples, layers[0])
        Y = torch.tensor(labels, dtype=torch.int64)
        init = []
        for (w, b), fan_in, fan_out in zip(initial_parameters(layers), layers, layers[1:]):
            init.append(torch.frombuffer(bytearray(w.tobytes()), dtype=torch.float32).view(fan_in, fan_out))
            init.append(torch.frombuffer(bytearray(b.tobytes()), dtype=torch.float32))
    X, Y = X.to(dev).contiguous(), Y.to(dev, torch.int64).contiguous()
    init = [t.to(dev).contiguous() for t in init]
    params = [t.clone().requires_grad_(True) for t in init]
    foreach = hasattr(torch, "_foreach_add_")
    wrapped = {}

    def rows(step):
        start = step * batch % samples
        if start + batch <= samples:
            return X[start:start + batch], Y[start:start + batch]
        if start not in wrapped:  # the rows wrap around the samples: gather them
            wrapped[start] = torch.arange(start, start + batch, device=dev) % samples
        idx = wrapped[start]
        return X.index_select(0, idx), Y.index_select(0, idx)

    def forward(h):
        n = len(params) // 2
        for l in range(n):
            h = torch.addmm(params[2 * l + 1], h, params[2 * l])
            if l + 1 < n:
                h = torch.relu(h)
        return h

    def step(xb, yb):
        loss = F.cross_entropy(forward(xb), yb)
        loss.backward()
        with torch.no_grad():
            grads = [p.grad for p in params]
            if foreach:
                torch._foreach_add_(params, grads, alpha=-lr)
            else:
                for p, g in zip(params, grads):
                    p.add_(g, alpha=-lr)
        return loss

    def clear_grads():
        for p in params:
            p.grad = None

    def load():
        with torch.no_grad():
            for p, t in zip(params, init):
                p.copy_(t)

    def eager():
        load()
        curve, start = [], time.perf_counter()
        for s in range(steps):
            loss = step(*rows(s))
            clear_grads()
            curve.append([float(s), loss.item(), time.perf_counter() - start])
        return curve

    # The whole step as a CUDA graph, as the PyTorch docs capture one.
    static_x, static_y = (t.clone() for t in rows(0))
    load()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            clear_grads()
            step(static_x, static_y)
    torch.cuda.current_stream().wait_stream(side)
    clear_grads()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = step(static_x, static_y)
    static_grads = [p.grad for p in params]  # noqa: F841 (kept alive beside the graph)
    clear_grads()

    def replayed():
        load()
        curve, start = [], time.perf_counter()
        for s in range(steps):
            xb, yb = rows(s)
            static_x.copy_(xb)
            static_y.copy_(yb)
            graph.replay()
            curve.append([float(s), static_loss.item(), time.perf_counter() - start])
        return curve

    evaluation = min(EVAL_ROWS, samples)

    def eval_loss():
        with torch.no_grad():
            return F.cross_entropy(forward(X[:evaluation]), Y[:evaluation]).item()

    def snapshot():
        return torch.cat([p.detach().reshape(-1) for p in params]).double()

    return {"eager": eager, "graph": replayed, "load": load, "eval_loss": eval_loss, "snapshot": snapshot,
            "graph_keep": (graph, static_grads), "sgd": "torch._foreach_add_" if foreach else "add_ per parameter"}


def cuda_measure(p):
    """-> (metadata, seconds by way, curves by way, figures, checks, check details)."""
    try:
        import torch  # only here: self-test, check-against and summarize need no torch
    except ImportError as e:
        raise MeasureError(f"PyTorch is not installed ({e})")
    if not torch.cuda.is_available():
        raise MeasureError("PyTorch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev, sync = torch.device("cuda:0"), torch.cuda.synchronize
    checks, details = {}, {}

    # The port and the PyTorch code against parbench's own figures for the small job.
    small = _torch_job(torch, dev, CHECK_JOB)
    small["load"]()
    initial = small["eval_loss"]()
    for way in ("eager", "graph"):
        curve = small[way]()
        got = {"initial_loss": initial, "curve": [c[1] for c in curve], "final_loss": small["eval_loss"]()}
        rows = compare_job(got, PARBENCH_CHECK)
        checks[f"small_job_{way}_matches_parbench"] = all(ok for _, ok, _ in rows)
        details[f"small_job_{way}_matches_parbench"] = "; ".join(f"{what}: {d}" for what, _, d in rows)
    del small

    job = _torch_job(torch, dev, p)
    job["load"]()
    figures = {"initial_loss": job["eval_loss"](), "sgd": job["sgd"],
               "batch_input": "eager: a view of the rows on the GPU (gathered where they wrap); graph: copied "
                              "into the static input and target before each replay"}
    seconds, curves = interleaved_repeats({"eager": job["eager"], "graph": job["graph"]}, p["repeats"], sync)
    finals = {}
    for way in ("eager", "graph"):
        job[way]()  # untimed: the final parameters of this way
        finals[way] = job["snapshot"]()
        figures[f"{way}_final_loss"] = job["eval_loss"]()
        figures[f"{way}_parameter_sum"] = finals[way].sum().item()
    diff = ((finals["graph"] - finals["eager"]).norm() / finals["eager"].norm().clamp_min(1e-30)).item()
    checks["graph_equals_eager"] = bool(diff <= AGREEMENT)
    details["graph_equals_eager"] = f"parameters after {p['steps']} steps differ by {diff:.2e} of their norm " \
                                    f"(tolerance {AGREEMENT:.0e})"
    meta = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0)}
    return meta, seconds, curves, figures, checks, details


def measure(out_path, params, measure_fn=cuda_measure):
    try:
        meta, seconds, curves, figures, checks, details = measure_fn(params)
        text = write_json(out_path, build_result(params, meta, seconds, curves, figures, checks, details))
    except (MeasureError, RuntimeError, OSError, ValueError) as e:
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 1
    print(text, end="")
    return 0


# ---- the port against a parbench binary ----------------------------------------------------

def parbench_figures(report):
    """{"initial_loss", "curve", "final_loss"} of a data-parallel report's one-device run."""
    runs = report.get("runs") if isinstance(report, dict) else None
    derived = (runs[0].get("derived") if runs and isinstance(runs[0], dict) else None) or {}
    curve = derived.get("one_device_loss_curve") or []
    return {"initial_loss": derived.get("initial_loss"), "final_loss": derived.get("one_device_final_loss"),
            "curve": [p[1] for p in curve if isinstance(p, list) and len(p) > 1]}


def check_against(binary, job, run=subprocess.run):
    """Run parbench's one-device job and compare it with the pure-Python port: exit 0 or 1."""
    layers = "x".join(str(w) for w in job["layers"])
    command = [binary, "data-parallel", "--json", "--quiet", "--devices", "1", "--layers", layers,
               "--samples", str(job["samples"]), "--batch", str(job["batch"]), "--steps", str(job["steps"]),
               "--lr", repr(job["lr"])]
    try:
        done = run(command, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        print(f"error: could not run {binary}: {e}", file=sys.stderr)
        return 1
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        print(f"error: {' '.join(command)} exited {done.returncode}: {last}", file=sys.stderr)
        return 1
    try:
        want = parbench_figures(json.loads(done.stdout))
    except ValueError as e:
        print(f"error: parbench's output is not JSON ({e})", file=sys.stderr)
        return 1
    if want["initial_loss"] is None or want["final_loss"] is None or len(want["curve"]) != job["steps"]:
        print("error: parbench's report lacks initial_loss, one_device_final_loss or a point a step of "
              "one_device_loss_curve", file=sys.stderr)
        return 1
    rows = compare_job(train_reference(job), want)
    print(" ".join(command))
    for what, ok, detail in rows:
        print(f"{'ok' if ok else 'FAILED'}: {what}: {detail}")
    return 0 if all(ok for _, ok, _ in rows) else 1


# ---- the summary ---------------------------------------------------------------------------

def _num(v):
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def _parbench_run(report):
    runs = report.get("runs") if isinstance(report, dict) else None
    return runs[0] if isinstance(runs, list) and runs and isinstance(runs[0], dict) else None


def _derived(report, key):
    run = _parbench_run(report) or {}
    derived = run.get("derived") if isinstance(run.get("derived"), dict) else {}
    return derived.get(key)


def _last_loss(curve):
    return _num(curve[-1][1]) if isinstance(curve, list) and curve and isinstance(curve[-1], list) \
        and len(curve[-1]) > 1 else None


def _spread(values, fmt=lambda v: f"{v:.4g}"):
    """"median (min–max)" of the values there are, "-" when none."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    med, low, high = fmt(statistics.median(values)), fmt(min(values)), fmt(max(values))
    return med if low == high else f"{med} ({low}–{high})"


def _job_of(parameters):
    """The job's parameters from a report's, normalised for comparison (None if not there)."""
    if not isinstance(parameters, dict):
        return None
    job = {}
    for key in JOB_KEYS:
        v = parameters.get(key)
        if key == "layers":
            job[key] = [int(w) for w in v] if isinstance(v, list) and all(isinstance(w, int) for w in v) else v
        elif key == "lr":
            job[key] = round(float(v), 9) if _num(v) is not None else v
        else:
            job[key] = v
    return job


# The rows: (figure, parbench's value, PyTorch's value, goal text or None, goal ratio or None).
FIGURE_ROWS = (
    ("training samples/s, eager: one-device / PyTorch eager",
     lambda p: _num(_derived(p, "one_device_samples_per_second")), lambda t: _num(t.get("eager_samples_per_second")),
     f">= {GOALS['eager']:g} × torch", GOALS["eager"]),
    ("training samples/s, CUDA graph: one-device-graph / torch.cuda.CUDAGraph",
     lambda p: _num(_derived(p, "one_device_graph_samples_per_second")),
     lambda t: _num(t.get("graph_samples_per_second")), f">= {GOALS['graph']:g} × torch", GOALS["graph"]),
    ("initial loss (first rows)", lambda p: _num(_derived(p, "initial_loss")), lambda t: _num(t.get("initial_loss")),
     None, None),
    ("final loss, eager (first rows)", lambda p: _num(_derived(p, "one_device_final_loss")),
     lambda t: _num(t.get("eager_final_loss")), None, None),
    ("final loss, graph (first rows)", lambda p: _num(_derived(p, "one_device_graph_final_loss")),
     lambda t: _num(t.get("graph_final_loss")), None, None),
    ("loss curve's last point, eager", lambda p: _last_loss(_derived(p, "one_device_loss_curve")),
     lambda t: _last_loss(t.get("eager_loss_curve")), None, None),
    ("loss curve's last point, graph", lambda p: _last_loss(_derived(p, "one_device_graph_loss_curve")),
     lambda t: _last_loss(t.get("graph_loss_curve")), None, None),
)
# The same-job checks: (check, parbench's figure, PyTorch's, tolerance).
SAME_LOSS = (
    ("same initial loss", "initial_loss", "initial_loss", LOSS_TOLERANCE),
    ("same final loss, eager", "one_device_final_loss", "eager_final_loss", FINAL_TOLERANCE),
    ("same final loss, graph", "one_device_graph_final_loss", "graph_final_loss", FINAL_TOLERANCE),
)


def section(rounds):
    """The training section of a summary from [(round label, parbench's data-parallel report or
    None, this script's JSON or None)]: (markdown lines, whether every report is there, every
    check passed and both sides trained the same job)."""
    n = len(rounds)
    lines = ["", f"## Training: parbench's data-parallel beside PyTorch (per-round ratios: median (min–max) "
                 f"over {n} round(s))", ""]
    if not any(p is not None or t is not None for _, p, t in rounds):
        lines.append("No training rounds recorded: no round has data-parallel.json or torch-train.json.")
        return lines, True
    ok = True
    checks = []
    for label, p, t in rounds:
        run = _parbench_run(p)
        if run is None:
            checks.append((label, "parbench's data-parallel report", "**missing**"))
            ok = False
        else:
            for note in run.get("notes") or []:
                if isinstance(note, str) and note.startswith("GPU unavailable"):
                    checks.append((label, "parbench ran on the GPU", f"**no**: {note}"))
                    ok = False
        if not isinstance(t, dict):
            checks.append((label, "PyTorch's report (torch-train.json)", "**missing**"))
            ok = False
            continue
        for name, passed in (t.get("checks") or {}).items():
            passed = passed is True
            ok &= passed
            detail = (t.get("check_details") or {}).get(name, "")
            checks.append((label, f"PyTorch: {name}", ("ok" if passed else "**FAILED**") + (f": {detail}" if detail else "")))
        if run is None:
            continue
        pj, tj = _job_of(run.get("parameters")), _job_of(t.get("parameters"))
        same = pj is not None and pj == tj
        ok &= same
        checks.append((label, "same job: " + ", ".join(JOB_KEYS),
                       ("ok: " if same else "**FAILED**: parbench ") + (json.dumps(pj) if same else f"{json.dumps(pj)}, PyTorch {json.dumps(tj)}")))
        for what, pk, tk, tolerance in SAME_LOSS:
            a, b = _num(_derived(p, pk)), _num(t.get(tk))
            if a is None and b is None and pk == "one_device_graph_final_loss":
                continue  # neither side has a graph figure: the graph row shows "-"
            r = relative(a, b)
            passed = r <= tolerance
            ok &= passed
            checks.append((label, f"{what} (relative difference <= {tolerance:.0e})",
                           f"{'ok' if passed else '**FAILED**'}: parbench {_fmt(a)}, PyTorch {_fmt(b)}"
                           + (f", relative {r:.1e}" if math.isfinite(r) else "")))
    lines += ["| figure | parbench | PyTorch | ratio | goal | met |", "|---|---:|---:|---:|---|---|"]
    for figure, pv, tv, text, target in FIGURE_ROWS:
        ps = [pv(p) if p is not None else None for _, p, _ in rounds]
        ts = [tv(t) if isinstance(t, dict) else None for _, _, t in rounds]
        rs = [a / b if a is not None and b else None for a, b in zip(ps, ts)]
        values = [r for r in rs if r is not None]
        if target is None:
            verdict, text = "-", "(same job)"
        else:
            verdict = "-" if not values else ("yes" if statistics.median(values) >= target else "**no**")
        lines.append(f"| {figure} | {_spread(ps)} | {_spread(ts)} | {_spread(rs)} | {text} | {verdict} |")
    lines += ["", "| round | check | result |", "|---|---|---|"]
    lines += [f"| {label} | {what} | {result} |" for label, what, result in checks]
    torch = next((t for _, _, t in rounds if isinstance(t, dict) and t.get("torch")), None)
    if torch:
        lines += ["", f"PyTorch {torch.get('torch', '?')} (CUDA {torch.get('cuda', '?')}) on {torch.get('device', '?')}, "
                      f"SGD by {torch.get('sgd', '?')}."]
    return lines, ok


def _fmt(v):
    return "-" if v is None else f"{v:.6g}"


def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def summarize(paths):
    pairs = [(f"round-{i // 2 + 1}", _load(paths[i]), _load(paths[i + 1])) for i in range(0, len(paths), 2)]
    lines, ok = section(pairs)
    print("\n".join(lines[1:]))
    return 0 if ok else 1


# ---- self-test -----------------------------------------------------------------------------

def self_test():
    import contextlib
    import io

    def t_splitmix():
        # SplitMix64's published first outputs from state 0, then 1 and 2 (state += golden ratio).
        assert splitmix64(0) == 0xE220A8397B1DCDAF, hex(splitmix64(0))
        assert splitmix64(0x9E3779B97F4A7C15) == 0x6E789E6AA1B965F4, hex(splitmix64(0x9E3779B97F4A7C15))
        u = uniform(1000, 7)
        assert u == uniform(1000, 7) and u != uniform(1000, 8) and all(0.0 <= v < 1.0 for v in u)
        assert abs(sum(u) / len(u) - 0.5) < 0.05 and all(v * (1 << 24) == int(v * (1 << 24)) for v in u)

    def t_port_equals_parbench():
        # The whole job in pure Python against parbench's figures for it: the data, the
        # initial parameters, the batch walk (with a mid-batch wrap), the loss and SGD.
        rows = compare_job(train_reference(CHECK_JOB), PARBENCH_CHECK)
        assert all(ok for _, ok, _ in rows), rows
        # The tolerance tells errors apart: another seed, a learning rate 1% off, rows off by one.
        assert not compare_job(train_reference(CHECK_JOB, seed=SEED + 1), PARBENCH_CHECK)[0][1]
        bad = compare_job(train_reference(CHECK_JOB, lr_offset=0.001), PARBENCH_CHECK)
        assert bad[0][1] and not bad[1][1] and not bad[2][1], bad
        shifted = dict(CHECK_JOB, samples=CHECK_JOB["samples"] + 1)
        assert not all(ok for _, ok, _ in compare_job(train_reference(shifted), PARBENCH_CHECK))

    def t_numpy_port():
        try:
            import numpy as np
        except ImportError:
            return "skipped (no numpy)"
        for layers, samples in (([16, 24, 4], 500), ([33, 7, 10], 1 << 14 | 5)):
            x, labels = dataset(samples, layers[0], layers[-1])
            nx, nl = dataset_np(np, samples, layers[0], layers[-1])
            assert nx.dtype == np.float32 and nx.tobytes() == x.tobytes() and nl.tolist() == labels
            for (w, b), (nw, nb) in zip(initial_parameters(layers), initial_parameters_np(np, layers)):
                assert nw.tobytes() == w.tobytes() and nb.tobytes() == b.tobytes()
        return None

    def t_gradient():
        # The hand-written backward pass against central differences of the loss.
        layers = [5, 4, 3]
        x, labels = dataset(20, 5, 3)
        params = [(list(w), list(b)) for w, b in initial_parameters(layers)]
        params[0][1][:] = [0.1, -0.2, 0.3, 0.05]
        rows = batch_rows(3, 8, 20)
        _, grads = gradient(layers, params, x, labels, rows)
        for l, part, i in ((0, 0, 3), (0, 1, 2), (1, 0, 7), (1, 1, 1)):
            h = 1e-6
            up = [(list(w), list(b)) for w, b in params]
            down = [(list(w), list(b)) for w, b in params]
            up[l][part][i] += h
            down[l][part][i] -= h
            numeric = (mean_loss(layers, up, x, labels, rows) - mean_loss(layers, down, x, labels, rows)) / (2 * h)
            assert abs(numeric - grads[l][part][i]) < 1e-6, (l, part, i, numeric, grads[l][part][i])
        assert batch_rows(10, 48, 500)[19:21] == [499, 0] and batch_rows(1, 3, 2) == [1, 0, 1]

    def t_parse():
        job = {k: DEFAULTS[k] for k in JOB_KEYS}
        assert parse_args(["measure", "o.json"]) == ("measure", ["o.json"], DEFAULTS)
        _, args, p = parse_args(["measure", "--steps", "7", "o.json", "--layers=8x4x2", "--batch", "3",
                                 "--samples=9", "--lr", "0.5", "--repeats=4"])
        assert args == ["o.json"] and p == {"layers": [8, 4, 2], "batch": 3, "steps": 7, "samples": 9, "lr": 0.5,
                                            "repeats": 4}, p
        assert parse_args(["check-against", "./pb"]) == ("check-against", ["./pb"], CHECK_JOB)
        assert parse_args(["check-against", "pb", "--steps", "2"])[2] == dict(CHECK_JOB, steps=2)
        assert parse_args(["summarize", "a", "b", "c", "d"]) == ("summarize", ["a", "b", "c", "d"], None)
        assert parse_args(["self-test"])[0] == "self-test" and job["lr"] == 0.1

    def t_bad_args():
        bad = ["", "measure", "measure a b", "measure o --bogus 1", "measure o --steps", "measure o --steps 0",
               "measure o --batch -3", "measure o --layers 784", "measure o --layers 7x0x2", "measure o --lr x",
               "measure o --lr -1", "measure o --lr nan", "measure o --samples ²", "check-against",
               "check-against pb --repeats 3", "summarize", "summarize a", "summarize a b c", "summarize a --x",
               "self-test extra", "frobnicate"]
        for argv in bad:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                assert main(["prog"] + argv.split()) == 2, argv
            assert err.getvalue().count("\n") == 1 and err.getvalue().startswith("error: "), (argv, err.getvalue())

    def t_interleaved():
        log, ticks = [], iter([1.0, 1.5, 2.0, 2.25, 3.0, 4.0, 5.0, 5.5])
        fns = {"eager": lambda: log.append("e") or "E", "graph": lambda: log.append("g") or "G"}
        seconds, last = interleaved_repeats(fns, 2, lambda: log.append("s"), clock=lambda: next(ticks))
        assert seconds == {"eager": [0.5, 1.0], "graph": [0.25, 0.5]} and last == {"eager": "E", "graph": "G"}
        assert log == ["e", "g", "s"] + ["s", "e", "s", "s", "g", "s"] * 2, log
        c = [[float(i), 1.0, 0.0] for i in range(10)]
        t = thin(c, 4)
        assert len(t) <= 4 and t[-1] == c[-1] and thin(c[:3], 4) == c[:3], t

    curve = [[0.0, 2.3, 0.001], [1.0, 2.2, 0.002], [2.0, 2.1, 0.003]]
    fake = ({"torch": "t", "cuda": "c", "device": "d"}, {"eager": [2.0, 1.0, 3.0], "graph": [0.5, 1.0, 0.25]},
            {"eager": curve, "graph": curve}, {"initial_loss": 2.3, "eager_final_loss": 2.0, "graph_final_loss": 2.0},
            {"graph_equals_eager": True}, {"graph_equals_eager": "d"})

    def t_build():
        r = build_result(DEFAULTS, *fake)
        assert r["eager_samples_per_second"] == 20 * 512 / 2.0 and r["graph_samples_per_second"] == 20 * 512 / 0.5, r
        assert r["graph_over_eager"] == 4.0 and r["eager_loss_curve"] == curve and r["parameters"]["lr"] == 0.1, r
        assert r["samples"] == {"eager_s": [2.0, 1.0, 3.0], "graph_s": [0.5, 1.0, 0.25]} and r["tf32"] is False, r
        assert r["checks"] == {"graph_equals_eager": True} and r["repeats"] == 15 and "repeats" not in r["parameters"]

    def t_measure_json():
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "train.json")
            with open(path, "w") as f:
                f.write("old")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                assert measure(path, DEFAULTS, lambda p: fake) == 0
            with open(path) as f:
                doc = json.load(f)
            assert json.loads(out.getvalue()) == doc and doc["initial_loss"] == 2.3, doc
            assert os.listdir(d) == ["train.json"], os.listdir(d)

            def no_gpu(p):
                raise MeasureError("PyTorch sees no CUDA device")
            err, other = io.StringIO(), os.path.join(d, "none.json")
            with contextlib.redirect_stderr(err):
                assert measure(other, DEFAULTS, no_gpu) == 1
            assert err.getvalue() == "error: PyTorch sees no CUDA device\n" and not os.path.exists(other)

    def parbench_report(rate, graph_rate, final=1.19, parameters=None, notes=()):
        job = parameters or {"devices": 2, "layers": [784, 1024, 1024, 10], "batch": 512, "steps": 20, "lr": 0.1,
                             "samples": 8192, "target_loss": 0.5}
        return {"schema": "parbench/1", "runs": [{"scenario": "data-parallel", "parameters": job, "notes": list(notes),
                                                  "checks": [], "derived": {
            "initial_loss": 2.302585, "one_device_samples_per_second": rate,
            "one_device_graph_samples_per_second": graph_rate, "one_device_final_loss": final,
            "one_device_graph_final_loss": final, "one_device_loss_curve": [[0.0, 2.3, 0.1], [19.0, 1.2, 0.2]],
            "one_device_graph_loss_curve": [[0.0, 2.3, 0.1], [19.0, 1.2, 0.15]]}}]}

    def torch_report(rate, graph_rate, final=1.19):
        r = build_result(DEFAULTS, *fake)
        r.update(eager_samples_per_second=rate, graph_samples_per_second=graph_rate, initial_loss=2.302585,
                 eager_final_loss=final, graph_final_loss=final, sgd="torch._foreach_add_")
        r["checks"] = {"graph_equals_eager": True, "small_job_eager_matches_parbench": True}
        return r

    def t_section():
        # parbench eager 1.0e6, 1.1e6, 0.9e6 against PyTorch's 1.0e6: ratios 0.9..1.1, median 1, met;
        # the graph 1.8e6, 1.9e6, 2.0e6 against 2.0e6: median 0.95, met.
        rounds = [(f"round-{i + 1}", parbench_report(e, g), torch_report(1e6, 2e6))
                  for i, (e, g) in enumerate(((1.0e6, 1.8e6), (1.1e6, 1.9e6), (0.9e6, 2.0e6)))]
        lines, ok = section(rounds)
        text = "\n".join(lines)
        assert ok, text
        assert "(per-round ratios: median (min–max) over 3 round(s))" in text, text
        assert "| training samples/s, eager: one-device / PyTorch eager | 1e+06 (9e+05–1.1e+06) | 1e+06 | 1 (0.9–1.1) | >= 1 × torch | yes |" in text, text
        assert "| training samples/s, CUDA graph: one-device-graph / torch.cuda.CUDAGraph | 1.9e+06 (1.8e+06–2e+06) | 2e+06 | 0.95 (0.9–1) | >= 0.95 × torch | yes |" in text, text
        assert "| final loss, eager (first rows) | 1.19 | 1.19 | 1 | (same job) | - |" in text, text
        assert "| loss curve's last point, graph | 1.2 | 2.1 | 0.5714 | (same job) | - |" in text, text
        assert "| round-2 | same final loss, eager (relative difference <= 1e-04) | ok: parbench 1.19, PyTorch 1.19, relative 0.0e+00 |" in text, text
        assert "| round-1 | PyTorch: small_job_eager_matches_parbench | ok |" in text, text
        assert "PyTorch t (CUDA c) on d, SGD by torch._foreach_add_." in text, text
        # Below the goals: "no", and the summary still passes (goals do not fail it).
        lines, ok = section([("round-1", parbench_report(0.8e6, 1.5e6), torch_report(1e6, 2e6))])
        text = "\n".join(lines)
        assert ok and "| 0.8 | >= 1 × torch | **no** |" in text and "| 0.75 | >= 0.95 × torch | **no** |" in text, text
        # Another job, another final loss, a failed PyTorch check, a missing report, a CPU run: each fails.
        other = parbench_report(1e6, 2e6, parameters={"layers": [784, 1024, 10], "batch": 512, "steps": 20,
                                                      "lr": 0.1, "samples": 8192})
        lines, ok = section([("round-1", other, torch_report(1e6, 2e6))])
        assert not ok and "| round-1 | same job: layers, batch, steps, samples, lr | **FAILED**: parbench" in "\n".join(lines), lines
        lines, ok = section([("round-1", parbench_report(1e6, 2e6, final=1.2), torch_report(1e6, 2e6))])
        assert not ok and "same final loss, eager (relative difference <= 1e-04) | **FAILED**" in "\n".join(lines), lines
        broken = torch_report(1e6, 2e6)
        broken["checks"]["graph_equals_eager"] = False
        lines, ok = section([("round-1", parbench_report(1e6, 2e6), broken)])
        assert not ok and "| round-1 | PyTorch: graph_equals_eager | **FAILED**: d |" in "\n".join(lines), lines
        lines, ok = section([("round-1", parbench_report(1e6, 2e6), torch_report(1e6, 2e6)), ("round-2", None, None)])
        text = "\n".join(lines)
        assert not ok and "| round-2 | parbench's data-parallel report | **missing** |" in text, text
        assert "| 1e+06 | 1e+06 | 1 | >= 1 × torch | yes |" in text, text
        cpu = parbench_report(1e6, 2e6, notes=["GPU unavailable: no driver; using cpu:0"])
        assert not section([("round-1", cpu, torch_report(1e6, 2e6))])[1]
        lines, ok = section([("round-1", None, None), ("round-2", None, None)])
        assert ok and "No training rounds recorded" in "\n".join(lines), lines
        # summarize: pairs of files, exit 1 when a check fails.
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, (label, p, t) in enumerate(rounds):
                for name, doc in (("pb", p), ("torch", t)):
                    paths.append(os.path.join(d, f"{name}-{i}.json"))
                    with open(paths[-1], "w") as f:
                        json.dump(doc, f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                assert main(["prog", "summarize"] + paths) == 0
                assert main(["prog", "summarize"] + paths[:2] + [paths[0], os.path.join(d, "none.json")]) == 1
            assert out.getvalue().startswith("## Training") and "| round-2 | PyTorch's report" in out.getvalue(), out.getvalue()

    def t_check_against():
        # A stand-in for the binary: its report carries parbench's figures for the job (or a
        # planted error in them), and the command it was asked to run is kept.
        asked = []

        def fake_run(final):
            def run(command, **kwargs):
                asked.append(command)
                curve = [[float(i), v, 0.0] for i, v in enumerate(PARBENCH_CHECK["curve"])]
                report = {"runs": [{"derived": {"initial_loss": PARBENCH_CHECK["initial_loss"],
                                                "one_device_final_loss": final, "one_device_loss_curve": curve}}]}
                return subprocess.CompletedProcess(command, 0, json.dumps(report), "")
            return run
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            assert check_against("pb", CHECK_JOB, fake_run(PARBENCH_CHECK["final_loss"])) == 0
            assert check_against("pb", CHECK_JOB, fake_run(PARBENCH_CHECK["final_loss"] * 1.001)) == 1
            assert check_against("pb", CHECK_JOB, lambda c, **k: subprocess.CompletedProcess(c, 2, "", "error: x\n")) == 1
            assert check_against(os.path.join(tempfile.gettempdir(), "no-such-parbench"), CHECK_JOB) == 1
        assert asked[0] == ["pb", "data-parallel", "--json", "--quiet", "--devices", "1", "--layers", "16x24x4",
                            "--samples", "500", "--batch", "48", "--steps", "12", "--lr", "0.1"], asked[0]
        assert "ok: loss curve: 12 of 12 steps" in out.getvalue() and "FAILED: final_loss" in out.getvalue(), out.getvalue()
        assert "exited 2: error: x" in err.getvalue() and "could not run" in err.getvalue(), err.getvalue()

    tests = [t_splitmix, t_port_equals_parbench, t_numpy_port, t_gradient, t_parse, t_bad_args, t_interleaved,
             t_build, t_measure_json, t_section, t_check_against]
    failed, skipped = 0, 0
    for test in tests:
        try:
            note = test()
            if note:
                skipped += 1
                print(f"{test.__name__}: {note}")
        except Exception as e:  # report every failing test, not only the first
            failed += 1
            print(f"FAIL {test.__name__}: {type(e).__name__}: {e}", file=sys.stderr)
    tail = f", {skipped} skipped" if skipped else ""
    print(f"train-vs-torch self-test: {len(tests) - failed - skipped} passed, {failed} failed{tail}")
    return 1 if failed else 0


def main(argv):
    try:
        command, args, params = parse_args(argv[1:])
    except UsageError as e:
        print(f"error: {e} ({USAGE})", file=sys.stderr)
        return 2
    if command == "self-test":
        return self_test()
    if command == "summarize":
        return summarize(args)
    if command == "check-against":
        return check_against(args[0], params)
    return measure(args[0], params)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
