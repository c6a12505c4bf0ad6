//! The short deterministic fuzz pass of `cargo xtask test`: every reader, a few thousand
//! mutated inputs each, no panic, no allocation above 1 GiB (the counting allocator aborts).

#[test]
fn every_reader_refuses_bad_input_without_panicking() {
    basin_fuzz::alloc::set_bound(1 << 30);
    let inputs: usize = std::env::var("BASIN_FUZZ_INPUTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000);
    let data = basin_data::datadir::data_dir(None);
    let data = data.is_dir().then_some(data);
    let scratch = tempfile::tempdir().expect("scratch");
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for target in basin_fuzz::targets::all(data.as_deref(), false) {
        if target.seeds.is_empty() {
            eprintln!("skipped fuzzing {}: its dataset is missing", target.name);
            continue;
        }
        let stats = basin_fuzz::fuzz(&target, inputs, 1, scratch.path()).expect("scratch files");
        // The seeds themselves must be read (all but the hostile ones): a reader that refuses
        // everything would pass the fuzz trivially.
        assert!(
            stats.accepted > 0,
            "{}: accepted no input at all",
            target.name
        );
        if stats.panics > 0 {
            failures.push(format!("{}: {:?}", target.name, stats.panic_messages));
        }
        rows.push((target.name, stats));
    }
    eprintln!("{}", basin_fuzz::table(&rows));
    assert!(failures.is_empty(), "panics: {failures:#?}");
}
