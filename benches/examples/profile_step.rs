//! Rough per-op timing of one dense ET step (development aid).
use std::time::Instant;
use tch::{Device, Kind, Tensor};

fn t(label: &str, reps: u32, mut f: impl FnMut() -> Tensor) -> Tensor {
    let _ = f();
    let s = Instant::now();
    let mut out = None;
    for _ in 0..reps {
        out = Some(f());
    }
    println!(
        "{label:<40} {:8.2} ms",
        s.elapsed().as_secs_f64() * 1e3 / reps as f64
    );
    out.unwrap()
}

fn main() {
    tch::manual_seed(0);
    let (b, n, d, h, y, k) = (32i64, 128i64, 128i64, 12i64, 64i64, 512i64);
    let o = (Kind::Float, Device::Cpu);
    let g = Tensor::randn([b, n, d], o);
    let w = Tensor::randn([2 * h * y, d], o) * 0.02;
    let wq = Tensor::randn([h * y, d], o) * 0.02;
    let xi = Tensor::randn([k, d], o) * 0.02;
    let _g = tch::no_grad_guard();
    let qk = t("proj g@W^T", 20, || g.matmul(&w.tr()));
    let parts = qk.view([b, n, 2 * h, y]).split(h, -2);
    let q = t("q transpose contiguous", 20, || {
        parts[0].transpose(1, 2).contiguous()
    });
    let kk = t("k transpose contiguous", 20, || {
        parts[1].transpose(1, 2).contiguous()
    });
    let logits = t("logits q@k^T", 20, || q.matmul(&kk.transpose(-1, -2)));
    t("diag fill", 20, || logits.diagonal(0, -2, -1).fill_(-1e30));
    let sm = t("softmax", 20, || logits.softmax(-1, Kind::Float));
    let (mx, arg) = logits.max_dim(-1, true);
    t("max_dim", 20, || logits.max_dim(-1, true).0);
    t("gather log", 20, || {
        (&mx - sm.gather(-1, &arg, false).log()).squeeze_dim(-1)
    });
    t("logsumexp", 20, || logits.logsumexp(-1, false));
    let tq = t("om@k", 20, || sm.matmul(&kk));
    t("om^T@q", 20, || sm.transpose(-1, -2).matmul(&q));
    let r = t("rows copy", 20, || tq.transpose(1, 2).reshape([b * n, -1]));
    let p1 = t("backproj mm", 20, || r.matmul(&wq));
    t("backproj addmm", 20, || p1.addmm(&r, &wq));
    let hh = t("hop g@xi^T", 20, || g.matmul(&xi.tr()));
    let rl = t("relu", 20, || hh.relu());
    t("hop energy square sum", 20, || {
        rl.square().sum_dim_intlist(-1, false, Kind::Float)
    });
    t("hop r@xi", 20, || rl.matmul(&xi));
    let vs = tch::nn::VarStore::new(Device::Cpu);
    let block = basin_core::EnergyBlock::new(
        &vs.root(),
        &basin_core::BlockConfig::et(128, 12, 64, 512, 1),
    )
    .unwrap();
    let s = basin_core::Structure::full();
    let gg = block.norm.forward(&g);
    t("block norm", 20, || block.norm.forward(&g));
    t("energy_and_grad total", 20, || {
        block.energy.energy_and_grad(&gg, &s).1
    });
    t("grad only", 20, || block.energy.grad(&gg, &s));
    t("energy only", 20, || block.energy.energy(&gg, &s));
}
