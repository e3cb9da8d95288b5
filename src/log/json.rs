//! The JSON line format, written straight into the line buffer.
//!
//! Same shape as tracing-subscriber's `.json().flatten_event(true)` without spans,
//! `{"timestamp":"…","level":"INFO",<the event's fields>,
//! "target":"…"}`, with the same value types: integers and booleans as JSON numbers and
//! booleans, floats as numbers (`null` when not finite), strings and `Debug`/`Display` values
//! as JSON strings. It exists because the generic path (a serde serializer over an
//! `io::Write` adaptor over `fmt::Write`, one UTF-8 check per token) costs a large share of
//! a proxied call's instructions, with one log record per call (measured in
//! `bench/README.md`).
//!
//! The line is built in a buffer of this thread's, with calls the compiler can inline, and
//! handed to tracing-subscriber's writer whole: through its `Writer` every piece would be a
//! call through a vtable. Plain runs inside strings are found with the
//! classifier's [`string_run`] (16 bytes per compare) rather than byte by byte.

use std::cell::RefCell;
use std::fmt::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::classify::json::string_run;

/// A line longer than this is not kept as this thread's buffer after it is written.
const KEEP_LINE_CAPACITY: usize = 4096;

thread_local! {
    /// Where a line is built; reused, so a log line allocates nothing once warm.
    static LINE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// One JSON object per event, fields at the top level.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        in_line_buffer(
            |line| write_line(line, event),
            |line| writer.write_str(line),
        )
        // An event recorded while this thread formats another one (a `Debug` impl that
        // logs): straight to the writer.
        .unwrap_or_else(|| write_line(&mut writer, event))
    }
}

/// Builds a line in this thread's buffer and hands it to `write`; `None` when the buffer is
/// in use (a line built while another one is).
pub(super) fn in_line_buffer(
    build: impl FnOnce(&mut String) -> fmt::Result,
    write: impl FnOnce(&str) -> fmt::Result,
) -> Option<fmt::Result> {
    LINE.with(|cell| {
        let mut line = cell.try_borrow_mut().ok()?;
        line.clear();
        let written = build(&mut line).and_then(|()| write(&line));
        if line.capacity() > KEEP_LINE_CAPACITY {
            *line = String::new();
        }
        Some(written)
    })
}

/// `{"timestamp":…,"level":…,<fields>,"target":…}` and a newline.
fn write_line<W: Write>(out: &mut W, event: &Event<'_>) -> fmt::Result {
    let meta = event.metadata();
    write_fields_line(out, meta.level(), meta.target(), |fields| {
        event.record(fields)
    })
}

