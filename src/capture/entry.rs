//! One captured HTTP exchange, built while it runs: the request's head (headers redacted,
//! the session id hashed) and body, then the response's, each body kept up to
//! `capture.max_body` with its whole size counted. The exchange owns its [`Recorder`];
//! when it ends, [`Recorder::finish`] gives the [`Entry`] the writer turns into HAR.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use tokio::time::Instant;

use crate::config::{ALWAYS_REDACTED, CaptureConfig};
use crate::http::fields::Headers;
use crate::observe::call_record::hash_session;

/// What a redacted header's value becomes.
pub const REDACTED: &str = "[redacted]";

/// The response `_error` strata writes when the agent left before the response ended (or
/// before its head); `strata classify` reads it as the agent going away (CLIENT_CANCELLED).
pub const AGENT_GONE: &str = "strata: the agent went away before the response ended";
/// The response `_error` strata writes when the upstream's body broke.
pub const UPSTREAM_BROKE: &str = "strata: the upstream's response body broke";

/// Header fields as a capture holds them: name as sent, value (redacted or hashed).
pub type Fields = Vec<(String, String)>;

/// Which header values a capture must not hold.
#[derive(Clone, Debug)]
pub struct Redactor {
    /// Lower-case names: [`ALWAYS_REDACTED`] and `capture.redact`.
    names: Vec<String>,
}

/// A body's first `max` bytes, and its whole size.
#[derive(Clone, Debug, Default)]
pub struct BodyCopy {
    pub bytes: Vec<u8>,
    pub size: u64,
    max: usize,
}

/// How the exchange ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Complete,
    UpstreamBroke,
    AgentGone,
}

/// A captured response.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// Its header fields; `None` when strata answered itself or replayed a record.
    pub headers: Option<Fields>,
    pub content_type: Option<String>,
    pub body: BodyCopy,
}

/// A finished exchange, for the writer.
#[derive(Debug)]
pub struct Entry {
    pub started: SystemTime,
    pub time: Duration,
    pub method: String,
    pub url: String,
    pub headers: Fields,
    pub body: BodyCopy,
    pub response: Option<Answer>,
    pub end: End,
}

/// An exchange being captured.
#[derive(Debug)]
pub struct Recorder {
    entry: Entry,
    since: Instant,
    max_body: usize,
}

// === impl Redactor ===

impl Redactor {
    pub fn new(config: &CaptureConfig) -> Self {
        let always = ALWAYS_REDACTED.iter().map(|n| (*n).to_owned());
        let extra = config.redact.iter().map(|n| n.to_ascii_lowercase());
        Redactor {
            names: always.chain(extra).collect(),
        }
    }

    /// `name: value` as the capture writes it.
    pub fn field(&self, name: &[u8], value: &[u8]) -> (String, String) {
        let name = String::from_utf8_lossy(name).into_owned();
        let value = if self.names.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
            REDACTED.to_owned()
        } else if name.eq_ignore_ascii_case("mcp-session-id") {
            // Hashed as the call log hashes it: a capture never holds a live session id.
            hash_session(&String::from_utf8_lossy(value))
        } else {
            String::from_utf8_lossy(value).into_owned()
        };
        (name, value)
    }

    /// Every field of `headers`, in order.
    pub(crate) fn fields(&self, headers: Headers<'_>) -> Fields {
        match headers {
            Headers::Map(map) => self.map(map),
            Headers::Own(fields) => fields.lines().map(|(n, v)| self.field(n, v)).collect(),
        }
    }

    pub fn map(&self, map: &HeaderMap) -> Fields {
        map.iter()
            .map(|(n, v)| self.field(n.as_str().as_bytes(), v.as_bytes()))
            .collect()
    }
}

// === impl BodyCopy ===

impl BodyCopy {
    /// Keeps up to `max` bytes.
    pub fn new(max: usize) -> Self {
        BodyCopy {
            bytes: Vec::new(),
            size: 0,
            max,
        }
    }

    #[inline]
    pub fn push(&mut self, chunk: &[u8]) {
        self.size += chunk.len() as u64;
        let room = self.max.saturating_sub(self.bytes.len());
        if room > 0 {
            self.bytes
                .extend_from_slice(&chunk[..room.min(chunk.len())]);
        }
    }

    /// Fewer bytes kept than the body had.
    pub fn is_cut(&self) -> bool {
        (self.bytes.len() as u64) < self.size
    }
}

// === impl Recorder ===

impl Recorder {
    /// Starts capturing a request for `url` (the upstream's, as the call log names it).
    pub fn new(method: &str, url: String, headers: Fields, max_body: usize) -> Self {
        Recorder {
            entry: Entry {
                started: SystemTime::now(),
                time: Duration::ZERO,
                method: method.to_owned(),
                url,
                headers,
                body: BodyCopy::new(max_body),
                response: None,
                end: End::Complete,
            },
            since: Instant::now(),
            max_body,
        }
    }

    /// A body read whole before it went upstream.
    pub fn request_body(&mut self, body: &[u8]) {
        self.entry.body = BodyCopy::new(self.max_body);
        self.entry.body.push(body);
    }

    /// A body copied as it streamed upstream.
    pub fn request_copy(&mut self, copy: BodyCopy) {
        self.entry.body = copy;
    }

    /// The response's status and content type; its fields when known.
    pub fn response_head(
        &mut self,
        status: u16,
        content_type: Option<&str>,
        fields: Option<Fields>,
    ) {
        let answer = self.entry.response.get_or_insert_with(|| Answer {
            status,
            headers: None,
            content_type: None,
            body: BodyCopy::new(self.max_body),
        });
        answer.status = status;
        answer.content_type = content_type.map(str::to_owned);
        if fields.is_some() {
            answer.headers = fields;
        }
    }

    /// A chunk of the response body.
    #[inline]
    pub fn response_data(&mut self, chunk: &[u8]) {
        if let Some(answer) = &mut self.entry.response {
            answer.body.push(chunk);
        }
    }

    /// The exchange is over.
    pub fn finish(mut self, end: End) -> Entry {
        self.entry.time = self.since.elapsed();
        self.entry.end = end;
        self.entry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_and_sessions_hashed() {
        let mut config = CaptureConfig::at("c.har".into());
        config.redact = vec!["x-api-key".to_owned()];
        let redactor = Redactor::new(&config);
        for name in [
            "Authorization",
            "proxy-authorization",
            "Cookie",
            "Set-Cookie",
            "Idempotency-Key",
            "X-Api-Key",
        ] {
            assert_eq!(
                redactor.field(name.as_bytes(), b"s3cret").1,
                REDACTED,
                "{name}"
            );
        }
        let (name, value) = redactor.field(b"Mcp-Session-Id", b"live-session");
        assert_eq!(name, "Mcp-Session-Id");
        assert_eq!(value, hash_session("live-session"));
        assert_ne!(value, "live-session");
        assert_eq!(redactor.field(b"Accept", b"*/*").1, "*/*");
    }

    #[test]
    fn a_body_keeps_its_first_bytes_and_counts_all() {
        let mut copy = BodyCopy::new(5);
        copy.push(b"abc");
        assert!(!copy.is_cut());
        copy.push(b"defgh");
        copy.push(b"ij");
        assert_eq!((&copy.bytes[..], copy.size), (&b"abcde"[..], 10));
        assert!(copy.is_cut());
        let mut none = BodyCopy::new(0);
        none.push(b"x");
        assert_eq!((none.bytes.len(), none.size, none.is_cut()), (0, 1, true));
    }
}
