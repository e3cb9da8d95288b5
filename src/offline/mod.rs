//! `strata classify FILE…`: classifies recorded MCP traffic offline with the classifier the
//! proxy runs live (`classify.rs`), from HAR files (`har.rs`). Prints one row per call (the
//! demo's table) or, with `--json`, one call record per line (the log line's fields).
//!
//! Exit status: 2 when a file cannot be read or is not HAR (each named on stderr, the
//! others still classified); else 1 when a call that did not succeed (any outcome but
//! SUCCESS and TOOL_SUCCESS) ended at a layer `--fail-on` names; else 0.

mod classify;
mod har;
mod time;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::classify::{Layer, Outcome};
use crate::table::Table;

pub use classify::{Call, Recording};
pub use har::{Entry, parse};

/// Exit status for a file that cannot be read or is not HAR.
pub const EXIT_BAD_FILE: u8 = 2;

/// What `strata classify` was asked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub files: Vec<PathBuf>,
    /// One JSON object per call instead of the table.
    pub json: bool,
    /// Layers whose failed calls make the exit status 1.
    pub fail_on: Vec<Layer>,
}

/// The layer a `--fail-on` word names.
pub fn parse_layer(word: &str) -> Result<Layer, String> {
    let word = word.trim();
    Layer::ALL
        .into_iter()
        .find(|l| l.as_str().eq_ignore_ascii_case(word))
        .ok_or_else(|| {
            format!(
                "unknown layer {word:?}; expected transport, protocol, interaction or application"
            )
        })
}

/// Runs `strata classify`, writing the calls to `out` and file errors to `err`. Write
/// failures are ignored: the exit status still tells the result.
pub fn run(options: &Options, out: &mut dyn Write, err: &mut dyn Write) -> ExitCode {
    let mut bad_file = false;
    let mut failed = false;
    for path in &options.files {
        let calls = match read(path) {
            Ok(calls) => calls,
            Err(why) => {
                let _ = writeln!(err, "{}: {why}", path.display());
                bad_file = true;
                continue;
            }
        };
        failed |= calls.iter().any(|c| fails(c, &options.fail_on));
        let _ = match options.json {
            true => write_json(out, &calls),
            false => write_table(out, path, &calls),
        };
    }
    match (bad_file, failed) {
        (true, _) => ExitCode::from(EXIT_BAD_FILE),
        (false, true) => ExitCode::FAILURE,
        (false, false) => ExitCode::SUCCESS,
    }
}

/// The calls of one HAR file.
pub fn read(path: &Path) -> Result<Vec<Call>, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    let entries = parse(&text)?;
    Ok(Recording::classify(&entries))
}

/// A call that ended at one of `layers` with an outcome other than SUCCESS or
/// TOOL_SUCCESS (INPUT_REQUIRED counts at the interaction layer, TOOL_ERROR at the
/// application layer).
fn fails(call: &Call, layers: &[Layer]) -> bool {
    let outcome = call.record.outcome;
    !matches!(outcome, Outcome::Success | Outcome::ToolSuccess) && layers.contains(&outcome.layer())
}

fn write_json(out: &mut dyn Write, calls: &[Call]) -> std::io::Result<()> {
    for call in calls {
        writeln!(out, "{}", call.record.to_json())?;
    }
    Ok(())
}

fn write_table(out: &mut dyn Write, path: &Path, calls: &[Call]) -> std::io::Result<()> {
    writeln!(out, "{}: {} calls\n", path.display(), calls.len())?;
    let mut table = Table::new(&[
        "entry", "method", "tool", "id", "HTTP", "outcome", "layer", "ms",
    ]);
    for call in calls {
        let r = &call.record;
        let statuses: Vec<String> = r.http_statuses.iter().map(u16::to_string).collect();
        let cells = vec![
            (call.order.0 + 1).to_string(),
            r.method.to_string(),
            r.tool.as_deref().unwrap_or("").to_owned(),
            r.jsonrpc_id.to_string(),
            match statuses.is_empty() {
                true => "-".to_owned(),
                false => statuses.join(","),
            },
            r.outcome.as_str().to_owned(),
            r.layer().as_str().to_owned(),
            format!("{:.0}", r.duration.as_secs_f64() * 1e3),
        ];
        let note = r.error_code.map(|code| format!("error {code}"));
        table.row(cells, note);
    }
    table.write(out)?;
    writeln!(out)
}
