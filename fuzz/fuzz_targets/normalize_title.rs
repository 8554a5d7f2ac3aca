#![no_main]
//! Fuzz target `normalize_title`: see `fuzz/checks.rs`.

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check_normalize_title(data));