/// A line of this format with the fields `record` writes: what [`JsonLines`] writes for an
/// event, and what a record written without an event writes ([`super::write_direct`]).
pub(crate) fn write_fields_line<W: Write>(
    out: &mut W,
    level: &Level,
    target: &str,
    record: impl FnOnce(&mut Fields<'_, W>),
) -> fmt::Result {
    out.write_str("{\"timestamp\":\"")?;
    write_timestamp(out, SystemTime::now())?;
    out.write_str("\",\"level\":\"")?;
    out.write_str(level_name(level))?;
    out.write_char('"')?;
    let mut fields = Fields {
        out,
        result: Ok(()),
    };
    record(&mut fields);
    fields.result?;
    out.write_str(",\"target\":")?;
    write_string(out, target)?;
    out.write_str("}\n")
}

/// `{`, the members `head` writes (the first without a leading comma), the fields `record`
/// writes, `}`: a record's log fields as a JSON object of its own (the recent calls,
/// `observe/recent.rs`).
pub(crate) fn write_fields_object<W: Write>(
    out: &mut W,
    head: impl FnOnce(&mut W) -> fmt::Result,
    record: impl FnOnce(&mut Fields<'_, W>),
) -> fmt::Result {
    out.write_char('{')?;
    head(out)?;
    let mut fields = Fields {
        out,
        result: Ok(()),
    };
    record(&mut fields);
    fields.result?;
    out.write_char('}')
}

/// The fields `record` writes, each `,"name":value`, and nothing around them: text a log
/// line and the recent calls share ([`Fields::written`]).
pub(crate) fn write_fields<W: Write>(
    out: &mut W,
    record: impl FnOnce(&mut Fields<'_, W>),
) -> fmt::Result {
    let mut fields = Fields {
        out,
        result: Ok(()),
    };
    record(&mut fields);
    fields.result
}

fn level_name(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => "INFO",
        Level::WARN => "WARN",
        _ => "ERROR",
    }
}

/// A field's name: from tracing (escaped as it is written), or written ahead of time for a
/// record that knows its names.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Name<'a> {
    Plain(&'a str),
    /// `,"name":` for a name of letters, digits and `_` (nothing to escape), built with
    /// `concat!(",\"", name, "\":")`.
    Key(&'static str),
}

impl<'a> From<&'a str> for Name<'a> {
    fn from(name: &'a str) -> Self {
        Name::Plain(name)
    }
}

/// Writes each field as `,"name":value`, with the value types tracing's visitor gives them.
pub(crate) struct Fields<'a, W> {
    out: &'a mut W,
    result: fmt::Result,
}

impl<W: Write> Fields<'_, W> {
    #[inline(always)]
    fn entry<'n>(&mut self, name: impl Into<Name<'n>>, value: impl FnOnce(&mut W) -> fmt::Result) {
        if self.result.is_ok() {
            let name = match name.into() {
                Name::Key(written) => self.out.write_str(written),
                Name::Plain(name) => self
                    .out
                    .write_char(',')
                    .and_then(|()| write_string(self.out, name))
                    .and_then(|()| self.out.write_char(':')),
            };
            self.result = name.and_then(|()| value(self.out));
        }
    }

    #[inline(always)]
    pub(crate) fn f64<'n>(&mut self, name: impl Into<Name<'n>>, value: f64) {
        self.entry(name, |w| {
            if value.is_finite() {
                // serde_json's own float writer (so the text is what tracing-subscriber's JSON
                // format wrote): shortest round-trip digits, a third of `{:?}`'s cost.
                w.write_str(zmij::Buffer::new().format_finite(value))
            } else {
                w.write_str("null")
            }
        });
    }

    #[inline(always)]
    pub(crate) fn i64<'n>(&mut self, name: impl Into<Name<'n>>, value: i64) {
        self.entry(name, |w| {
            if value < 0 {
                w.write_char('-')?;
            }
            write_u64(w, value.unsigned_abs())
        });
    }

    #[inline(always)]
    pub(crate) fn u64<'n>(&mut self, name: impl Into<Name<'n>>, value: u64) {
        self.entry(name, |w| write_u64(w, value));
    }

    #[inline(always)]
    pub(crate) fn str<'n>(&mut self, name: impl Into<Name<'n>>, value: &str) {
        self.entry(name, |w| write_string(w, value));
    }

    /// A string whose text `write` writes and which needs no escaping (strata's own names,
    /// digits): written as it is.
    #[inline(always)]
    pub(crate) fn unescaped<'n>(
        &mut self,
        name: impl Into<Name<'n>>,
        write: impl FnOnce(&mut W) -> fmt::Result,
    ) {
        self.entry(name, |w| {
            w.write_char('"')?;
            write(w)?;
            w.write_char('"')
        });
    }

    /// Fields written before (by [`write_fields`]), as they are.
    #[inline(always)]
    pub(crate) fn written(&mut self, fields: &str) {
        if self.result.is_ok() {
            self.result = self.out.write_str(fields);
        }
    }

    /// A `Debug` or `Display` value (`?x`, `%x`), as a string.
    fn text<'n>(&mut self, name: impl Into<Name<'n>>, value: fmt::Arguments<'_>) {
        self.entry(name, |w| {
            w.write_char('"')?;
            Escaped(w).write_fmt(value)?;
            w.write_char('"')
        });
    }
}

impl<W: Write> Visit for Fields<'_, W> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.f64(field.name(), value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.i64(field.name(), value);
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.u64(field.name(), value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.entry(field.name(), |w| {
            w.write_str(if value { "true" } else { "false" })
        });
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.str(field.name(), value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.text(field.name(), format_args!("{value:?}"));
    }
}

