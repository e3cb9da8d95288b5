//! strata's log, read line by line as the child writes it: every per-call record checked for
//! shape and kept by JSON-RPC id; every other line counted by level; any mention of a panic
//! kept.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use strata::classify::Outcome;
use strata::observe::call_record::CALL_TARGET;

/// Lines of each odd kind kept verbatim for the report.
const KEEP: usize = 5;

/// One per-call record, as logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    pub method: String,
    pub tool: String,
    pub outcome: String,
    pub attempts: u64,
}

/// What the log said so far.
#[derive(Debug, Default)]
pub struct LogBook {
    /// Per-call records by `jsonrpc_id` (the id's JSON text).
    pub calls: HashMap<String, Logged>,
    /// Per-call lines read, well-formed or not.
    pub call_lines: u64,
    /// Records whose id was already recorded.
    pub duplicates: u64,
    /// Lines that are not JSON, and call records missing or misstating a field.
    pub malformed: u64,
    pub malformed_lines: Vec<String>,
    /// Lines (stdout or stderr) that mention a panic.
    pub panics: Vec<String>,
    /// Other lines by level (`INFO`, `WARN`, …).
    pub levels: BTreeMap<String, u64>,
    /// The first WARN and ERROR lines.
    pub notable: Vec<String>,
    /// Call records by `retry_origin`.
    pub retry_origins: BTreeMap<String, u64>,
    /// Lines strata wrote to stderr.
    pub stderr_lines: u64,
}

impl LogBook {
    /// One stdout line.
    pub fn line(&mut self, line: &str) {
        self.watch_for_panic(line);
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            self.malformed(line);
            return;
        };
        if v["target"] != CALL_TARGET {
            let level = v["level"].as_str().unwrap_or("?").to_owned();
            if (level == "WARN" || level == "ERROR") && self.notable.len() < KEEP {
                self.notable.push(line.to_owned());
            }
            *self.levels.entry(level).or_default() += 1;
            return;
        }
        self.call_lines += 1;
        let Some((id, logged, origin)) = call_record(&v) else {
            self.malformed(line);
            return;
        };
        *self.retry_origins.entry(origin).or_default() += 1;
        if self.calls.insert(id, logged).is_some() {
            self.duplicates += 1;
        }
    }

    /// One stderr line: strata writes nothing there in normal operation (logs go to stdout).
    pub fn stderr_line(&mut self, line: &str) {
        self.stderr_lines += 1;
        self.watch_for_panic(line);
        if self.notable.len() < KEEP {
            self.notable.push(format!("stderr: {line}"));
        }
    }

    fn watch_for_panic(&mut self, line: &str) {
        if line.to_ascii_lowercase().contains("panic") && self.panics.len() < KEEP {
            self.panics.push(line.to_owned());
        }
    }

    fn malformed(&mut self, line: &str) {
        self.malformed += 1;
        if self.malformed_lines.len() < KEEP {
            self.malformed_lines.push(line.to_owned());
        }
    }
}

/// A per-call record's id, the facts the soak compares, and its `retry_origin` — or `None`
/// when a field is missing or wrong (README, "The per-call log").
fn call_record(v: &Value) -> Option<(String, Logged, String)> {
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    (s("level")? == "INFO" && s("message")? == "call").then_some(())?;
    s("timestamp")?;
    s("upstream")?;
    let outcome = Outcome::from_label(s("outcome")?)?;
    (s("layer")? == outcome.layer().as_str()).then_some(())?;
    let origin = s("retry_origin")?;
    ["none", "proxy", "client"]
        .contains(&origin)
        .then_some(())?;
    let attempts = v.get("attempts")?.as_u64().filter(|n| *n >= 1)?;
    let statuses = s("http_statuses")?;
    let statuses_ok = statuses.is_empty() || statuses.split(',').all(|p| p.parse::<u16>().is_ok());
    statuses_ok.then_some(())?;
    v.get("sse_events")?.as_u64()?;
    v.get("duration_ms")?.as_f64().filter(|d| *d >= 0.0)?;
    let method = s("method")?.to_owned();
    let tool = match v.get("tool") {
        None => String::new(),
        Some(t) => t.as_str()?.to_owned(),
    };
    let id = s("jsonrpc_id").filter(|id| !id.is_empty())?.to_owned();
    let logged = Logged {
        method,
        tool,
        outcome: outcome.as_str().to_owned(),
        attempts,
    };
    Some((id, logged, origin.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"timestamp":"t","level":"INFO","message":"call","upstream":"http://x","method":"tools/call","tool":"ok","jsonrpc_id":"7","attempts":1,"http_statuses":"200","sse_events":0,"outcome":"TOOL_SUCCESS","layer":"application","retry_origin":"none","duration_ms":1.5,"target":"strata::call"}"#;

    #[test]
    fn a_well_formed_record_is_kept_by_id() {
        let mut book = LogBook::default();
        book.line(GOOD);
        book.line(GOOD);
        assert_eq!(book.call_lines, 2);
        assert_eq!(book.duplicates, 1);
        assert_eq!(book.malformed, 0);
        assert_eq!(book.calls["7"].outcome, "TOOL_SUCCESS");
        assert_eq!(book.calls["7"].tool, "ok");
    }

    #[test]
    fn a_wrong_layer_a_missing_field_or_a_panic_is_noticed() {
        let mut book = LogBook::default();
        book.line(&GOOD.replace("application", "protocol"));
        book.line(&GOOD.replace(r#""attempts":1,"#, ""));
        book.line("thread 'tokio-runtime-worker' panicked at src/x.rs:1:1");
        assert_eq!(book.malformed, 3);
        assert!(book.calls.is_empty());
        assert_eq!(book.panics.len(), 1);
    }
}
