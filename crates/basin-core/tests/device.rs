//! Device selection, and the CUDA checks (run where a GPU is visible; on a CPU-only machine
//! they check that CUDA is reported as unavailable with a reason instead).
#![allow(clippy::unwrap_used)]

mod common;

use basin_core::device::{self, DeviceChoice};
use basin_core::testing::max_rel_error;
use basin_core::{Activation, Energy, EnergySum, Structure};
use common::*;
use tch::{Device, Kind};

#[test]
fn device_choice_parses_and_rejects_nonsense() {
    assert_eq!("CPU".parse::<DeviceChoice>().unwrap(), DeviceChoice::Cpu);
    assert_eq!("cuda".parse::<DeviceChoice>().unwrap(), DeviceChoice::Cuda);
    assert_eq!("auto".parse::<DeviceChoice>().unwrap(), DeviceChoice::Auto);
    let err = "tpu".parse::<DeviceChoice>().unwrap_err().to_string();
    assert!(err.contains("BASIN_DEVICE") && err.contains("tpu"), "{err}");
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
