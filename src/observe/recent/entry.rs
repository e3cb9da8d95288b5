//! One finished call as the inspector keeps it: its record's fields as JSON (the text its log
//! line was written from), and the few fields the listing's filters read.

use std::fmt::{self, Write as _};
use std::ops::Range;
use std::time::SystemTime;

use crate::classify::Outcome;
use crate::log;
use crate::observe::call_record::CallRecord;

/// A finished call: two allocations, its `Arc` and one text holding the record's JSON
/// members and, after them, the method, tool and client the filters compare.
#[derive(Debug)]
pub struct CallEntry {
    /// Numbers calls in the order they finished, from 1.
    pub seq: u64,
    /// When the call finished.
    pub time: SystemTime,
    pub outcome: Outcome,
    /// `,"upstream":…,"duration_ms":…` ([`CallRecord::fields_text`]), then the method, tool
    /// and client, one after the other.
    text: String,
    fields_end: usize,
    tool: Option<Range<usize>>,
    client: Option<Range<usize>>,
}

impl CallEntry {
    /// `record`, whose [`CallRecord::fields_text`] is `fields`.
    pub fn new(record: &CallRecord<'_>, mut fields: String, seq: u64, time: SystemTime) -> Self {
        let (tool, client) = (record.tool.as_deref(), record.client.as_deref());
        let fields_end = fields.len();
        fields.reserve_exact(
            record.method.len() + tool.map_or(0, str::len) + client.map_or(0, str::len),
        );
        let mut push = |text: &str| {
            let start = fields.len();
            fields.push_str(text);
            start..fields.len()
        };
        push(&record.method);
        let tool = tool.map(&mut push);
        let client = client.map(&mut push);
        CallEntry {
            seq,
            time,
            outcome: record.outcome,
            text: fields,
            fields_end,
            tool,
            client,
        }
    }

    /// The record as one JSON object, appended to `out`: `seq` and `time` (when the call
    /// finished, RFC 3339 UTC with milliseconds), then the log line's fields after `message` —
    /// the same names and values, the same text. What `/calls` and the stream send.
    pub fn write_json(&self, out: &mut String) {
        // Into a `String`: cannot fail.
        let _ = self.write_object(out);
    }

    fn write_object(&self, out: &mut String) -> fmt::Result {
        out.write_str("{\"seq\":")?;
        log::write_u64(out, self.seq)?;
        out.write_str(",\"time\":\"")?;
        log::write_timestamp_millis(out, self.time)?;
        out.write_char('"')?;
        out.write_str(self.fields())?;
        out.write_char('}')
    }

    /// [`write_json`](Self::write_json)'s text, at most.
    pub fn json_len(&self) -> usize {
        // `{"seq":` 20 digits `,"time":"` 24 characters `"` and `}`.
        63 + self.fields_end
    }

    fn fields(&self) -> &str {
        self.text.get(..self.fields_end).unwrap_or_default()
    }

    pub fn method(&self) -> &str {
        let end = [&self.tool, &self.client]
            .into_iter()
            .flatten()
            .map(|r| r.start)
            .next()
            .unwrap_or(self.text.len());
        self.text.get(self.fields_end..end).unwrap_or_default()
    }

    pub fn tool(&self) -> Option<&str> {
        self.tool.clone().and_then(|r| self.text.get(r))
    }

    pub fn client(&self) -> Option<&str> {
        self.client.clone().and_then(|r| self.text.get(r))
    }

    /// What the entry counts against the ring's byte bound: its text as allocated.
    pub fn bytes(&self) -> usize {
        self.text.capacity()
    }
}
