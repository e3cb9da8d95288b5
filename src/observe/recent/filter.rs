//! Which records a listing or a stream shows: the query parameters of `/calls` and
//! `/calls/stream`, parsed once. Names match exactly; outcome and layer ignore case.

use std::time::{Duration, SystemTime};

use crate::classify::{Layer, Outcome};

use super::CallEntry;

/// A parsed query. Every condition given must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub outcome: Option<Outcome>,
    pub layer: Option<Layer>,
    pub method: Option<String>,
    pub tool: Option<String>,
    pub client: Option<String>,
    pub since: Option<Since>,
    /// Most records listed (`None`: as many as are kept).
    pub limit: Option<usize>,
    /// The stream's: most events a second (`None`: every call); the rest are skipped.
    pub max_rate: Option<u32>,
}

/// `since=`: records after a sequence number, or finished within a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Since {
    Seq(u64),
    Within(Duration),
}

impl Filter {
    /// The filter a query string (`outcome=TOOL_ERROR&limit=5`) asks for; the error names the
    /// parameter at fault.
    pub fn from_query(query: Option<&str>) -> Result<Filter, String> {
        let mut filter = Filter::default();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value).ok_or_else(|| format!("{name}: bad encoding"))?;
            filter.set(name, value)?;
        }
        Ok(filter)
    }

    fn set(&mut self, name: &str, value: String) -> Result<(), String> {
        let bad = |expected: &str| format!("{name}: expected {expected}, got {value:?}");
        match name {
            "outcome" => {
                let found = Outcome::ALL
                    .into_iter()
                    .find(|o| o.as_str().eq_ignore_ascii_case(&value));
                self.outcome = Some(found.ok_or_else(|| bad("an outcome, e.g. TOOL_ERROR"))?);
            }
            "layer" => {
                let found = Layer::ALL
                    .into_iter()
                    .find(|l| l.as_str().eq_ignore_ascii_case(&value));
                self.layer = Some(found.ok_or_else(|| bad("a layer, e.g. transport"))?);
            }
            "method" => self.method = Some(value),
            "tool" => self.tool = Some(value),
            "client" => self.client = Some(value),
            "since" => {
                let since = parse_since(&value);
                self.since = Some(since.ok_or_else(|| bad("a sequence number or e.g. 30s, 5m"))?);
            }
            "limit" => {
                let limit = value.parse::<usize>().ok().filter(|&n| n > 0);
                self.limit = Some(limit.ok_or_else(|| bad("a positive whole number"))?);
            }
            "max_rate" => {
                let rate = value.parse::<u32>().ok().filter(|&n| n > 0);
                self.max_rate = Some(rate.ok_or_else(|| bad("a positive whole number"))?);
            }
            _ => {
                return Err(format!(
                    "unknown parameter {name:?}; known: outcome, layer, method, tool, client, \
                     since, limit, max_rate"
                ));
            }
        }
        Ok(())
    }

    /// Whether `entry` passes, `now` being the time a `since` window ends.
    pub fn matches(&self, entry: &CallEntry, now: SystemTime) -> bool {
        let same = |want: &Option<String>, have: Option<&str>| {
            want.as_deref().is_none_or(|want| have == Some(want))
        };
        self.outcome.is_none_or(|o| o == entry.outcome)
            && self.layer.is_none_or(|l| l == entry.outcome.layer())
            && same(&self.method, Some(entry.method()))
            && same(&self.tool, entry.tool())
            && same(&self.client, entry.client())
            && self.since.is_none_or(|since| match since {
                Since::Seq(seq) => entry.seq > seq,
                Since::Within(window) => now
                    .duration_since(entry.time)
                    .map_or(true, |age| age <= window),
            })
    }
}

/// `42` (a sequence number) or `<digits><ms|s|m|h>` (a window).
fn parse_since(text: &str) -> Option<Since> {
    if let Ok(seq) = text.parse::<u64>() {
        return Some(Since::Seq(seq));
    }
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let millis = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    number
        .checked_mul(millis)
        .map(|ms| Since::Within(Duration::from_millis(ms)))
}

/// A query value with `%XX` escapes and `+` (a space) decoded; `None` when an escape is
/// malformed or the result is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(byte) = bytes.next() {
        match byte {
            b'%' => {
                let high = char::from(bytes.next()?).to_digit(16)?;
                let low = char::from(bytes.next()?).to_digit(16)?;
                out.push(u8::try_from(high * 16 + low).ok()?);
            }
            b'+' => out.push(b' '),
            other => out.push(other),
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse() {
        let f = Filter::from_query(Some(
            "outcome=tool_error&layer=Application&method=tools%2Fcall&tool=a+b&since=5m&limit=3",
        ))
        .unwrap();
        assert_eq!(f.outcome, Some(Outcome::ToolError));
        assert_eq!(f.layer, Some(Layer::Application));
        assert_eq!(f.method.as_deref(), Some("tools/call"));
        assert_eq!(f.tool.as_deref(), Some("a b"));
        assert_eq!(f.since, Some(Since::Within(Duration::from_secs(300))));
        assert_eq!(f.limit, Some(3));
        let seq = Filter::from_query(Some("since=17&client=c%401")).unwrap();
        assert_eq!(seq.since, Some(Since::Seq(17)));
        assert_eq!(seq.client.as_deref(), Some("c@1"));
        assert_eq!(Filter::from_query(None), Ok(Filter::default()));
    }

    #[test]
    fn bad_parameters_are_named() {
        for (query, named) in [
            ("outcome=NOPE", "outcome"),
            ("layer=x", "layer"),
            ("since=5d", "since"),
            ("since=", "since"),
            ("limit=0", "limit"),
            ("limit=-1", "limit"),
            ("tool=%zz", "tool"),
            ("colour=red", "colour"),
        ] {
            let err = Filter::from_query(Some(query)).unwrap_err();
            assert!(err.contains(named), "{query}: {err}");
        }
    }
}
