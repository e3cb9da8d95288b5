//! One soak worker: an agent with its own connections (HTTP/1.1 or h2), a stateless client and
//! a legacy session it renews every [`SESSION_CALLS`] legacy calls. It runs one call at a time
//! and checks each answer against the testbed's record of what it sent.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::Full;
use serde_json::{Value, json};
use strata::classify::Outcome;
use strata::testbed::client::{
    ClientError, LEGACY_VERSION, McpClient, Mode, Reply, SseReader, Transport,
};
use strata::testbed::{BodyHash, SentBody, SentEnd};

use crate::driver::{Driver, Expected};
use crate::plan::{self, Call, Era, Expect, Kind};

/// Legacy calls per session before the worker ends it (DELETE) and opens another: sessions
/// come and go all through the run, as agents do.
const SESSION_CALLS: u64 = 40;
/// Every wait of one call (head, body, event) is bounded by this.
const CALL_LIMIT: Duration = Duration::from_secs(10);

struct Session {
    client: McpClient,
    calls: u64,
    /// Calls of each counting scenario in this session so far.
    seen: HashMap<&'static str, u64>,
}

pub struct Worker {
    transport: Transport,
    modern: McpClient,
    session: Option<Session>,
}

/// What the agent got.
enum Got {
    Reply(Reply),
    /// The first SSE event's bytes, after which the agent left.
    Left(Vec<u8>),
}

impl Worker {
    pub fn new(driver: &Driver, n: usize) -> Worker {
        // Half the agents speak HTTP/1.1 and half h2, unless `STRATA_SOAK_TRANSPORT` says
        // `h1` or `h2` for all.
        let transport = match std::env::var("STRATA_SOAK_TRANSPORT").as_deref() {
            Ok("h1") => Transport::Http1,
            Ok("h2") => Transport::Http2,
            _ if n.is_multiple_of(2) => Transport::Http1,
            _ => Transport::Http2,
        };
        Worker {
            transport,
            modern: client(driver, Mode::Modern, transport),
            session: None,
        }
    }

    /// Runs calls until `upto` calls were handed out; returns itself, connections and session
    /// still open, for the next phase.
    pub async fn run(mut self, driver: Arc<Driver>, upto: u64) -> Worker {
        while let Some(kind) = driver.next_kind(upto) {
            self.call(&driver, kind).await;
        }
        self
    }

    /// Ends the legacy session, if any (DELETE: not a call).
    pub async fn close(mut self) {
        if let Some(session) = self.session.take() {
            let _ = session.client.delete_session().await;
        }
    }

    async fn call(&mut self, driver: &Driver, kind: Kind) {
        let renew = self
            .session
            .as_ref()
            .is_none_or(|s| s.calls >= SESSION_CALLS);
        if kind.era == Era::Legacy && renew {
            self.renew_session(driver).await;
        }
        let (client, seen) = match (kind.era, self.session.as_mut()) {
            (Era::Legacy, Some(s)) => {
                s.calls += 1;
                let seen = s.seen.entry(kind.tool()).or_default();
                let before = *seen;
                *seen += 1;
                (&s.client, before)
            }
            _ => (&self.modern, 0),
        };
        let id = driver.next_id();
        let tool = matches!(kind.call, Call::Tool { .. } | Call::Leave).then(|| kind.tool());
        let body = match tool {
            Some(tool) => client.tool_call_body(&id, tool, kind.arguments()),
            None => client.request_body(&id, kind.method(), Value::Null),
        };
        let got = match kind.call {
            Call::Leave => leave(client, kind, &body).await.map(Got::Left),
            _ => exchange(client, kind.method(), tool, &id, &body)
                .await
                .map(Got::Reply),
        };
        let expect = kind.expect(seen);
        let outcome = self.check(driver, &kind, &id, got, expect).await;
        if expect == Expect::ByStatus {
            let failed = u64::from(outcome == Outcome::HttpError);
            driver.tally(|t| {
                let entry = t.stateless_counting.entry(kind.tool()).or_default();
                entry.0 += 1;
                entry.1 += failed;
            });
        }
        let expected = Expected {
            method: kind.method(),
            tool: kind.tool(),
            outcome,
        };
        driver.expect(&id, expected);
    }

    /// Compares what the agent got with the testbed's record; returns the outcome strata must
    /// count (for [`Expect::ByStatus`], read from the status the agent got).
    async fn check(
        &self,
        driver: &Driver,
        kind: &Kind,
        id: &Value,
        got: Result<Got, ClientError>,
        expect: Expect,
    ) -> Outcome {
        let sent = driver.sent(id).await;
        let what = format!(
            "{:?} {:?} {} id {id}",
            kind.era,
            self.transport,
            kind.tool()
        );
        let Some(sent) = sent else {
            driver.problem(format!(
                "{what}: the testbed has no record of an answer ({got:?})",
                got = got.as_ref().err()
            ));
            return fallback(expect);
        };
        let status = match got {
            Ok(Got::Reply(reply)) => {
                self.compare(driver, kind, &what, &reply, &sent);
                Some(reply.status.as_u16())
            }
            Ok(Got::Left(bytes)) => {
                let ok = sent.end == SentEnd::Dropped && sent.prefix.starts_with(&bytes);
                report(driver, ok, || {
                    format!("{what}: left after {} bytes, sent {sent:?}", bytes.len())
                });
                driver.tally(|t| {
                    t.prefixed += u64::from(ok);
                    t.body_bytes += bytes.len() as u64;
                });
                Some(sent.status)
            }
            // An h2 agent may get the reset of a broken body before it was handed the head.
            Err(err) if kind.breaks() && self.transport == Transport::Http2 => {
                let ok = sent.end == SentEnd::Aborted;
                report(driver, ok, || format!("{what}: {err}, sent {sent:?}"));
                driver.tally(|t| t.reset_before_head += 1);
                None
            }
            Err(err) => {
                driver.problem(format!("{what}: {err}"));
                None
            }
        };
        match expect {
            Expect::Is(outcome) => outcome,
            Expect::ByStatus => match status {
                Some(200) => Outcome::ToolSuccess,
                Some(s) if s == plan::failure_status(kind.tool()) => Outcome::HttpError,
                other => {
                    driver.problem(format!("{what}: unexpected status {other:?}"));
                    Outcome::HttpError
                }
            },
        }
    }

