//! The soak's summary table, printed whatever the verdict (`--nocapture` shows it).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use strata::classify::Outcome;
use strata::demo::CallKey;

use crate::calllog::LogBook;
use crate::child::Memory;
use crate::driver::Tally;

/// The figures of one run.
pub struct Figures<'a> {
    pub calls: u64,
    pub concurrency: usize,
    pub duration: Duration,
    pub warmup_calls: u64,
    pub warm: Memory,
    pub end: Memory,
    /// Memory after each tenth of the run.
    pub curve: &'a [(u64, Memory)],
    pub tally: &'a Tally,
    pub counted: &'a BTreeMap<CallKey, u64>,
    pub log: &'a LogBook,
}

/// Sums series by outcome label.
pub fn by_outcome(series: &BTreeMap<CallKey, u64>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (k, v) in series {
        *out.entry(k.outcome.clone()).or_default() += v;
    }
    out
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

pub fn render(f: &Figures<'_>) -> String {
    let t = f.tally;
    let secs = f.duration.as_secs_f64();
    let mut s = String::new();
    let mut line = |text: String| {
        let _ = writeln!(s, "{text}");
    };
    line(format!(
        "strata soak: {} planned calls at {} concurrent (+ {} initialize in {} sessions)",
        f.calls, f.concurrency, t.sessions, t.sessions
    ));
    line(format!(
        "  calls sent {}, in {secs:.1} s = {:.0} calls/s",
        t.sent,
        t.sent as f64 / secs.max(1e-9)
    ));
    line(format!(
        "  bodies: {} whole and identical (status, length, FNV-1a), {} cut and an exact prefix, \
         {} h2 resets before the head; {:.1} MiB received",
        t.hashed,
        t.prefixed,
        t.reset_before_head,
        t.body_bytes as f64 / 1_048_576.0
    ));
    line(format!("  problems: {}", t.problems));
    for p in &t.problem_lines {
        line(format!("    {p}"));
    }
    let expected = by_outcome(&t.expected);
    let counted = by_outcome(f.counted);
    let mut logged: BTreeMap<String, u64> = BTreeMap::new();
    for call in f.log.calls.values() {
        *logged.entry(call.outcome.clone()).or_default() += 1;
    }
    line(format!(
        "  {:<20} {:<12} {:>9} {:>9} {:>9}",
        "outcome", "layer", "expected", "counted", "logged"
    ));
    for outcome in Outcome::ALL {
        let name = outcome.as_str();
        let get = |m: &BTreeMap<String, u64>| m.get(name).copied().unwrap_or(0);
        line(format!(
            "  {name:<20} {:<12} {:>9} {:>9} {:>9}",
            outcome.layer().as_str(),
            get(&expected),
            get(&counted),
            get(&logged)
        ));
    }
    line(format!(
        "  {:<20} {:<12} {:>9} {:>9} {:>9}",
        "total",
        "",
        expected.values().sum::<u64>(),
        counted.values().sum::<u64>(),
        logged.values().sum::<u64>()
    ));
    let grown = f.end.rss_kib as i64 - f.warm.rss_kib as i64;
    line(format!(
        "  strata RSS after warm-up ({} calls) {}, after the run {} ({grown:+} KiB); VmHWM {}",
        f.warmup_calls,
        mib(f.warm.rss_kib),
        mib(f.end.rss_kib),
        mib(f.end.hwm_kib)
    ));
    let points: Vec<String> = f
        .curve
        .iter()
        .map(|(n, m)| format!("{n}: {:.1}/{}", m.rss_kib as f64 / 1024.0, m.fds))
        .collect();
    line(format!(
        "  RSS MiB / open fds after each tenth: {}; at the end {} fds",
        points.join(", "),
        f.end.fds
    ));
    let log = f.log;
    line(format!(
        "  log: {} call lines, {} malformed, {} duplicate ids, {} panics, {} stderr lines; \
         other lines {:?}; retry_origin {:?}",
        log.call_lines,
        log.malformed,
        log.duplicates,
        log.panics.len(),
        log.stderr_lines,
        log.levels,
        log.retry_origins
    ));
    for l in log
        .notable
        .iter()
        .chain(&log.malformed_lines)
        .chain(&log.panics)
    {
        line(format!("    {l}"));
    }
    s
}
