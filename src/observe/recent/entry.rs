//! One finished call as the inspector keeps it: its record's JSON text, and the few fields
//! the listing's filters read.

use std::time::SystemTime;

use crate::classify::Outcome;
use crate::observe::call_record::CallRecord;

/// A finished call, rendered once.
#[derive(Debug)]
pub struct CallEntry {
    /// Numbers calls in the order they finished, from 1.
    pub seq: u64,
    /// When the call finished.
    pub time: SystemTime,
    /// The record as one JSON object (`CallRecord::write_object`): what `/calls` and the
    /// stream send.
    pub json: Box<str>,
    pub outcome: Outcome,
    pub method: Box<str>,
    pub tool: Option<Box<str>>,
    pub client: Option<Box<str>>,
}

impl CallEntry {
    pub fn new(record: &CallRecord<'_>, seq: u64, time: SystemTime) -> CallEntry {
        let mut json = String::with_capacity(512);
        // Into a `String`: cannot fail.
        let _ = record.write_object(seq, time, &mut json);
        CallEntry {
            seq,
            time,
            json: json.into_boxed_str(),
            outcome: record.outcome,
            method: record.method.as_ref().into(),
            tool: record.tool.as_deref().map(Box::from),
            client: record.client.as_deref().map(Box::from),
        }
    }

    /// What the entry counts against the ring's byte bound: its JSON text.
    pub fn bytes(&self) -> usize {
        self.json.len()
    }
}