/// A decimal integer without `fmt`'s padding machinery, which costs more than the digits;
/// also the call record's statuses (`observe/call_record.rs`).
pub(crate) fn write_u64(w: &mut impl Write, value: u64) -> fmt::Result {
    // The usual values (a status, an attempt count, an event count) from the table, without
    // checking digits just written for UTF-8.
    if let Ok(small) = usize::try_from(value)
        && small < 1000
    {
        let skip = usize::from(small < 10) + usize::from(small < 100);
        return w.write_str(&THREE_DIGITS[small * 3 + skip..small * 3 + 3]);
    }
    let mut digits = [0u8; 20];
    // Only ASCII digits were written.
    w.write_str(std::str::from_utf8(decimal(value, &mut digits)).map_err(|_| fmt::Error)?)
}

/// `000`, `001`, … `999`: the text of a number below 1,000 as three digits.
const THREE_DIGITS: &str = {
    const BYTES: [u8; 3000] = {
        let mut table = [0u8; 3000];
        let mut n = 0;
        while n < 1000 {
            table[n * 3] = b'0' + (n / 100) as u8;
            table[n * 3 + 1] = b'0' + (n / 10 % 10) as u8;
            table[n * 3 + 2] = b'0' + (n % 10) as u8;
            n += 1;
        }
        table
    };
    match std::str::from_utf8(&BYTES) {
        Ok(digits) => digits,
        Err(_) => panic!("digits are ASCII"),
    }
};

/// `value`'s decimal digits, written at the end of `digits` (also the upstream request head's
/// `Content-Length`, `proxy/h1_conns/wire.rs`).
pub(crate) fn decimal(mut value: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    &digits[at..]
}

/// A JSON string, quoted and escaped (also the call log's `jsonrpc_id` for a string id).
pub(crate) fn write_string(w: &mut impl Write, s: &str) -> fmt::Result {
    w.write_char('"')?;
    Escaped(w).write_str(s)?;
    w.write_char('"')
}

/// Escapes what it is given as the inside of a JSON string, as serde_json does: `"` and `\`,
/// the short forms `\b \f \n \r \t`, and `\u00XX` for other control characters (see
/// [`ESCAPE`]).
struct Escaped<'a, W: Write>(&'a mut W);

impl<W: Write> Write for Escaped<'_, W> {
    /// The usual text (a method, a tool's name, an address) has nothing to escape: it goes
    /// out whole from here, inlined; the loop is out of line, so a call without escapes does
    /// not pay its entry and exit (eight calls a call record).
    #[inline]
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if string_run(s.as_bytes()) == s.len() {
            return self.0.write_str(s);
        }
        self.escaping(s)
    }
}

impl<W: Write> Escaped<'_, W> {
    /// [`Write::write_str`] of text with something to escape, or bytes above ASCII.
    #[inline(never)]
    fn escaping(&mut self, s: &str) -> fmt::Result {
        let mut rest = s;
        loop {
            // `string_run` stops at the bytes JSON escapes — `"`, `\`, below 0x20 — and at
            // bytes above ASCII, which stand for themselves.
            let bytes = rest.as_bytes();
            let mut i = string_run(bytes);
            while bytes.get(i).is_some_and(|&b| b >= 0x80) {
                i += bytes[i..].iter().take_while(|&&b| b >= 0x80).count();
                i += string_run(&bytes[i..]);
            }
            let Some(&b) = bytes.get(i) else {
                return self.0.write_str(rest);
            };
            // Every escaped byte is ASCII, so `i` and `i + 1` are char boundaries.
            let (plain, tail) = rest.split_at(i);
            self.0.write_str(plain)?;
            match ESCAPE[usize::from(b)] {
                b'u' => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    self.0.write_str("\\u00")?;
                    self.0.write_char(char::from(HEX[usize::from(b >> 4)]))?;
                    self.0.write_char(char::from(HEX[usize::from(b & 0xf)]))?;
                }
                short => {
                    self.0.write_char('\\')?;
                    self.0.write_char(char::from(short))?;
                }
            }
            rest = &tail[1..];
        }
    }
}

/// For each byte: 0 when it stands for itself inside a JSON string, else the letter of its
/// escape (`u` for the `\u00XX` form).
const ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x0c] = b'f';
    table[b'\n' as usize] = b'n';
    table[b'\r' as usize] = b'r';
    table[b'\t' as usize] = b't';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

