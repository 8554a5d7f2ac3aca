#![no_main]
//! Fuzz target `markdown`: see `fuzz/checks.rs`.

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check_markdown(data));
