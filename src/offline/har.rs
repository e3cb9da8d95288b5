//! HAR 1.2 as `strata classify` reads it: for each entry, the request's method, URL,
//! headers and body (`postData.text`), and the response's status, headers and body
//! (`content.text`, plain or `encoding: base64`). Written by browser devtools, mitmproxy's
//! `hardump` and Charles. Parsed with serde_json; fields strata does not read are ignored.
//!
//! A response with status 0 (browsers, mitmproxy) is no response at all; a response
//! `_error` (mitmproxy, Chrome) says the exchange broke — or, in strata's own capture
//! (`src/capture/`), that the agent left before the response ended.

use base64::Engine as _;
use serde::Deserialize;

use super::time::epoch_ms;

#[derive(Deserialize)]
struct Har {
    log: Log,
}

#[derive(Deserialize)]
struct Log {
    entries: Vec<RawEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEntry {
    started_date_time: String,
    #[serde(default)]
    time: f64,
    request: RawRequest,
    response: Option<RawResponse>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRequest {
    method: String,
    url: String,
    #[serde(default)]
    headers: Vec<Header>,
    post_data: Option<Body>,
}

#[derive(Deserialize)]
struct RawResponse {
    status: i64,
    #[serde(default)]
    headers: Vec<Header>,
    #[serde(default)]
    content: Option<Body>,
    #[serde(default, rename = "_error")]
    error: Option<String>,
}

/// `postData` or `content`: the text, and how it is encoded.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    #[serde(default)]
    mime_type: Option<String>,
    text: Option<String>,
    encoding: Option<String>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    pub value: String,
}

/// One recorded HTTP exchange.
#[derive(Debug)]
pub struct Entry {
    /// Its place in the file's `entries` (from 0).
    pub index: usize,
    /// `startedDateTime`, in milliseconds since the Unix epoch.
    pub started_ms: f64,
    /// `time`: the whole exchange, in milliseconds.
    pub time_ms: f64,
    pub method: String,
    pub url: String,
    pub headers: Vec<Header>,
    pub body: Vec<u8>,
    pub response: Option<Response>,
    /// strata's capture saw the agent leave before the response ended (or before its head).
    pub agent_gone: bool,
}

/// A recorded response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<Header>,
    /// `content.mimeType`, for a response recorded without its headers.
    pub mime_type: Option<String>,
    pub body: Vec<u8>,
    /// The recorder saw the exchange break (`_error`).
    pub broken: bool,
}

/// Reads a HAR document: its entries in the order they started.
pub fn parse(text: &[u8]) -> Result<Vec<Entry>, String> {
    let har: Har = serde_json::from_slice(text).map_err(|e| format!("not a HAR file: {e}"))?;
    let mut entries = har
        .log
        .entries
        .into_iter()
        .enumerate()
        .map(|(i, raw)| entry(i, raw).map_err(|e| format!("log.entries[{i}].{e}")))
        .collect::<Result<Vec<_>, _>>()?;
    // HAR readers must sort: writers are asked to, not bound to.
    entries.sort_by(|a, b| a.started_ms.total_cmp(&b.started_ms));
    Ok(entries)
}

fn entry(index: usize, raw: RawEntry) -> Result<Entry, String> {
    let started_ms = epoch_ms(&raw.started_date_time).ok_or_else(|| {
        format!(
            "startedDateTime: {:?} is not an ISO 8601 date-time",
            raw.started_date_time
        )
    })?;
    let body = match &raw.request.post_data {
        Some(data) => decode(data).map_err(|e| format!("request.postData: {e}"))?,
        None => Vec::new(),
    };
    let agent_gone = raw
        .response
        .as_ref()
        .is_some_and(|r| r.error.as_deref() == Some(crate::capture::AGENT_GONE));
    let response = match raw.response {
        Some(r) => response(r).map_err(|e| format!("response.{e}"))?,
        None => None,
    };
    Ok(Entry {
        index,
        started_ms,
        time_ms: raw.time.max(0.0),
        method: raw.request.method,
        url: raw.request.url,
        headers: raw.request.headers,
        body,
        response,
        agent_gone,
    })
}

fn response(raw: RawResponse) -> Result<Option<Response>, String> {
    let Ok(status @ 100..=999) = u16::try_from(raw.status) else {
        // 0: the recorder got no response (refused, cancelled, failed).
        return Ok(None);
    };
    let content = raw.content.unwrap_or_default();
    Ok(Some(Response {
        status,
        headers: raw.headers,
        body: decode(&content).map_err(|e| format!("content: {e}"))?,
        mime_type: content.mime_type.filter(|m| !m.is_empty()),
        broken: raw.error.is_some_and(|e| !e.is_empty()),
    }))
}

/// A body's bytes: its text, base64-decoded when so encoded; none when it has no text.
fn decode(body: &Body) -> Result<Vec<u8>, String> {
    let text = body.text.as_deref().unwrap_or_default();
    match body.encoding.as_deref() {
        None | Some("") => Ok(text.as_bytes().to_vec()),
        Some(e) if e.eq_ignore_ascii_case("base64") => {
            // Some writers wrap base64 text in lines.
            let compact: String = text.split_ascii_whitespace().collect();
            base64::engine::general_purpose::STANDARD
                .decode(compact)
                .map_err(|err| format!("text is not valid base64: {err}"))
        }
        Some(other) => Err(format!("unknown encoding {other:?} (plain or base64)")),
    }
}

// === impl Entry ===

impl Entry {
    /// The request's first header field `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        find(&self.headers, name)
    }

    /// The URL's scheme and authority (`http://host:port`), as a call record names its
    /// upstream; the whole URL when it has no path.
    pub fn origin(&self) -> &str {
        let after_scheme = self.url.find("://").map_or(0, |i| i + 3);
        match self.url[after_scheme..].find(['/', '?', '#']) {
            Some(end) => &self.url[..after_scheme + end],
            None => &self.url,
        }
    }

    /// When the exchange ended, in milliseconds since the Unix epoch.
    pub fn ended_ms(&self) -> f64 {
        self.started_ms + self.time_ms
    }
}

impl Response {
    /// The response's first header field `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        find(&self.headers, name)
    }

    /// `Content-Type`; `content.mimeType` for a response recorded without headers (with
    /// headers but no `Content-Type`, there was none, as strata would have seen it).
    pub fn content_type(&self) -> Option<&str> {
        match self.headers.is_empty() {
            true => self.mime_type.as_deref(),
            false => self.header("content-type"),
        }
    }
}

fn find<'h>(headers: &'h [Header], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

#[cfg(test)]
mod tests;
