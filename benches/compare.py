"""Runs basin's criterion benchmarks and the Python anchors side by side and prints the ratios
of performance issue 15 as a Markdown table (and writes them as JSON).

Sides, in this order (the PyTorch anchor before and after basin, since absolute times drift
between minutes on a shared machine):
  1. `bench_et_pytorch.py cpu [--compile]` (PyTorch eager, autograd and closed form, the
     measured matmul rate and the FLOP floor; from $BASIN_CHECKS unless --anchors says);
  2. basin under the anchor's protocol (`cargo run -p basin-benches --bin et_step_anchor`:
     medians of 30 short runs, the variants interleaved round by round after a warm-up), then
     `cargo bench -p basin-benches --bench energy` (`et_step_dense_*`, `train_step`:
     criterion's sustained sampling, one variant after another);
  3. the PyTorch anchor again;
  4. with --pe: `crates/basin-graph/scripts/scipy_pe_loop.py NCI1 DD` against the
     `laplacian_pe/*` criterion benchmarks;
  5. with --epoch: one NCI1 training epoch of `basin train --example et-graph` (in size
     buckets, and in one padded batch as the Python side pads) against
     `benches/et_graph_epoch.py` (PyTorch + PyG), split by phase; `--epoch-model paper` runs
     Table 9's sizes on both sides instead of the example's CPU model;
  6. with --anomaly-epoch: tolokers training epochs of `basin train --example et-anomaly`
     against `benches/et_anomaly_epoch.py` (PyTorch + PyG: the reference's per-edge messages,
     a COO product, autograd, and basin's own kernels called from Python), split by phase.
`--no-step` skips sides 1–3. With --jax PYTHON (a Python with `jax[cpu]`), sides 1 and 3 also
run `benches/et_step_jax.py` (the ET reference code's `jax.jit` of autograd), pinned with
`taskset` to as many cores as OMP_NUM_THREADS, and the table gets its rows and ratios.

Usage (from the workspace root; the Python needs torch==2.11.0, numpy, scipy):
  python3 benches/compare.py --python /path/to/venv/bin/python [--compile] [--pe]
      [--epoch [--epoch-model cpu|paper]] [--anomaly-epoch [--anomaly-epochs 5]] [--no-step]
      [--jax /path/to/jax-venv/bin/python] [--no-cargo] [--json target/compare.json]
`--no-cargo` reads the criterion results already under target/criterion instead of running
the benchmarks. Threads: OMP_NUM_THREADS (default 2) for both sides.
"""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def run(cmd, env):
    line = " ".join(cmd).replace("\n", " ")
    print("compare: " + (line if len(line) < 160 else line[:157] + "…"), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"compare: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return out.stdout


def anchor(python, script, compile_, env):
    """Parses the foundation-size lines of bench_et_pytorch.py (milliseconds)."""
    cmd = [python, script, "cpu"] + (["--compile"] if compile_ else [])
    text = run(cmd, env)
    got = {}
    for line in text.splitlines():
        if not line.startswith("foundation"):
            continue
        for key, pat in [
            ("gflop", r"step GFLOP ([\d.]+)"),
            ("floor", r"floor ([\d.]+) ms"),
            ("autograd", r"\| autograd ([\d.]+) ms"),
            ("closed", r"\| closed ([\d.]+) ms"),
            ("compiled", r"compiled closed ([\d.]+) ms"),
            ("train_closed", r"closed-in-graph ([\d.]+) ms"),
            ("train_autograd", r"autograd create_graph ([\d.]+) ms"),
        ]:
            m = re.search(pat, line)
            if m:
                got[key] = float(m.group(1))
    # The rate behind the floor (the anchor prints it rounded to 0.1 TFLOP/s).
    if "gflop" in got and "floor" in got:
        got["matmul_gflops"] = got["gflop"] / got["floor"] * 1e3
    return got


def jax_anchor(python, env):
    """`benches/et_step_jax.py` (milliseconds), pinned to OMP_NUM_THREADS cores: XLA's CPU
    client takes every core it sees."""
    cmd = [python, os.path.join(ROOT, "benches", "et_step_jax.py")]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", f"0-{int(env['OMP_NUM_THREADS']) - 1}"] + cmd
    return json.loads(run(cmd, env).strip().splitlines()[-1])


def criterion(pattern):
    """Median (ms) of the criterion benchmark whose directory matches `pattern`."""
    files = sorted(glob.glob(os.path.join(ROOT, "target", "criterion", pattern, "new", "estimates.json")))
    if not files:
        return None
    with open(files[-1]) as f:
        return json.load(f)["median"]["point_estimate"] / 1e6


def spread(a, b, key):
    vals = [v[key] for v in (a, b) if key in v]
    if not vals:
        return None, "–"
    lo, hi = min(vals), max(vals)
    return statistics.mean(vals), (f"{lo:.1f}" if lo == hi else f"{lo:.1f} – {hi:.1f}")


MEMORY_SNIPPET = """
import json, sys
sys.argv = ["bench_et_pytorch.py", "cpu"]
sys.path.insert(0, ANCHORS)
import bench_et_pytorch as b


def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024


out = {}
m = b.Et(32, 128, 128, 12, 64, 512)
for name, closed in [("train_closed", True), ("train_autograd", False)]:
    m.train_step(4, closed)
    open("/proc/self/clear_refs", "w").write("5")
    before = status("VmRSS")
    m.train_step(4, closed)
    out[name] = status("VmHWM") - before
print(json.dumps(out))
"""


def pytorch_train_memory(python, anchors, env):
    """Peak resident memory (MiB above the state before) of one PyTorch training step."""
    text = run([python, "-c", MEMORY_SNIPPET.replace("ANCHORS", repr(anchors))], env)
    return json.loads(text.strip().splitlines()[-1])


def epoch_table(args, env):
    """One NCI1 training epoch on each side, split by phase (training graphs of fold 0 of a
    2-fold CV on basin's side, the same number on the Python side)."""
    data = os.path.abspath(args.data)
    work = tempfile.mkdtemp(prefix="basin_epoch_")
    try:
        return epoch_sides(args, env, data, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def epoch_sides(args, env, data, work):
    """The two sides of [`epoch_table`], with `work` a scratch directory."""
    basin = os.path.join(ROOT, "target", "release", "basin")
    run(["cargo", "build", "--release", "-p", "basin-cli"], env)
    example = run([basin, "train", "--example", "et-graph"], env)
    toml = re.sub(r'^data = ".*"', 'data = "NCI1"', example, flags=re.M)
    toml = re.sub(r"^epochs = \d+", "epochs = 1", toml, flags=re.M)
    toml = re.sub(r"^folds = \d+", "folds = 2", toml, flags=re.M)
    # The Python model reads CLS + mean (no size term) and k = 15 encodings, the papers' count
    # (the CPU presets now take 8).
    toml, n = re.subn(r'^readout = ".*"$', 'readout = "cls-mean"', toml, flags=re.M)
    if n != 1:
        sys.exit(f"compare: the et-graph example has {n} `readout` lines, expected 1")
    toml, n = re.subn(r"^k = \d+$", "k = 15", toml, flags=re.M)
    if n != 1:
        sys.exit(f"compare: the et-graph example has {n} `k` lines, expected 1")
    if args.epoch_model == "paper":
        # Table 9's model (basin_et::graph::tu_paper's sizes and α) with the CLS + mean
        # readout, as benches/et_graph_epoch.py --preset paper builds it.
        for key, value in [("dim", 128), ("heads", 12), ("head_dim", 64), ("memories", 512),
                           ("blocks", 4), ("steps", 1), ("alpha", 0.01)]:
            toml, n = re.subn(rf"^{key} = [\d.]+$", f"{key} = {value}", toml, flags=re.M)
            if n != 1:
                sys.exit(f"compare: the et-graph example has {n} `{key}` lines, expected 1")
    # basin with each batch in size buckets and with one padded batch (as the Python side pads;
    # the default `size_buckets = "auto"` takes this one for attention over the edges).
    ours = {}
    for layout, buckets in [("buckets", "true"), ("one padded batch", "false")]:
        cfg = os.path.join(work, f"run-{buckets}.toml")
        with open(cfg, "w") as f:
            text, n = re.subn(r"^size_buckets = \S+", f"size_buckets = {buckets}", toml, flags=re.M)
            if n != 1:
                sys.exit(f"compare: the et-graph example has {n} `size_buckets` lines, expected 1")
            f.write(text)
        out = os.path.join(work, f"run-{buckets}")
        run([basin, "train", cfg, "--out", out, "--data-dir", data, "--device", "cpu", "--quiet"], env)
        with open(os.path.join(out, "repeat-0", "fold-0", "record.json")) as f:
            ours[layout] = json.load(f)["epochs"][0]["phases"]
    # Fold 0 of 2 holds out half of NCI1's 4110 graphs for test and a ninth of the rest for
    # validation: 1827 training graphs.
    train_graphs = 4110 - 2055 - 228
    script = os.path.join(ROOT, "benches", "et_graph_epoch.py")
    theirs = {}
    for pe in ["per-batch", "precomputed"]:
        out = run([args.python, script, "--data", os.path.join(data, "tu"), "--name", "NCI1", "--train-graphs", str(train_graphs), "--pe", pe, "--preset", args.epoch_model], env)
        theirs[pe] = json.loads(out.strip().splitlines()[-1])
    keys = ["data", "pe", "forward", "backward", "optimiser"]
    model = "`basin train --example et-graph` model with the CLS + mean readout and k = 15" if args.epoch_model == "cpu" else "Table 9's model (D 128, 12 heads of 64, K 512, 4 blocks × 1 step) with the CLS + mean readout"
    # The example's attention form (the CPU presets run it over the edges; the Python side
    # computes the dense masked form of the same model).
    if re.search(r"^sparse_attention = true$", toml, flags=re.M):
        model += "; basin's attention over the edges (`sparse_attention`)"
    print(f"\nNCI1, one training epoch ({train_graphs} graphs, {model}, batch 32), seconds:\n")
    print("| phase | basin (size buckets) | basin (one padded batch) | PyTorch + PyG, encodings per batch | PyTorch + PyG, encodings precomputed |")
    print("|---|---|---|---|---|")
    sides = [ours["buckets"], ours["one padded batch"], theirs["per-batch"]["phases"], theirs["precomputed"]["phases"]]
    total = [0.0] * len(sides)
    for k in keys:
        cells = []
        for i, side in enumerate(sides):
            total[i] += side.get(k, 0.0)
            cells.append(f"{side.get(k, 0.0):.2f}")
        print(f"| {k} | " + " | ".join(cells) + " |")
    ratio = lambda t: f"{t:.2f} ({t / total[0]:.2f}× / {t / total[1]:.2f}×)"
    print(f"| **training epoch** | **{total[0]:.2f}** | {total[1]:.2f} | {ratio(total[2])} | {ratio(total[3])} |")
    print("\n(ratios: Python's time over basin's with size buckets / with one padded batch; basin's encodings are computed once per dataset before training, as `pe` of the precomputed column is; `pe` of basin's epoch is in `data`)")
    return {"model": args.epoch_model, "basin": ours, "pytorch": theirs, "train_graphs": train_graphs}


def anomaly_epoch_table(args, env):
    """Tolokers training epochs of the `et-anomaly` example on each side, split by phase:
    `--anomaly-epochs` epochs each, the first (warm-up) reported apart and the median of the
    others per phase."""
    basin = os.path.join(ROOT, "target", "release", "basin")
    run(["cargo", "build", "--release", "-p", "basin-cli"], env)
    n = args.anomaly_epochs
    if n < 2:
        sys.exit("compare: --anomaly-epochs must be ≥ 2 (the first epoch is the warm-up)")
    toml = run([basin, "train", "--example", "et-anomaly"], env)
    toml, k = re.subn(r"^epochs = \d+", f"epochs = {n}", toml, flags=re.M)
    if k != 1:
        sys.exit(f"compare: the et-anomaly example has {k} `epochs` lines, expected 1")
    work = tempfile.mkdtemp(prefix="basin_anomaly_epoch_")
    try:
        cfg = os.path.join(work, "run.toml")
        with open(cfg, "w") as f:
            f.write(toml)
        out = os.path.join(work, "out")
        run([basin, "train", cfg, "--out", out, "--data-dir", os.path.abspath(args.data), "--device", "cpu", "--quiet"], env)
        with open(os.path.join(out, "run-0", "record.json")) as f:
            ours = [e["phases"] for e in json.load(f)["epochs"]]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    script = os.path.join(ROOT, "benches", "et_anomaly_epoch.py")
    npz = os.path.join(os.path.abspath(args.data), "anomaly", "tolokers.npz")
    threads = env.get("OMP_NUM_THREADS", "2")
    theirs = {}
    # The reference's per-edge messages, a COO product, autograd, and basin's own kernels
    # (sampled matmul + weighted embedding_bag) called from Python.
    for spmm, grad, label in [("scatter", "closed-form", "messages"), ("sparse", "closed-form", "COO sparse.mm"),
                              ("scatter", "autograd", "autograd"), ("csr", "closed-form", "basin's kernels")]:
        text = run([args.python, script, "--data", npz, "--epochs", str(n), "--spmm", spmm, "--grad", grad, "--threads", threads], env)
        theirs[label] = [e["phases"] for e in json.loads(text.strip().splitlines()[-1])["epochs"]]
    keys = ["data", "forward", "backward", "optimiser", "evaluation"]
    sides = [("basin", ours)] + [(f"PyTorch + PyG ({name})", eps) for name, eps in theirs.items()]
    print(f"\nTolokers (11,758 nodes, 1,038,000 directed edges), `basin train --example et-anomaly` model, full batch; seconds, median of epochs 2–{n}:\n")
    print("| phase | " + " | ".join(name for name, _ in sides) + " |")
    print("|" + "---|" * (len(sides) + 1))
    steady = [0.0] * len(sides)
    for key in keys:
        cells = []
        for i, (_, eps) in enumerate(sides):
            v = statistics.median(e.get(key, 0.0) for e in eps[1:])
            steady[i] += v
            cells.append(f"{v:.3f}")
        print(f"| {key} | " + " | ".join(cells) + " |")
    print("| **training epoch** | " + " | ".join(f"**{t:.2f}**" if i == 0 else f"{t:.2f} ({t / steady[0]:.2f}×)" for i, t in enumerate(steady)) + " |")
    first = [sum(eps[0].get(key, 0.0) for key in keys) for _, eps in sides]
    print("| first epoch (warm-up) | " + " | ".join(f"{t:.2f}" for t in first) + " |")
    print("\n(ratios: Python's time over basin's; the last column runs basin's algorithm from Python, so its ratio is the language's share of the difference)")
    return {"epochs": n, "basin": ours, "pytorch": theirs}


def step_table(args, env, mem_env):
    """Sides 1–3: the ET step and the training step against the PyTorch anchor."""
    script = os.path.join(args.anchors, "bench_et_pytorch.py")
    if not os.path.exists(script):
        sys.exit(f"compare: the PyTorch anchor {script} is missing "
                 "(set BASIN_CHECKS or pass --anchors DIR)")

    before = anchor(args.python, script, args.compile, env)
    jax = [jax_anchor(args.jax, env)] if args.jax else []
    # basin under the anchor's own protocol (short runs, variants interleaved), then under
    # criterion's sustained sampling.
    out = run(["cargo", "run", "--release", "-q", "-p", "basin-benches", "--bin", "et_step_anchor"], env)
    same_protocol = json.loads(out.strip().splitlines()[-1])
    if not args.no_cargo:
        run(["cargo", "bench", "-p", "basin-benches", "--bench", "energy", "--", "et_step_dense|train_step/"], env)
    after = anchor(args.python, script, args.compile, env)
    if args.jax:
        jax.append(jax_anchor(args.jax, env))
    # The memory pass: `train_step` prints its peak-memory lines before criterion filters
    # anything, and a filter that matches no benchmark times nothing.
    memory = {}
    out = run(["cargo", "bench", "-p", "basin-benches", "--bench", "energy", "--", "memory_lines_only"], mem_env)
    for m in re.finditer(r"^train_step (\w+)[^:]*: peak RSS \d+ MiB \((\d+) MiB above", out, flags=re.M):
        memory[m.group(1)] = float(m.group(2))
    torch_memory = pytorch_train_memory(args.python, args.anchors, mem_env)

    floor, floor_s = spread(before, after, "floor")
    rows = []  # (what, step ms text, step ms, train ms text, train ms)
    for label, key, tkey in [
        ("PyTorch eager, autograd of the energy", "autograd", "train_autograd"),
        ("PyTorch eager, closed-form gradient", "closed", "train_closed"),
        ("PyTorch torch.compile, closed form", "compiled", None),
    ]:
        s, s_txt = spread(before, after, key)
        t, t_txt = spread(before, after, tkey) if tkey else (None, "–")
        rows.append((label, s_txt, s, t_txt, t))
    if jax:
        s, s_txt = spread(*jax, "step_ms")
        t, t_txt = spread(*jax, "train_step_ms")
        rows.append((f"JAX {jax[0]['jax']} jit(value_and_grad)", s_txt, s, t_txt, t))
    basin = {
        "closed_form": criterion("et_step_dense_*/closed_form"),
        "closed_form_grad_only": criterion("et_step_dense_*/closed_form_grad_only"),
        "autograd": criterion("et_step_dense_*/autograd"),
        "train": criterion("train_step/dense_T4_forward_backward"),
        "train_autograd": criterion("train_step/dense_T4_forward_backward_autograd"),
    }
    for label, key, tkey in [
        ("basin closed_form (energy + gradient), anchor protocol", "closed_form", "train"),
        ("basin closed_form_grad_only, anchor protocol", "closed_form_grad_only", None),
        ("basin autograd, anchor protocol", "autograd", None),
    ]:
        s, t = same_protocol.get(key), same_protocol.get(tkey) if tkey else None
        rows.append((label, f"{s:.1f}" if s else "–", s, f"{t:.1f}" if t else "–", t))
    for label, key, tkey in [
        ("basin closed_form (energy + gradient), criterion", "closed_form", "train"),
        ("basin closed_form_grad_only, criterion", "closed_form_grad_only", None),
        ("basin autograd, criterion", "autograd", "train_autograd"),
    ]:
        s, t = basin[key], basin[tkey] if tkey else None
        rows.append((label, f"{s:.1f}" if s else "–", s, f"{t:.1f}" if t else "–", t))

    eager, _ = spread(before, after, "closed")
    eager_train, _ = spread(before, after, "train_closed")
    compiled, _ = spread(before, after, "compiled")
    print(f"\nB=32 N=128 D=128 H=12 Y=64 K=512, float32, {env['OMP_NUM_THREADS']} threads; "
          f"matmul rate {spread(before, after, 'matmul_gflops')[1]} GFLOP/s; FLOP floor {floor_s} ms per step\n")
    print("| what | step (ms) | × floor | × PyTorch closed form | training step T=4 (ms) | × PyTorch closed form |")
    print("|---|---|---|---|---|---|")
    for label, s_txt, s, t_txt, t in rows:
        xf = f"{s / floor:.2f}" if s and floor else "–"
        xe = f"{s / eager:.2f}" if s and eager else "–"
        xt = f"{t / eager_train:.2f}" if t and eager_train else "–"
        print(f"| {label} | {s_txt} | {xf} | {xe} | {t_txt} | {xt} |")
    result = {"pytorch_before": before, "pytorch_after": after, "jax": jax, "basin_ms": basin, "basin_anchor_protocol_ms": same_protocol}
    g = same_protocol["closed_form_grad_only"]
    if g and floor:
        print(f"\ngoal 1: gradient-only step {g:.1f} ms = {g / floor:.2f}× the floor (target ≤ 1.25×)"
              + (f", {g / compiled:.2f}× torch.compile (target ≤ 1)" if compiled else ""))
    t = same_protocol["train"]
    if t and eager_train:
        print(f"goal 2: training step {t:.0f} ms = {t / eager_train:.2f}× PyTorch eager closed form (target < 1)")
    if t and jax:
        jt, _ = spread(*jax, "train_step_ms")
        js, _ = spread(*jax, "step_ms")
        print(f"goal 2: training step {t:.0f} ms = {t / jt:.2f}× JAX jit (target < 1); "
              f"step (energy + gradient) {same_protocol['closed_form']:.1f} ms = {same_protocol['closed_form'] / js:.2f}× JAX's")
    print(f"goal 2: peak memory of one training step above the resident state (MiB): basin closed form {memory.get('closed_form', '–')}, autograd {memory.get('autograd', '–')}; "
          f"PyTorch closed form {torch_memory['train_closed']:.0f}, autograd {torch_memory['train_autograd']:.0f} (target: basin ≤ PyTorch)")
    result["train_memory_mib"] = {"basin": memory, "pytorch": torch_memory}
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=sys.executable, help="Python with torch==2.11.0 (default: this one)")
    ap.add_argument("--anchors", default=os.environ.get("BASIN_CHECKS", ""),
                    help="folder of bench_et_pytorch.py (default: $BASIN_CHECKS)")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile of the closed form")
    ap.add_argument("--pe", action="store_true", help="also compare the Laplacian PE with scipy's eigh loop")
    ap.add_argument("--jax", metavar="PYTHON", help="also time benches/et_step_jax.py with this Python (needs jax[cpu])")
    ap.add_argument("--no-cargo", action="store_true", help="read existing criterion results")
    ap.add_argument("--epoch", action="store_true", help="also one NCI1 training epoch: `basin train` against benches/et_graph_epoch.py")
    ap.add_argument("--epoch-model", default="cpu", choices=["cpu", "paper"], help="the model of --epoch: the et-graph example's (cpu) or Table 9's sizes (paper)")
    ap.add_argument("--anomaly-epoch", action="store_true", help="also tolokers training epochs: `basin train --example et-anomaly` against benches/et_anomaly_epoch.py")
    ap.add_argument("--anomaly-epochs", type=int, default=5, help="epochs per side of --anomaly-epoch (the first is reported apart)")
    ap.add_argument("--no-step", action="store_true", help="skip the ET step and training-step sides (1–3)")
    default_data = os.environ.get("BASIN_DATA_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "basin", "data")
    ap.add_argument("--data", default=default_data,
                    help="data directory (tu/NCI1, anomaly/tolokers.npz; default: $BASIN_DATA_DIR, "
                         "else the user cache ~/.cache/basin/data)")
    ap.add_argument("--json", default=os.path.join(ROOT, "target", "compare.json"))
    args = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "2")
    # Memory is measured in passes of its own with a fixed glibc mmap threshold, so that freed
    # large blocks go back to the system and a step's peak counts what it allocates; timings
    # run without it (every large allocation would then be a fresh mmap, which slows both
    # sides by up to 2×).
    mem_env = dict(env, MALLOC_MMAP_THRESHOLD_="131072")
    result = {} if args.no_step else step_table(args, env, mem_env)
    if args.pe:
        pe_script = os.path.join(ROOT, "crates", "basin-graph", "scripts", "scipy_pe_loop.py")
        text = run([args.python, pe_script, "NCI1", "DD"], env)
        if not args.no_cargo:
            run(["cargo", "bench", "-p", "basin-benches", "--bench", "graph", "--", "laplacian_pe/"], env)
        pe = {}
        for name in ["NCI1", "DD"]:
            m = re.search(rf"{name}\b.*?total[^\d]*([\d.]+) s", text)
            ours = criterion(f"laplacian_pe/{name}_k15_cls")
            if m and ours:
                scipy_s = float(m.group(1))
                pe[name] = {"scipy_s": scipy_s, "basin_s": ours / 1e3}
                print(f"goal 5: {name} Laplacian PE: basin {ours / 1e3:.2f} s, scipy eigh loop {scipy_s:.2f} s → {scipy_s / (ours / 1e3):.1f}× faster (target ≥ 5×)")
        result["pe"] = pe
    if args.epoch:
        result["epoch"] = epoch_table(args, env)
    if args.anomaly_epoch:
        result["anomaly_epoch"] = anomaly_epoch_table(args, env)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json + ".tmp", "w") as f:
        json.dump(result, f, indent=2)
    os.replace(args.json + ".tmp", args.json)
    print(f"\ncompare: wrote {os.path.relpath(args.json, ROOT)}")


if __name__ == "__main__":
    main()
