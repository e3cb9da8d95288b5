//! Runs strata's classifier over recorded exchanges, as the live path does for each one: the
//! POST body through the request inspector, then the response's status, `Content-Type`
//! and body through the call's [`Exchange`], settled verdicts taken as they come and the rest
//! when the body ends; each verdict becomes the call record the proxy would log
//! ([`Facts::fill`]). Sessions and their clients are learnt from initialize as the call
//! tracker learns them, and a call whose resumable SSE stream closed early waits for a later
//! `GET` with `Last-Event-ID` on its session, as `observe/resume.rs` parks it.
//!
//! What a recording cannot tell: strata's own retries (each call counts one attempt), and
//! the resume window (a parked call waits until the recording ends, then is
//! STREAM_INCOMPLETE).

use std::borrow::Cow;
use std::time::Duration;

use crate::classify::Outcome;
use crate::classify::envelope::Request;
use crate::classify::exchange::{self, ContentKind, Exchange, Resolution, Verdict};
use crate::classify::request::RequestInspector;
use crate::config::Limits;
use crate::observe::call_record::{CallRecord, SessionHash, id_text};
use crate::observe::session_clients::SessionClients;
use crate::observe::tracker::{Facts, content_type_text};

use super::har::Entry;

/// One classified call: its record, and where its request was in the recording.
pub struct Call {
    /// The entry that carried the request (its place in the file), then the request's
    /// place in its body.
    pub order: (usize, usize),
    pub record: CallRecord<'static>,
}

/// What a call carries from the exchange that sent it.
#[derive(Clone)]
struct Meta {
    order: (usize, usize),
    started_ms: f64,
    statuses: Vec<u16>,
    sse_events: u32,
}

/// A call whose resumable stream closed before its response.
struct Parked {
    request: Request,
    meta: Meta,
    session: String,
    last_event_id: Box<[u8]>,
    upstream: String,
    protocol_version: Option<String>,
    content_type: Option<String>,
}

/// The classifier state across a recording's entries.
pub struct Recording {
    clients: SessionClients,
    parked: Vec<Parked>,
    calls: Vec<Call>,
    inspect_cap: usize,
}

/// One exchange being classified: what every call of it shares.
struct Run<'e> {
    entry: &'e Entry,
    exchange: Exchange,
    metas: Vec<Meta>,
    session: Option<String>,
    client: Option<String>,
    protocol_version: Option<String>,
    content_type: Option<Cow<'static, str>>,
    status: Option<u16>,
}

// === impl Recording ===

impl Default for Recording {
    fn default() -> Self {
        Recording {
            clients: SessionClients::default(),
            parked: Vec::new(),
            calls: Vec::new(),
            inspect_cap: Limits::default().request_inspect_bytes,
        }
    }
}

impl Recording {
    /// Classifies a recording's entries (in the order they started): every call, in the
    /// order its request was sent.
    pub fn classify(entries: &[Entry]) -> Vec<Call> {
        let mut recording = Recording::default();
        for entry in entries {
            recording.entry(entry);
        }
        recording.finish()
    }

    /// One exchange: a POST's calls, a GET that resumes parked calls, a DELETE that ends a
    /// session; anything else carries no call.
    pub fn entry(&mut self, entry: &Entry) {
        let session = entry.header("mcp-session-id").map(str::to_owned);
        match entry.method.as_str() {
            "POST" => self.post(entry, session),
            "GET" => {
                if let (Some(session), Some(last)) = (session, entry.header("last-event-id")) {
                    self.resume(entry, session, last.as_bytes());
                }
            }
            "DELETE" => {
                let ok = entry.response.as_ref().is_some_and(|r| r.status / 100 == 2);
                if let (true, Some(session)) = (ok, session) {
                    self.clients.forget(&session);
                }
            }
            _ => {}
        }
    }

