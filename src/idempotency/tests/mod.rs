mod fingerprint;
mod memory;
mod record;

use std::time::Duration;

use crate::config::IdempotencyConfig;

fn config(
    ttl_secs: u64,
    max_entries: usize,
    max_bytes: usize,
    max_record_bytes: usize,
) -> IdempotencyConfig {
    IdempotencyConfig {
        ttl: Duration::from_secs(ttl_secs),
        max_entries,
        max_bytes,
        max_record_bytes,
        ..IdempotencyConfig::default()
    }
}
