//! The example run files through the run-file layer: `--set` overrides and errors by line.

use basin_tasks::graph_classification::GraphRun;
use basin_tasks::overrides::apply_sets;
use basin_tasks::run_file::RunSpec;

use super::example;

fn sets(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

#[test]
fn sets_reach_nested_fields_array_elements_and_bare_strings() {
    let example = example("et-graph").unwrap();
    let text = apply_sets(
        &example,
        &sets(&[
            "architecture.batching.pe.k=15",
            "data=PROTEINS",
            "architecture.block.terms.1.memories = 256",
            "protocol.selection=\"loss\"",
            "protocol.repeats=3",
        ]),
        "f.toml",
    )
    .unwrap();
    let run = RunSpec::parse(&text, "f.toml").unwrap();
    let run = run.get::<GraphRun>().expect("a graph run file");
    let base = RunSpec::parse(&example, "f.toml").unwrap();
    let base = base.get::<GraphRun>().expect("a graph run file");
    assert_eq!(run.data, "PROTEINS");
    assert_eq!(run.architecture.batching.pe.as_ref().map(|p| p.k), Some(15));
    assert_eq!(base.architecture.batching.pe.as_ref().map(|p| p.k), Some(8));
    assert_eq!(run.protocol.repeats, 3);
    assert_ne!(run.architecture.block, base.architecture.block);
    assert!(text.contains("memories = 256"), "{text}");
    assert!(text.contains("selection = \"loss\""), "{text}");
}

#[test]
fn a_wrong_type_names_its_line_and_field() {
    let example = example("et-graph").unwrap();
    let line = 1 + example.lines().position(|l| l == "k = 8").unwrap();
    let e = RunSpec::parse(&example.replacen("k = 8", "k = -3", 1), "f.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("line {line}")) && e.contains("k = -3"),
        "{e}"
    );
    let e = RunSpec::parse("task = \"graph\"\n", "f.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("graph-classification"), "the tasks listed: {e}");
}

#[test]
fn bad_sets_are_refused_by_name() {
    let example = example("et-graph").unwrap();
    for (set, says) in [
        ("architecture.batching.pe.k", "KEY=VALUE"),
        ("architecture..k=3", "dotted path"),
        (
            "architecture.block.terms.7.memories=3",
            "`architecture.block.terms.7`: an index below 2",
        ),
        ("data.name=MUTAG", "`data` is a value"),
        ("protocol.selection=[1,", "not a TOML value"),
    ] {
        let e = apply_sets(&example, &sets(&[set]), "f.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("--set {set}")) && e.contains(says),
            "{set}: {e}"
        );
    }
    // A key the run file does not know is left to its parsing, which names the field.
    let text = apply_sets(
        &example,
        &sets(&["architecture.batching.pe.kk=8"]),
        "f.toml",
    )
    .unwrap();
    let e = RunSpec::parse(&text, "f.toml (with --set …)")
        .unwrap_err()
        .to_string();
    assert!(e.contains("kk"), "{e}");
}
