//! `Idempotency-Key` on the data path: the claim before anything goes upstream, and the
//! replay of a recorded answer (the store itself is `crate::idempotency`).

use http::Response;
use http::header::{self, HeaderValue};
use http::uri::PathAndQuery;

use crate::idempotency::{Claim, Key, Record, Ticket};
use crate::metrics::ReplayResult;

use super::body::{ObservedBody, ProxyBody};
use super::strata_error::StrataError;
use super::{AgentBody, Proxy};
use crate::http::fields::Headers;
use crate::http::names::{IDEMPOTENT_REPLAYED, Known};
use crate::observe::tracker::CallTracker;

/// What an `Idempotency-Key` means for this request.
pub(super) enum KeyClaim {
    /// No usable key, or no store: forward as usual.
    None,
    /// First of its key: forward, and record the answer.
    Fresh(Ticket, Vec<String>),
    /// A repeat: answer from the record, with the repeat's ids.
    Replay(Record, Vec<String>),
    /// 409 or 422.
    Refuse(StrataError),
}

/// The recorded answer, replayed with the repeat's ids and classified like an upstream's.
pub(super) fn replay_record(
    tracker: Option<Box<CallTracker>>,
    record: &Record,
    ids: &[String],
) -> Response<AgentBody> {
    let body = record.replay_body(ids);
    let mut response = Response::new(ProxyBody::Local(http_body_util::Full::new(
        bytes::Bytes::new(),
    )));
    *response.status_mut() =
        http::StatusCode::from_u16(record.status).unwrap_or(http::StatusCode::OK);
    *response.headers_mut() = record.header_map();
    response
        .headers_mut()
        .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    let body = http_body_util::Full::new(body);
    *response.body_mut() = match tracker {
        Some(mut tracker) => {
            let content_type = response
                .headers()
                .get(header::CONTENT_TYPE)
                .map(HeaderValue::as_bytes);
            tracker.response_head(record.status, content_type);
            ProxyBody::Replayed(ObservedBody::new(body, tracker))
        }
        None => ProxyBody::Local(body),
    };
    response
}

impl Proxy {
    /// Claims an `Idempotency-Key` for a request whose body is in the replay buffer. The key
    /// is scoped by the `Authorization` header, so one client can neither read nor block
    /// another's keys. A store error forwards the call without idempotency (counted).
    pub(super) async fn claim_key(
        &self,
        parts: &http::request::Parts,
        headers: Headers<'_>,
        value: &[u8],
        body: &[u8],
    ) -> KeyClaim {
        let scope = headers.get(Known::Authorization).unwrap_or_default();
        let Some(key) = Key::new(value, scope) else {
            return KeyClaim::None;
        };
        let target = parts.uri.path_and_query().map_or("/", PathAndQuery::as_str);
        let store = &self.carried.idempotency;
        let Some(fp) = store.fingerprint(target, body) else {
            return KeyClaim::None;
        };
        let metrics = &self.ctx().metrics;
        match store.claim(&key, fp.fingerprint).await {
            Ok(Claim::Fresh(ticket)) => KeyClaim::Fresh(ticket, fp.ids),
            Ok(Claim::Done(record)) => {
                metrics.idempotent_replay(ReplayResult::Replayed);
                KeyClaim::Replay(record, fp.ids)
            }
            Ok(Claim::InFlight) => {
                metrics.idempotent_replay(ReplayResult::Conflict);
                KeyClaim::Refuse(StrataError::IdempotencyInFlight)
            }
            Ok(Claim::Mismatch) => {
                metrics.idempotent_replay(ReplayResult::Mismatch);
                KeyClaim::Refuse(StrataError::IdempotencyMismatch)
            }
            Err(err) => {
                metrics.idempotent_replay(ReplayResult::StoreError);
                tracing::warn!(error = %err, "idempotency store unavailable; forwarding without it");
                KeyClaim::None
            }
        }
    }
}