    /// The calls so far, and every call still parked as STREAM_INCOMPLETE (its stream was
    /// never resumed in the recording), in the order their requests were sent.
    pub fn finish(mut self) -> Vec<Call> {
        for parked in std::mem::take(&mut self.parked) {
            let verdict = Verdict::of(Outcome::StreamIncomplete);
            let client = self.clients.get(&parked.session);
            let session = SessionHash::new(&parked.session);
            let facts = Facts {
                session: Some(&session),
                client: client.as_deref(),
                protocol_version: parked.protocol_version.as_deref(),
                content_type: parked.content_type.as_deref(),
                statuses: Cow::Borrowed(&parked.meta.statuses),
                sse_events: parked.meta.sse_events,
                attempts: 1,
                client_retry: false,
                trace: None,
                refused_by: None,
            };
            let record = record(&parked.upstream, &parked.request, &verdict, 0.0, facts);
            self.calls.push(Call {
                order: parked.meta.order,
                record: record.into_owned(),
            });
        }
        self.calls.sort_by_key(|c| c.order);
        self.calls
    }

    fn post(&mut self, entry: &Entry, session: Option<String>) {
        let mut inspector = RequestInspector::new();
        inspector.feed(&entry.body, self.inspect_cap);
        let found = inspector.finish();
        if found.requests.is_empty() {
            return;
        }
        let metas = (0..found.requests.len())
            .map(|i| Meta {
                order: (entry.index, i),
                started_ms: entry.started_ms,
                statuses: Vec::new(),
                sse_events: 0,
            })
            .collect();
        let exchange = Exchange::new(found.requests, found.batch);
        let protocol_version = entry.header("mcp-protocol-version").map(str::to_owned);
        self.run(entry, exchange, metas, session, protocol_version);
    }

    /// A GET with `Last-Event-ID`: the calls parked on its session whose stream ended at
    /// that event, or every one parked on it when none did (`ResumeRegistry::take_for_resume`).
    fn resume(&mut self, entry: &Entry, session: String, last_event_id: &[u8]) {
        let on_session = |p: &Parked| p.session == session;
        let exact = self
            .parked
            .iter()
            .any(|p| on_session(p) && &*p.last_event_id == last_event_id);
        let (taken, kept): (Vec<Parked>, Vec<Parked>) = std::mem::take(&mut self.parked)
            .into_iter()
            .partition(|p| on_session(p) && (!exact || &*p.last_event_id == last_event_id));
        self.parked = kept;
        let Some(protocol_version) = taken.first().map(|p| p.protocol_version.clone()) else {
            return;
        };
        let (requests, metas): (Vec<Request>, Vec<Meta>) =
            taken.into_iter().map(|p| (p.request, p.meta)).unzip();
        let exchange = Exchange::new(requests, false);
        self.run(entry, exchange, metas, Some(session), protocol_version);
    }

    fn run(
        &mut self,
        entry: &Entry,
        exchange: Exchange,
        metas: Vec<Meta>,
        session: Option<String>,
        protocol_version: Option<String>,
    ) {
        let client = session
            .as_deref()
            .and_then(|s| self.clients.get(s))
            .map(|c| c.to_string());
        let mut run = Run {
            entry,
            exchange,
            metas,
            session,
            client,
            protocol_version,
            content_type: None,
            status: None,
        };
        let Some(response) = &entry.response else {
            // No response recorded: the exchange broke (or the agent left) before its head.
            let how = match entry.agent_gone {
                true => exchange::BodyEnd::AgentGone,
                false => exchange::BodyEnd::UpstreamError,
            };
            return run.end(self, how);
        };
        let content_type = response.content_type();
        run.status = Some(response.status);
        run.content_type = content_type.and_then(|t| content_type_text(t.as_bytes()));
        let kind = ContentKind::from_header(content_type.map(str::as_bytes));
        run.exchange.response_head(response.status, kind);
        run.settled(self);
        if let Some(assigned) = response.header("mcp-session-id") {
            run.learn_session(&self.clients, assigned);
        }
        run.exchange.data(&response.body);
        run.settled(self);
        let how = match (entry.agent_gone, response.broken) {
            (true, _) => exchange::BodyEnd::AgentGone,
            (false, true) => exchange::BodyEnd::UpstreamError,
            (false, false) => exchange::BodyEnd::Complete,
        };
        run.end(self, how);
    }

