//! Device selection, and the CUDA checks (run where a GPU is visible; on a CPU-only machine
//! they check that CUDA is reported as unavailable with a reason instead).

use crate::common::*;
use basin_core::device::{self, DeviceChoice};
use basin_core::testing::max_rel_error;
use basin_core::{Activation, Energy, EnergySum, Structure};
use tch::{Device, Kind};

#[test]
fn device_choice_parses_and_rejects_nonsense() {
    assert_eq!("CPU".parse::<DeviceChoice>().unwrap(), DeviceChoice::Cpu);
    assert_eq!("cuda".parse::<DeviceChoice>().unwrap(), DeviceChoice::Cuda);
    assert_eq!("auto".parse::<DeviceChoice>().unwrap(), DeviceChoice::Auto);
    let err = "tpu".parse::<DeviceChoice>().unwrap_err().to_string();
    assert!(
        err.contains("environment variable BASIN_DEVICE") && err.contains("tpu"),
        "{err}"
    );
    assert_eq!(device::select(DeviceChoice::Cpu).unwrap(), Device::Cpu);
}

#[test]
fn cuda_is_used_when_present_and_explained_when_absent() {
    let auto = device::select(DeviceChoice::Auto).unwrap();
    if device::cuda_available() {
        assert_eq!(auto, Device::Cuda(0));
    } else {
        assert_eq!(auto, Device::Cpu);
        let err = device::select(DeviceChoice::Cuda).unwrap_err().to_string();
        assert!(err.contains("CUDA was requested"), "{err}");
        println!("no CUDA device here: {err}");
    }
}

/// On a GPU: the dense and sparse energies and closed-form gradients agree with the CPU.
#[test]
fn cuda_matches_cpu() {
    if !device::cuda_available() {
        println!("skipped: no CUDA device");
        return;
    }
    tch::manual_seed(80);
    let mut vs = store();
    let att = attention(&vs, 6, 2, 4, true);
    let hop = hopfield(&vs, 6, 9, Activation::Relu);
    vs.double();
    let energy = EnergySum::new().with(1.0, att).with(1.0, hop);
    let g = tokens(3, 7, 6);
    let mask = random_mask(3, 7, 0.5);
    let cases = [
        ("full", Structure::full()),
        (
            "mask+padding",
            Structure::mask(mask.shallow_clone())
                .unwrap()
                .with_padding(padding(3, 7, 2))
                .unwrap(),
        ),
        ("sparse", Structure::sparse(edges_of(&mask))),
    ];
    let (e_cpu, g_cpu): (Vec<_>, Vec<_>) = cases
        .iter()
        .map(|(_, s)| energy.energy_and_grad(&g, s))
        .unzip();
    vs.set_device(Device::Cuda(0));
    let gc = g.to_device(Device::Cuda(0));
    let mask_c = mask.to_device(Device::Cuda(0));
    let cuda_cases = [
        Structure::full(),
        Structure::mask(mask_c.shallow_clone())
            .unwrap()
            .with_padding(padding(3, 7, 2).to_device(Device::Cuda(0)))
            .unwrap(),
        Structure::sparse(edges_of(&mask).to_device(Device::Cuda(0))),
    ];
    for (i, s) in cuda_cases.iter().enumerate() {
        let (e, d) = energy.energy_and_grad(&gc, s);
        assert_eq!(d.device(), Device::Cuda(0));
        assert!(
            max_rel_error(&e, &e_cpu[i], 1e-12) < 1e-9,
            "{}: energy differs on CUDA",
            cases[i].0
        );
        assert!(
            max_rel_error(&d, &g_cpu[i], 1e-12) < 1e-9,
            "{}: gradient differs on CUDA",
            cases[i].0
        );
        assert_eq!(d.kind(), Kind::Double);
    }
}

/// `BASIN_TF32`'s switch reaches libtorch's context and back (on any machine: the switch lives
/// in libtorch_cpu; only cuBLAS and cuDNN read it).
#[test]
fn tf32_switch_round_trips() {
    let before = device::tf32();
    device::set_tf32(true);
    assert!(device::tf32());
    device::set_tf32(false);
    assert!(!device::tf32());
    device::set_tf32(before);
}

/// On a GPU: a float32 ET descent (D = 128, 4 heads of 32, K = 512, 50 steps) against the same
/// descent in float64 on the CPU, with TF32 off and on. Off, the energy never rises beyond
/// float32 rounding; on, the trajectory stays within 1% of float64 and still descends (the
/// printed numbers are TF32's measured effect).
#[test]
fn cuda_float32_descent_with_and_without_tf32() {
    if !device::cuda_available() {
        println!("skipped: no CUDA device");
        return;
    }
    use basin_core::{AttentionConfig, DynamicsConfig, EnergyBlock, TraceOptions};
    let _generator = basin_core::testing::lock_generator();
    tch::manual_seed(81);
    let mut cfg = basin_core::testing::et_block(128, 4, 32, 512, 50);
    cfg.edit_terms(|a: &mut AttentionConfig| a.init_std = 0.05)
        .unwrap();
    cfg.dynamics = DynamicsConfig::gradient_flow(0.05);
    let mut vs = store();
    let blk = EnergyBlock::new(&vs.root(), &cfg).unwrap();
    let x = tokens(8, 64, 128);
    let s = Structure::full();
    vs.double();
    let run = |x: &tch::Tensor| {
        let (_, trace) = tch::no_grad(|| blk.run(x, &s, false, Some(TraceOptions::default())));
        trace
            .unwrap()
            .total
            .to_device(Device::Cpu)
            .to_kind(Kind::Double)
    };
    let reference = run(&x.to_kind(Kind::Double));
    vs.float();
    vs.set_device(Device::Cuda(0));
    let xc = x.to_kind(Kind::Float).to_device(Device::Cuda(0));
    let before = device::tf32();
    for tf32 in [false, true] {
        device::set_tf32(tf32);
        let e = run(&xc);
        let rel = max_rel_error(&e, &reference, 1e-12);
        let steps: Vec<Vec<f64>> = Vec::try_from(&e.tr().contiguous()).unwrap();
        let worst_rise = steps
            .iter()
            .flat_map(|row| {
                row.windows(2)
                    .map(|w| (w[1] - w[0]) / w[0].abs().max(1e-12))
            })
            .fold(f64::NEG_INFINITY, f64::max);
        println!(
            "tf32={tf32}: max relative error of the energy trace against CPU float64 {rel:.2e}; \
             largest step-to-step relative rise {worst_rise:.2e}"
        );
        assert!(rel < if tf32 { 1e-2 } else { 1e-4 }, "tf32={tf32}: {rel}");
        if !tf32 {
            assert!(worst_rise <= 1e-5, "float32 descent rose by {worst_rise}");
        }
        for row in &steps {
            assert!(
                row[row.len() - 1] < row[0],
                "tf32={tf32}: no descent {row:?}"
            );
        }
    }
    device::set_tf32(before);
}
