//! One finished call as the inspector keeps it: its record's JSON text, and the few fields
//! the listing's filters read.

use std::ops::Range;
use std::time::SystemTime;

use crate::classify::Outcome;
use crate::observe::call_record::CallRecord;

/// A finished call, rendered once: two allocations besides its `Arc`, the JSON text and the
/// filters' texts together.
#[derive(Debug)]
pub struct CallEntry {
    /// Numbers calls in the order they finished, from 1.
    pub seq: u64,
    /// When the call finished.
    pub time: SystemTime,
    /// The record as one JSON object (`CallRecord::write_object`): what `/calls` and the
    /// stream send.
    pub json: String,
    pub outcome: Outcome,
    /// The method, tool and client, one after the other.
    texts: String,
    tool: Option<Range<usize>>,
    client: Option<Range<usize>>,
}

impl CallEntry {
    pub fn new(record: &CallRecord<'_>, seq: u64, time: SystemTime) -> CallEntry {
        let mut json = String::with_capacity(512);
        // Into a `String`: cannot fail.
        let _ = record.write_object(seq, time, &mut json);
        let (tool, client) = (record.tool.as_deref(), record.client.as_deref());
        let mut texts = String::with_capacity(
            record.method.len() + tool.map_or(0, str::len) + client.map_or(0, str::len),
        );
        let mut push = |text: &str| {
            let start = texts.len();
            texts.push_str(text);
            start..texts.len()
        };
        push(&record.method);
        let tool = tool.map(&mut push);
        let client = client.map(&mut push);
        CallEntry {
            seq,
            time,
            json,
            outcome: record.outcome,
            texts,
            tool,
            client,
        }
    }

    pub fn method(&self) -> &str {
        let end = [&self.tool, &self.client]
            .into_iter()
            .flatten()
            .map(|r| r.start)
            .next()
            .unwrap_or(self.texts.len());
        self.texts.get(..end).unwrap_or_default()
    }

    pub fn tool(&self) -> Option<&str> {
        self.tool.clone().and_then(|r| self.texts.get(r))
    }

    pub fn client(&self) -> Option<&str> {
        self.client.clone().and_then(|r| self.texts.get(r))
    }

    /// What the entry counts against the ring's byte bound: its JSON text as allocated.
    pub fn bytes(&self) -> usize {
        self.json.capacity()
    }
}