    /// A whole reply must be byte for byte what the testbed sent; a broken one the bytes
    /// before the break — all of them over HTTP/1.1, a prefix over h2 (an h2 receiver drops
    /// data it had buffered when the reset arrives; see `tests/it/faults.rs`).
    fn compare(&self, driver: &Driver, kind: &Kind, what: &str, reply: &Reply, sent: &SentBody) {
        let len = reply.body.len() as u64;
        let same = sent.status == reply.status.as_u16()
            && sent.len == len
            && sent.hash == BodyHash::of(&reply.body);
        let (ok, prefix) = match (&reply.broken, sent.end) {
            (None, SentEnd::Complete) => (same, false),
            (Some(_), SentEnd::Aborted) if kind.breaks() => match self.transport {
                Transport::Http1 => (same, true),
                Transport::Http2 => (
                    sent.status == reply.status.as_u16() && sent.prefix.starts_with(&reply.body),
                    true,
                ),
            },
            _ => (false, false),
        };
        report(driver, ok, || {
            format!(
                "{what}: got {} {len} bytes (broken: {:?}), sent {} {} bytes {:?}",
                reply.status, reply.broken, sent.status, sent.len, sent.end
            )
        });
        driver.tally(|t| {
            t.hashed += u64::from(ok && !prefix);
            t.prefixed += u64::from(ok && prefix);
            t.body_bytes += len;
        });
    }

    /// DELETEs the old session and opens a new one with `initialize` (a call: checked and
    /// counted like any other) and `notifications/initialized` (not a call).
    async fn renew_session(&mut self, driver: &Driver) {
        if let Some(old) = self.session.take() {
            let deleted = old.client.delete_session().await;
            let ok = deleted.as_ref().is_ok_and(|r| r.status == StatusCode::OK);
            report(driver, ok, || format!("DELETE session: {deleted:?}"));
        }
        let mode = Mode::Legacy {
            version: LEGACY_VERSION.to_owned(),
            session: None,
        };
        let fresh = client(driver, mode, self.transport);
        let id = driver.next_id();
        let params = json!({
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "strata-soak", "version": "1"},
        });
        let body = fresh.request_body(&id, "initialize", params);
        let got = exchange(&fresh, "initialize", None, &id, &body).await;
        let session_id = got.as_ref().ok().and_then(|r| {
            let v = r.headers.get("mcp-session-id")?;
            v.to_str().ok().map(str::to_owned)
        });
        let kind = Kind {
            era: Era::Legacy,
            call: Call::Method("initialize"),
        };
        let outcome = self
            .check(
                driver,
                &kind,
                &id,
                got.map(Got::Reply),
                Expect::Is(Outcome::Success),
            )
            .await;
        driver.expect(
            &id,
            Expected {
                method: "initialize",
                tool: "",
                outcome,
            },
        );
        let session_id = session_id.unwrap_or_else(|| panic!("initialize gave no session"));
        let mode = Mode::Legacy {
            version: LEGACY_VERSION.to_owned(),
            session: Some(session_id),
        };
        let client = client(driver, mode, self.transport);
        let note = client
            .notify("notifications/initialized", Value::Null)
            .await;
        let ok = note.as_ref().is_ok_and(|s| *s == StatusCode::ACCEPTED);
        report(driver, ok, || {
            format!("notifications/initialized: {note:?}")
        });
        driver.tally(|t| t.sessions += 1);
        self.session = Some(Session {
            client,
            calls: 0,
            seen: HashMap::new(),
        });
    }
}

fn client(driver: &Driver, mode: Mode, transport: Transport) -> McpClient {
    McpClient::new(driver.strata, mode)
        .with_transport(transport)
        .with_timeout(CALL_LIMIT)
}

/// POSTs `body` and reads the whole answer.
async fn exchange(
    client: &McpClient,
    method: &str,
    tool: Option<&str>,
    id: &Value,
    body: &Value,
) -> Result<Reply, ClientError> {
    let req = client
        .post_builder(method, tool)
        .body(Full::new(Bytes::from(body.to_string())))?;
    client.exchange(id.clone(), req).await
}

/// POSTs `body`, reads the first SSE event and leaves (drops the response).
async fn leave(client: &McpClient, kind: Kind, body: &Value) -> Result<Vec<u8>, ClientError> {
    let req = client
        .post_builder(kind.method(), Some(kind.tool()))
        .body(Full::new(Bytes::from(body.to_string())))?;
    let resp = client.send(req).await?;
    let mut reader = SseReader::new(resp.into_body()).with_timeout(CALL_LIMIT);
    let mut bytes = Vec::new();
    if let Some((event, _)) = reader.next_event().await? {
        bytes.extend_from_slice(&event.raw);
    }
    bytes.extend_from_slice(reader.leftover());
    Ok(bytes)
}

fn report(driver: &Driver, ok: bool, text: impl FnOnce() -> String) {
    if !ok {
        driver.problem(text());
    }
}

/// The outcome to tally when the call could not be checked (already reported as a problem).
fn fallback(expect: Expect) -> Outcome {
    match expect {
        Expect::Is(outcome) => outcome,
        Expect::ByStatus => Outcome::HttpError,
    }
}
