"""basin's Hopfield layers beside ml-jku's hflayers, in one process on one libtorch.

1. Shapes: hflayers' README examples and its usual calls (self-association, the
   (stored, state, projected) tuple, a padding mask, pooling, lookup), run on both libraries
   with the same arguments; every output shape must agree.
   Values: the same calls with hflayers' weights drawn at random (where the maths is the
   same: no q/k/v projection biases, one LayerNorm for keys and values) and copied into
   basin's layer; the largest difference of the outputs.
2. Time: a multiple-instance-learning training step (HopfieldPooling over bags of instances,
   a linear head, binary cross-entropy, backward, Adam), the same data and sizes for both,
   medians over repetitions after warm-ups, interleaved; the ratio hflayers / basin.

hflayers is not on PyPI: pass a folder holding its `hflayers` package (a clone of
github.com/ml-jku/hopfield-layers). Usage:
python benches/hopfield_layers.py --hflayers DIR [--threads 2] [--reps 20]; prints JSON.
"""
import argparse
import json
import statistics
import sys
import time

import torch

import basin


def calls():
    """hflayers' README examples and its usual calls: name → (build(lib), call(layer))."""
    torch.manual_seed(0)
    Y, R = torch.randn(4, 12, 16), torch.randn(4, 5, 16)
    mask = torch.zeros(4, 12, dtype=torch.bool)
    mask[1, 8:] = True
    return {
        "Hopfield(input_size)(Y)": (lambda m: m.Hopfield(input_size=16), lambda l: l(Y)),
        "Hopfield(...)((Y, R, Y))": (
            lambda m: m.Hopfield(input_size=16, hidden_size=8, output_size=10, num_heads=2,
                                 scaling=0.25, update_steps_max=2),
            lambda l: l((Y, R, Y))),
        "Hopfield((Y, R, Y), stored_pattern_padding_mask)": (
            lambda m: m.Hopfield(input_size=16, num_heads=4),
            lambda l: l((Y, R, Y), stored_pattern_padding_mask=mask)),
        "HopfieldPooling(input_size)(Y)": (lambda m: m.HopfieldPooling(input_size=16),
                                           lambda l: l(Y)),
        "HopfieldPooling(quantity=3, hidden_size=8)(Y, mask)": (
            lambda m: m.HopfieldPooling(input_size=16, hidden_size=8, quantity=3),
            lambda l: l(Y, stored_pattern_padding_mask=mask)),
        "HopfieldLayer(input_size)(R)": (lambda m: m.HopfieldLayer(input_size=16),
                                         lambda l: l(R)),
        "HopfieldLayer(quantity=7)(R)": (lambda m: m.HopfieldLayer(input_size=16, quantity=7),
                                         lambda l: l(R)),
    }


def shapes(hf):
    out = {}
    for name, (make, call) in calls().items():
        theirs, ours = tuple(call(make(hf)).shape), tuple(call(make(basin)).shape)
        out[name] = {"hflayers": theirs, "basin": ours, "same": theirs == ours}
    return out


def randomise(hf):
    """hflayers' weights drawn at random, where the maths of the two is the same: its q/k/v
    projections' biases zero (basin's projections have none) and its LayerNorm of the
    projected patterns equal to the stored patterns' (basin normalises Y once, for keys and
    values)."""
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("in_proj_bias") or name.endswith("_proj_bias"):
                p.zero_()
            elif "norm" in name:
                p.copy_(torch.randn_like(p) * 0.1 + float(name.endswith("weight")))
            else:
                p.copy_(torch.randn_like(p) * 0.5)
        state = hf.state_dict()
        for key in state:
            if "norm_pattern_projection" in key:
                state[key].copy_(state[key.replace("norm_pattern_projection",
                                                   "norm_stored_pattern")])


def port(hf, ours):
    """Copies an hflayers layer's weights into basin's layer of the same arguments."""
    theirs = {k: v.detach() for k, v in hf.state_dict().items()}
    pre = "hopfield." if "hopfield.association_core.out_proj.weight" in theirs else ""
    core = pre + "association_core."
    mine = ours.state_dict()
    rows = [mine[pre + n].shape[0] for n in ("w_q", "w_k", "w_v")]
    if core + "in_proj_weight" in theirs:
        wq, wk, wv = theirs[core + "in_proj_weight"].split(rows)
    else:
        wq, wk, wv = (theirs[core + f"{n}_proj_weight"] for n in "qkv")
    new = {pre + "w_q": wq, pre + "w_k": wk, pre + "w_v": wv,
           pre + "out.weight": theirs[core + "out_proj.weight"],
           pre + "out.bias": theirs[core + "out_proj.bias"]}
    for ours_name, their_name in (("norm_state", "norm_state_pattern"),
                                  ("norm_stored", "norm_stored_pattern")):
        for leaf in ("weight", "bias"):
            new[f"{pre}{ours_name}.{leaf}"] = theirs[f"{pre}{their_name}.{leaf}"]
    for ours_name, their_name in (("queries", "pooling_weights"), ("lookup", "lookup_weights")):
        if their_name in theirs:
            new[ours_name] = theirs[their_name]
    ours.load_state_dict(new)


def values(hf):
    """Each call's largest difference between the two libraries' outputs, hflayers' random
    weights (see :func:`randomise`) copied into basin's layer."""
    out = {}
    for name, (make, call) in calls().items():
        torch.manual_seed(1)
        theirs, ours = make(hf), make(basin)
        randomise(theirs)
        port(theirs, ours)
        a, b = call(theirs), call(ours)
        out[name] = {"max_abs_diff": (a - b).abs().max().item(),
                     "max_abs_output": a.abs().max().item()}
    return out


def mil_step_ms(module, reps, bags=64, instances=40, width=230):
    torch.manual_seed(0)
    x = torch.randn(bags, instances, width)
    mask = torch.arange(instances)[None, :] >= torch.randint(10, instances + 1, (bags, 1))
    y = torch.randint(0, 2, (bags,)).float()

    def build(lib):
        torch.manual_seed(1)
        pool = lib.HopfieldPooling(input_size=width, hidden_size=32, num_heads=4,
                                   update_steps_max=0)
        head = torch.nn.LazyLinear(1)
        head(pool(x[:1]))
        return pool, head, torch.optim.Adam([*pool.parameters(), *head.parameters()], lr=1e-3)

    pool, head, opt = build(module)

    def step():
        logits = head(pool(x, stored_pattern_padding_mask=mask)).squeeze(-1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hflayers", required=True, help="folder holding the hflayers package")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=20)
    a = p.parse_args()
    sys.path.insert(0, a.hflayers)
    import hflayers

    torch.set_num_threads(a.threads)
    result = {"shapes": shapes(hflayers), "values": values(hflayers)}
    steps = {"hflayers": mil_step_ms(hflayers, a.reps), "basin": mil_step_ms(basin, a.reps)}
    for f in steps.values():
        for _ in range(3):
            f()
    times = {k: [] for k in steps}
    for _ in range(a.reps):
        for k, f in steps.items():  # interleaved, so drift hits both alike
            t = time.perf_counter()
            f()
            times[k].append((time.perf_counter() - t) * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    result["mil_step_ms"] = med
    result["hflayers_over_basin"] = med["hflayers"] / med["basin"]
    result["setup"] = {"torch": torch.__version__, "threads": a.threads, "reps": a.reps,
                       "bags": 64, "instances": 40, "width": 230, "hidden": 32, "heads": 4}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
