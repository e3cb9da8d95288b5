//! One call as a line: time, outcome, layer, method, tool, client, attempts, statuses and
//! duration, coloured by layer on a terminal.

use serde_json::Value;

/// Whether lines are coloured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Style {
    Plain,
    Colour,
}

impl Style {
    /// Colour only on a terminal, and only when `NO_COLOR` is unset (no-color.org).
    pub(super) fn for_stdout(terminal: bool) -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        if terminal && !no_color {
            Style::Colour
        } else {
            Style::Plain
        }
    }
}

/// The line for one record's JSON; a record that is not JSON is shown as it came.
pub(super) fn format(record: &str, style: Style) -> String {
    let Ok(value) = serde_json::from_str::<Value>(record) else {
        return record.to_owned();
    };
    let text = |name: &str| value[name].as_str().unwrap_or("-").to_owned();
    let time = text("time");
    // `2026-12-03T09:41:02.123Z` → `09:41:02.123`.
    let clock = time
        .split_once('T')
        .map_or(time.as_str(), |(_, t)| t.trim_end_matches('Z'));
    let (outcome, layer) = (text("outcome"), text("layer"));
    let statuses = match value["http_statuses"].as_str() {
        Some("") | None => "-".to_owned(),
        Some(s) => s.to_owned(),
    };
    let line = format!(
        "{clock} {outcome:<19} {layer:<11} {method:<16} {tool:<20} {client:<24} \
         attempts={attempts} statuses={statuses} {duration:.1}ms",
        method = text("method"),
        tool = text("tool"),
        client = text("client"),
        attempts = value["attempts"].as_u64().unwrap_or(1),
        duration = value["duration_ms"].as_f64().unwrap_or(0.0),
    );
    match style {
        Style::Plain => line,
        Style::Colour => format!("\x1b[{}m{line}\x1b[0m", colour(&layer, &outcome)),
    }
}

/// ANSI colour: successes green; failures by layer.
fn colour(layer: &str, outcome: &str) -> &'static str {
    match (layer, outcome) {
        (_, "SUCCESS" | "TOOL_SUCCESS") => "32",
        ("transport", _) => "31",
        ("protocol", _) => "33",
        ("interaction", _) => "36",
        _ => "35",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = r#"{"seq":3,"time":"2026-12-03T09:41:02.123Z","upstream":"http://u","client":"c@1","method":"tools/call","tool":"search","jsonrpc_id":"7","attempts":2,"http_statuses":"503,200","sse_events":0,"outcome":"TOOL_ERROR","layer":"application","retry_origin":"proxy","duration_ms":12.34}"#;

    #[test]
    fn a_record_is_one_line() {
        let line = format(RECORD, Style::Plain);
        assert!(line.starts_with("09:41:02.123 TOOL_ERROR "), "{line}");
        for part in [
            " application ",
            " tools/call ",
            " search ",
            " c@1 ",
            "attempts=2",
            "statuses=503,200",
            "12.3ms",
        ] {
            assert!(line.contains(part), "{part:?} in {line}");
        }
        let coloured = format(RECORD, Style::Colour);
        assert!(coloured.starts_with("\x1b[35m") && coloured.ends_with("\x1b[0m"));
        assert_eq!(format("not json", Style::Colour), "not json");
    }
}
