//! The config loader, fuzzed at the edge where a file comes in: any text gives a config or
//! errors — never a panic — and every error names a position or the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata::config::{Config, Overrides};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(errors) = Config::parse(text, "fuzz.yaml", &Overrides::default()) {
        assert!(!errors.is_empty());
        for line in errors.to_string().lines() {
            assert!(line.starts_with("fuzz.yaml"), "{line}");
        }
    }
});
