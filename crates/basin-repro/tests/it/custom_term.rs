//! The `custom_term` example, run as a test: a term defined and registered in one file passes
//! the conformance suite and trains a graph classifier from a TOML run file that names it.

#[path = "../../examples/custom_term.rs"]
mod example;

use basin_core::testing::{conformance, lock_generator};
use example::{Projection, ProjectionConfig};

#[test]
fn the_example_term_passes_the_conformance_suite() {
    conformance::energy_term("projection", 2, |path, dim| {
        Box::new(Projection::new(path, dim, &ProjectionConfig { rank: 3 }))
    });
}

#[test]
fn the_example_trains_a_graph_classifier_from_toml() {
    let _g = lock_generator();
    let kinds: Vec<&str> = basin_core::registry::term_kinds()
        .iter()
        .map(|k| k.kind)
        .collect();
    assert!(kinds.contains(&"projection"), "{kinds:?}");
    let work = tempfile::tempdir().unwrap();
    let outcome = example::run(work.path()).unwrap();
    assert_eq!(outcome.runs.len(), 3);
    let acc: f64 = outcome
        .runs
        .iter()
        .map(|(_, m)| m["test_accuracy"])
        .sum::<f64>()
        / 3.0;
    assert!(
        acc > 0.8,
        "rings vs stars: mean accuracy {acc} (chance 0.5)"
    );
    // The trained model holds the new term's weights.
    let (tensors, _) = basin_core::checkpoint::read_file(
        &work
            .path()
            .join("run/repeat-0/fold-0/checkpoint.safetensors"),
    )
    .unwrap();
    assert!(
        tensors.iter().any(|(n, _)| n == "best.block0.projection.p"),
        "{:?}",
        tensors.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
}
