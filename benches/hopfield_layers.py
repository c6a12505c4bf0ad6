"""basin's Hopfield layers beside ml-jku's hflayers, in one process on one libtorch.

1. Shapes: hflayers' README examples and its usual calls (self-association, the
   (stored, state, projected) tuple, a padding mask, pooling, lookup), run on both libraries
   with the same arguments; every output shape must agree.
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


def shapes(hf):
    torch.manual_seed(0)
    Y, R = torch.randn(4, 12, 16), torch.randn(4, 5, 16)
    mask = torch.zeros(4, 12, dtype=torch.bool)
    mask[1, 8:] = True
    calls = {
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
    out = {}
    for name, (make, call) in calls.items():
        theirs, ours = tuple(call(make(hf)).shape), tuple(call(make(basin)).shape)
        out[name] = {"hflayers": theirs, "basin": ours, "same": theirs == ours}
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
    result = {"shapes": shapes(hflayers)}
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
