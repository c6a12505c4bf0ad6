"""ET's block trained at its attractor: basin's implicit gradient beside torchdeq's DEQ.

One ET block (energy attention, ET eq. 3, and the ReLU Hopfield memory, eq. 5, under gradient
flow x ← x − α ∂E/∂g, eq. 6) at the CIFAR-10 CPU configuration of the implicit benchmark
(B = 32 sequences of 65 tokens, D = 64, 4 heads of 16, K = 256 memories, α = 0.1), float32:

- basin: ``basin.EnergyBlock`` with ``gradient = {mode = "implicit", forward_solver =
  "anderson"}``: the forward settles by Anderson acceleration, ``loss.backward()`` solves the
  adjoint (GMRES);
- torchdeq 0.1.0 (``pip install torchdeq==0.1.0``): the same step written in PyTorch with the
  closed-form gradient of the PyTorch anchor, on basin's very weights, in ``get_deq(core=
  "indexing", f_solver="anderson", ift=True)``: Anderson forward, implicit backward (its
  ``b_solver``).

Both stop the forward at the same relative residual ``‖f(z) − z‖ / ‖f(z)‖`` and cap, with the
same Anderson history; each training step is forward, MSE to a fixed target, backward and an
Adam step. First a check that the two maps are the same (one step from the same tokens) and
settle to the same fixed point. Then each side runs in a fresh process of its own, the two
interleaved: forward iterations, final residual, time per training step (median), and the
step's peak resident memory above the state before it (VmHWM, reset through
/proc/self/clear_refs, after one warm-up step).

Usage: python benches/torchdeq_side_by_side.py [--reps 10] [--threads 2] [--tol 1e-4]
[--max-iter 200] [--torchdeq-backward anderson,fixed_point_iter]; prints JSON.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

import basin

SIZES = dict(batch=32, tokens=65, dim=64, heads=4, head_dim=16, memories=256, alpha=0.1,
             field=1.0)


def block(tol, max_iter, history, adjoint="gmres"):
    torch.manual_seed(0)
    s = SIZES
    return basin.EnergyBlock(
        dim=s["dim"], steps=max_iter,
        terms=[basin.terms.Attention(heads=s["heads"], head_dim=s["head_dim"]),
               basin.terms.HopfieldMemory(memories=s["memories"]),
               basin.terms.InputField(strength=s["field"])],
        dynamics=basin.dynamics.GradientFlow(alpha=s["alpha"]),
        gradient={"mode": "implicit", "tol": tol, "max_steps": max_iter,
                  "forward_solver": "anderson", "anderson_history": history,
                  "solver": adjoint, "solver_tol": tol, "solver_iters": max_iter})


def data():
    g = torch.Generator().manual_seed(1)
    s = SIZES
    x0 = torch.randn(s["batch"], s["tokens"], s["dim"], generator=g)
    target = torch.randn(s["batch"], s["tokens"], s["dim"], generator=g)
    return x0, target


class EtStep(torch.nn.Module):
    """The ET step in plain PyTorch, the anchor's closed form: ``f(z, x₀) = z − α ∂E/∂g`` at
    ``g = LN(z)`` (ET eq. 1), attention over every other token, the memory, and the input
    field ``−λ Σ ⟨g, LN(x₀)⟩`` (basin's ``InputField``: the DEQ's input injection), on the
    tensors of ``block``; then, with ``standardise``, each token standardised, as basin's
    settling map does. Without it the map has no fixed point in z: the force's component
    along z never vanishes on the LN sphere, so z grows without bound while LN(z) settles."""

    def __init__(self, block, standardise=True):
        super().__init__()
        self.standardise = standardise
        self.wq, self.wk = block.attention.w_q, block.attention.w_k
        self.xi, self.gamma, self.delta = block.hopfield.xi, block.norm.gamma, block.norm.delta
        self.log_strength = dict(block.named_parameters())["input-field.log_strength"]
        self.beta = block.attention.beta.view(1, -1, 1, 1)
        self.alpha = SIZES["alpha"]

    def norm(self, z):
        xm = z - z.mean(-1, keepdim=True)
        return self.gamma * xm / torch.sqrt(xm.square().mean(-1, keepdim=True) + 1e-5) + self.delta

    def forward(self, z, x0):
        g = self.norm(z)
        q = torch.einsum("bnd,hyd->bhny", g, self.wq)
        k = torch.einsum("bnd,hyd->bhny", g, self.wk)
        n = z.shape[1]
        own = torch.eye(n, dtype=torch.bool, device=z.device)
        a = torch.softmax((self.beta * q @ k.transpose(-1, -2)).masked_fill(own, float("-inf")),
                          -1)
        grad = -(torch.einsum("bhny,hyd->bnd", a @ k, self.wq)
                 + torch.einsum("bhny,hyd->bnd", a.transpose(-1, -2) @ q, self.wk))
        grad = grad - torch.relu(g @ self.xi.T) @ self.xi - self.log_strength.exp() * self.norm(x0)
        z = z - self.alpha * grad
        return standardise(z) if self.standardise else z


def standardise(z):
    """Each token to zero mean and unit variance (no ε): the representative of its LN class
    that basin's settling map keeps, since LN forgets each token's mean and scale."""
    xm = z - z.mean(-1, keepdim=True)
    return xm / xm.square().mean(-1, keepdim=True).sqrt()


def check(a):
    """The two maps agree on one step and on the settled fixed point (evaluation mode)."""
    from torchdeq import get_deq

    b = block(a.tol, a.max_iter, a.history).eval()
    x0, _ = data()
    one = basin.EnergyBlock(b.config().replace(f"steps = {a.max_iter}", "steps = 1")
                            .split("[gradient]")[0]).eval()
    one.load_state_dict(b.state_dict())
    step, raw = EtStep(b), EtStep(b, standardise=False)
    f = lambda z: step(z, x0)  # noqa: E731
    with torch.no_grad():
        step_diff = (one(x0) - raw(x0, x0)).abs().max().item()
        ours = b(x0)
        deq = get_deq(core="indexing", f_solver="anderson", f_max_iter=a.max_iter, f_tol=a.tol,
                      f_stop_mode="rel", eval_f_max_iter=a.max_iter, ift=True)
        deq.eval()
        theirs, info = deq(f, standardise(x0), solver_kwargs={"m": a.history})
        unstandardised, raw_info = deq(lambda z: raw(z, x0), x0, solver_kwargs={"m": a.history})
    stats = b.settle_stats()
    z_ours, z_theirs = ours, theirs[-1]
    with torch.no_grad():
        # z* is unique only up to what LN forgets (each token's mean and scale): compare the
        # normalised states, and the residual of g.
        g_ours, g_theirs = step.norm(z_ours), step.norm(z_theirs)

        def token_residual(z):
            # One step from the state's representative of norm √D (the point LN maps to g):
            # how far the normalised state moves, per token, against its size.
            xm = z - z.mean(-1, keepdim=True)
            z = xm / xm.square().mean(-1, keepdim=True).sqrt()
            g = step.norm(z)
            return ((step.norm(f(z)) - g).norm(dim=-1) / g.norm(dim=-1)).max().item()

        return {"one_step_max_abs_diff": step_diff,
                "torchdeq_raw_step": {
                    "z_norm": unstandardised[-1].norm(dim=-1).max().item(),
                    "reported_rel_residual": float(raw_info["rel_lowest"].max()),
                    "token_residual": token_residual(unstandardised[-1])},
                "normalised_fixed_point_max_abs_diff": (g_ours - g_theirs).abs().max().item(),
                "normalised_scale": g_ours.abs().max().item(),
                "z_norm": {"basin": z_ours.norm(dim=-1).max().item(),
                           "torchdeq": z_theirs.norm(dim=-1).max().item()},
                "token_residual": {"basin": token_residual(z_ours),
                                   "torchdeq": token_residual(z_theirs)},
                "basin_eval_steps_per_sample": stats.get("settle_steps"),
                "torchdeq_eval_steps": float(info["nstep"].float().mean()),
                "torchdeq_eval_rel_residual": float(info["rel_lowest"].max())}


def peak_reset():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def side(a):
    """One side's training steps in this process: JSON on stdout."""
    torch.set_num_threads(a.threads)
    b = block(a.tol, a.max_iter, a.history).train()
    x0, target = data()
    if a.side == "basin":
        params = list(b.parameters())

        def forward():
            return b(x0)
    else:
        from torchdeq import get_deq

        step_map = EtStep(b)
        params = list(b.parameters())
        deq = get_deq(core="indexing", f_solver="anderson", f_max_iter=a.max_iter, f_tol=a.tol,
                      f_stop_mode="rel", ift=True, b_solver=a.torchdeq_backward,
                      b_max_iter=a.max_iter, b_tol=a.tol, b_stop_mode="rel")
        deq.train()
        infos, backward_infos, calls = [], [], [0]

        def f(z):
            calls[0] += 1
            return step_map(z, x0)

        def forward():
            calls[0] = 0
            z, info = deq(f, standardise(x0), solver_kwargs={"m": a.history},
                          backward_writer=backward_infos.append)
            infos.append(dict(info, calls=calls[0] - 1))  # the last call: the IFT's graph
            return z[-1]
    opt = torch.optim.Adam(params, lr=1e-3)

    def step():
        loss = (forward() - target).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step()  # warm-up
    if a.side == "basin":
        b.settle_stats()
    else:
        infos.clear()
        backward_infos.clear()
    before = rss_kib("VmRSS")
    peak_reset()
    times, losses = [], []
    for _ in range(a.reps):
        t = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - t)
    out = {"step_ms": statistics.median(times) * 1e3,
           "peak_mib_above_start": (rss_kib("VmHWM") - before) / 1024,
           "loss_first": losses[0], "loss_last": losses[-1]}
    if a.side == "basin":
        s = b.settle_stats()
        out.update(forward_steps=s["settle_steps"], forward_residual=s["settle_residual"],
                   adjoint_iterations=s.get("adjoint_iterations"),
                   adjoint_residual=s.get("adjoint_residual"), all=s)
    else:
        out.update(forward_steps=statistics.mean(i["calls"] for i in infos),
                   forward_residual=max(float(i["rel_lowest"].max()) for i in infos),
                   adjoint_iterations=statistics.mean(
                       float(i["nstep"].float().mean()) for i in backward_infos),
                   adjoint_residual=max(float(i["rel_lowest"].max()) for i in backward_infos))
    print(json.dumps(out))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--max-iter", type=int, default=200)
    p.add_argument("--history", type=int, default=5)
    p.add_argument("--torchdeq-backward", default="anderson,fixed_point_iter",
                   help="torchdeq's b_solver(s), comma-separated (anderson, broyden, "
                        "fixed_point_iter)")
    p.add_argument("--rounds", type=int, default=2, help="interleaved processes per side")
    p.add_argument("--side", choices=["basin", "torchdeq"], help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.side:
        side(a)
        return
    torch.set_num_threads(a.threads)
    result = {"setup": dict(SIZES, tol=a.tol, max_iter=a.max_iter, history=a.history,
                            reps=a.reps, threads=a.threads, torch=torch.__version__,
                            torchdeq_backward=a.torchdeq_backward),
              "check": check(a), "runs": {}}
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    sides = [("basin", None)] + [("torchdeq", b) for b in a.torchdeq_backward.split(",")]
    for _ in range(a.rounds):
        for name, backward in sides:
            args = dict(vars(a), torchdeq_backward=backward or "-")
            cmd = [sys.executable, __file__, "--side", name] + [
                f"--{k.replace('_', '-')}={v}" for k, v in args.items()
                if k not in ("side", "rounds")]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            key = name if backward is None else f"torchdeq ({backward} backward)"
            result["runs"].setdefault(key, []).append(
                json.loads(done.stdout.strip().splitlines()[-1]))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
