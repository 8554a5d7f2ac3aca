//! Replays every saved fuzz input (`fuzz/regressions/<target>/`: the crashes the fuzzers found,
//! and a few seeds) through the same checks the fuzz targets run, on every `cargo test`.

#[path = "../../../fuzz/checks.rs"]
mod checks;

#[test]
fn fuzz_regressions_replay_without_a_failure() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions");
    for (name, check) in checks::TARGETS {
        let dir = root.join(name);
        let mut replayed = 0;
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let data = std::fs::read(&path).expect("read");
            let outcome = std::panic::catch_unwind(|| check(&data));
            assert!(outcome.is_ok(), "fuzz regression {} fails again", path.display());
            replayed += 1;
        }
        assert!(replayed > 0, "no saved input for the fuzz target {name}");
    }
}