    fn push(&mut self, order: (usize, usize), record: CallRecord<'_>) {
        self.calls.push(Call {
            order,
            record: record.into_owned(),
        });
    }
}

// === impl Run ===

impl Run<'_> {
    /// As `CallTracker::learn_session`: an initialize that named its client, answered with
    /// a session, gives the session's later calls that client.
    fn learn_session(&mut self, clients: &SessionClients, assigned: &str) {
        if let Some(client) = self.exchange.initialize_client() {
            clients.remember(assigned, &client);
            self.client = Some(client.into_owned());
            self.session = Some(assigned.to_owned());
        }
    }

    /// Records the verdicts reached so far.
    fn settled(&mut self, to: &mut Recording) {
        let mut settled = Vec::new();
        self.exchange.drain_settled(|i, request, verdict| {
            settled.push((i, request.clone(), verdict.clone()))
        });
        for (i, request, verdict) in settled {
            self.record(to, i, &request, &verdict);
        }
    }

    /// The body ended: every call not yet settled gets its resolution; a pending one is
    /// parked on its session (without one it is STREAM_INCOMPLETE, as live).
    fn end(mut self, to: &mut Recording, how: exchange::BodyEnd) {
        self.settled(to);
        let mut ended = self.exchange.end(how);
        while let Some((i, request, resolution)) = ended.next_resolution() {
            match (resolution, &self.session) {
                (Resolution::Final(verdict), _) => self.record(to, i, request, &verdict),
                (Resolution::Pending { last_event_id }, Some(session)) => {
                    let Some(mut meta) = self.metas.get(i).cloned() else {
                        continue;
                    };
                    meta.statuses.extend(self.status);
                    meta.sse_events += self.exchange.sse_events();
                    to.parked.push(Parked {
                        request: request.clone(),
                        meta,
                        session: session.clone(),
                        last_event_id: last_event_id.bytes().into(),
                        upstream: self.entry.origin().to_owned(),
                        protocol_version: self.protocol_version.clone(),
                        content_type: self.content_type.as_deref().map(str::to_owned),
                    });
                }
                (Resolution::Pending { .. }, None) => {
                    let verdict = Verdict::of(Outcome::StreamIncomplete);
                    self.record(to, i, request, &verdict);
                }
            }
        }
    }

    fn record(&self, to: &mut Recording, i: usize, request: &Request, verdict: &Verdict) {
        let Some(meta) = self.metas.get(i) else {
            return;
        };
        let mut statuses = meta.statuses.clone();
        statuses.extend(self.status);
        let session = self.session.as_deref().map(SessionHash::new);
        let facts = Facts {
            session: session.as_ref(),
            client: self.client.as_deref(),
            protocol_version: self.protocol_version.as_deref(),
            content_type: self.content_type.as_deref(),
            statuses: Cow::Owned(statuses),
            sse_events: meta.sse_events + self.exchange.sse_events(),
            attempts: 1,
            client_retry: false,
            trace: None,
            refused_by: None,
        };
        let elapsed = self.entry.ended_ms() - meta.started_ms;
        let record = record(self.entry.origin(), request, verdict, elapsed, facts);
        to.push(meta.order, record);
    }
}

/// The call record the proxy would log for `request` and its verdict.
fn record<'a>(
    upstream: &'a str,
    request: &'a Request,
    verdict: &'a Verdict,
    elapsed_ms: f64,
    facts: Facts<'a>,
) -> CallRecord<'a> {
    let duration = Duration::try_from_secs_f64(elapsed_ms / 1e3).unwrap_or_default();
    let mut record = CallRecord::new(
        upstream,
        request.method.text_lossy(),
        id_text(request),
        verdict.outcome,
        duration,
    );
    facts.fill(
        &mut record,
        request,
        verdict,
        request.tool.text_lossy(),
        false,
    );
    record
}

#[cfg(test)]
mod tests;