thread_local! {
    /// The whole seconds of the last timestamp this thread wrote, and their text up to the
    /// fraction (`2026-11-29T17:03:00.`): lines written within the same second (at load,
    /// nearly all of them) add only the microseconds.
    static LAST_SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// `2026-11-29T17:03:00.123456Z` (UTC, microseconds), as tracing-subscriber's `SystemTime`.
fn write_timestamp(w: &mut impl Write, now: SystemTime) -> fmt::Result {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    LAST_SECOND.with(|last| match last.try_borrow_mut() {
        Ok(mut last) => {
            if last.0 != secs {
                last.1.clear();
                write_second(&mut last.1, secs)?;
                last.0 = secs;
            }
            w.write_str(&last.1)
        }
        // Only a timestamp written while this one is would find it in use.
        Err(_) => write_second(w, secs),
    })?;
    let micros = since.subsec_micros() as usize;
    let (high, low) = (micros / 1000 % 1000 * 3, micros % 1000 * 3);
    w.write_str(&THREE_DIGITS[high..high + 3])?;
    w.write_str(&THREE_DIGITS[low..low + 3])?;
    w.write_char('Z')
}

/// `2026-11-29T17:03:00.123Z` (RFC 3339, UTC, milliseconds).
pub(crate) fn write_timestamp_millis(w: &mut impl Write, at: SystemTime) -> fmt::Result {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    write_second(w, since.as_secs())?;
    let millis = since.subsec_millis() as usize * 3;
    w.write_str(&THREE_DIGITS[millis..millis + 3])?;
    w.write_char('Z')
}

/// `2026-11-29T17:03:00.`: second `secs` since the epoch, up to its fraction.
fn write_second(w: &mut impl Write, secs: u64) -> fmt::Result {
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    let mut buf = *b"0000-00-00T00:00:00.";
    put_digits(&mut buf[0..4], year.clamp(0, 9999) as u64);
    put_digits(&mut buf[5..7], u64::from(month));
    put_digits(&mut buf[8..10], u64::from(day));
    put_digits(&mut buf[11..13], rem / 3600);
    put_digits(&mut buf[14..16], rem / 60 % 60);
    put_digits(&mut buf[17..19], rem % 60);
    // Only ASCII digits and punctuation were written.
    w.write_str(std::str::from_utf8(&buf).map_err(|_| fmt::Error)?)
}

/// `v`'s last `to.len()` decimal digits, zero-padded, into `to`.
fn put_digits(to: &mut [u8], mut v: u64) {
    for digit in to.iter_mut().rev() {
        *digit = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn escaped(s: &str) -> String {
        let mut out = String::new();
        write_string(&mut out, s).unwrap();
        out
    }

    #[test]
    fn escapes_as_serde_json() {
        for s in [
            "plain",
            "q\"uote\\back",
            "nl\ncr\rtab\tbs\u{8}ff\u{c}",
            "\u{0}\u{1f}\u{7f}",
            "é日本",
            "",
        ] {
            assert_eq!(escaped(s), serde_json::to_string(s).unwrap(), "{s:?}");
        }
        // Runs long enough for the 16-byte compares, an escape at every offset of a block.
        for len in [15, 16, 17, 31, 32, 33, 70] {
            for at in 0..len {
                for esc in ['"', '\\', '\n', '\u{1}', '\u{1f}'] {
                    let mut s: String = "abcdéfgh".chars().cycle().take(len).collect();
                    let at = (0..=at).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
                    s.insert(at, esc);
                    assert_eq!(escaped(&s), serde_json::to_string(&s).unwrap(), "{s:?}");
                }
            }
        }
    }

    /// An event recorded while another one is being formatted on the same thread (here by a
    /// `Debug` impl) panics nothing and cuts nothing: the outer line is whole. (tracing-core
    /// does not re-enter a subscriber from inside it; the inner event is dropped there.)
    #[test]
    fn an_event_inside_an_event() {
        use crate::log::CapturedLogs;
        struct Logs;
        impl fmt::Debug for Logs {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                tracing::info!(target: "strata::inner", depth = 2u8, "inner");
                f.write_str("outer value")
            }
        }
        let logs = CapturedLogs::default();
        let subscriber = tracing_subscriber::fmt()
            .event_format(JsonLines)
            .with_writer(logs.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(target: "strata::outer", value = ?Logs, "outer");
        });
        let lines = logs.json_lines();
        assert_eq!(lines.len(), 1, "{}", logs.text());
        let outer = lines
            .iter()
            .find(|l| l["target"] == "strata::outer")
            .unwrap();
        assert_eq!(outer["value"], "outer value");
    }

    /// The same events through tracing-subscriber's own JSON format (what strata used before)
    /// and through this one give the same objects, timestamps aside.
    #[test]
    fn same_objects_as_tracing_subscribers_json() {
        use crate::log::CapturedLogs;
        let emit = || {
            let (none, some): (Option<&str>, Option<&str>) = (None, Some("s\"x"));
            tracing::info!(target: "strata::call", upstream = "http://u", absent = none,
                present = some, n = 7u32, neg = -3i64, zero = 0u64, max = u64::MAX, min = i64::MIN, ok = true, ms = 1.25f64, whole = 3.0f64,
                nan = f64::NAN, shown = %"a\nb", debugged = ?vec![1, 2], "call");
            tracing::warn!(target: "strata::x", error = %std::io::Error::other("boom"), "it failed: {}", 42);
        };
        let ours = CapturedLogs::default();
        let theirs = CapturedLogs::default();
        let new = tracing_subscriber::fmt()
            .event_format(JsonLines)
            .with_writer(ours.clone())
            .finish();
        let old = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(theirs.clone())
            .finish();
        tracing::subscriber::with_default(new, emit);
        tracing::subscriber::with_default(old, emit);
        let strip = |logs: &CapturedLogs| {
            let mut lines = logs.json_lines();
            for l in &mut lines {
                assert!(
                    l["timestamp"].as_str().is_some_and(|t| t.len() == 27),
                    "{l}"
                );
                l.as_object_mut().unwrap().remove("timestamp");
            }
            lines
        };
        assert_eq!(ours.text().lines().count(), 2, "{}", ours.text());
        assert_eq!(
            strip(&ours),
            strip(&theirs),
            "{}\n{}",
            ours.text(),
            theirs.text()
        );
    }

    #[test]
    fn integers_as_display_writes_them() {
        for n in [
            0,
            1,
            9,
            10,
            42,
            99,
            100,
            200,
            504,
            999,
            1000,
            65_535,
            u64::MAX,
        ] {
            let mut out = String::new();
            write_u64(&mut out, n).unwrap();
            assert_eq!(out, n.to_string());
        }
    }

    #[test]
    fn timestamps() {
        let at = |secs: u64, micros: u64| {
            let mut out = String::new();
            let t = UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
            write_timestamp(&mut out, t).unwrap();
            out
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.000007Z");
        assert_eq!(at(1_798_561_380, 123_456), "2026-12-29T16:23:00.123456Z");
        assert_eq!(at(4_107_542_399, 999_999), "2100-02-28T23:59:59.999999Z");
        // The same second again (the thread's remembered text), the next, and back.
        assert_eq!(at(4_107_542_399, 5), "2100-02-28T23:59:59.000005Z");
        assert_eq!(at(4_107_542_400, 10), "2100-03-01T00:00:00.000010Z");
        assert_eq!(at(4_107_542_399, 0), "2100-02-28T23:59:59.000000Z");
        assert_eq!(at(0, 999_999), "1970-01-01T00:00:00.999999Z");
    }

    #[test]
    fn millisecond_timestamps() {
        let at = |secs: u64, micros: u64| {
            let mut out = String::new();
            let t = UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros);
            write_timestamp_millis(&mut out, t).unwrap();
            out
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(1_798_561_380, 123_999), "2026-12-29T16:23:00.123Z");
        assert_eq!(at(4_107_542_399, 999_999), "2100-02-28T23:59:59.999Z");
    }

    #[test]
    fn fields_as_an_object() {
        let mut out = String::new();
        let head = |w: &mut String| w.write_str("\"seq\":1");
        write_fields_object(&mut out, head, |fields| {
            fields.str(Name::Key(",\"method\":"), "tools/call");
            fields.u64("attempts", 2);
        })
        .unwrap();
        assert_eq!(out, r#"{"seq":1,"method":"tools/call","attempts":2}"#);
    }
}
