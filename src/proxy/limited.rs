//! The limit phase (`limits.calls`, `circuit`; `docs/limits.md`): a call passes, holding its
//! slot until its final answer, or strata answers it at once without the upstream, in the
//! form its rule names. A refused call is classified and logged as the agent receives it,
//! with `refused_by`.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::Full;

use super::journey::accepts_only_sse;
use super::pending::PendingCall;
use super::{AgentBody, Proxy};
use crate::http::fields::Headers;
use crate::http::names::Known;
use crate::policy::limits::CallLimits;
use crate::policy::limits::refusal::Refusal;
use crate::proxy::body::{ObservedBody, ProxyBody};

impl Proxy {
    /// Admits the call under the limits, or answers it. Only a body carrying one request
    /// (with an id kept whole) is limited: a batch, notifications and responses pass.
    /// `head`: the request's header fields, read only to answer a refused call.
    pub(super) async fn limit(
        &self,
        limits: &CallLimits,
        call: &mut PendingCall<'_>,
        head: Headers<'_>,
    ) -> Result<(), Response<AgentBody>> {
        call.read_inspection();
        let Some((rule, tool_call)) = call.limited_by(limits) else {
            return Ok(());
        };
        match limits.admit(rule, tool_call).await {
            Ok(admission) => {
                call.admitted(Box::new(admission));
                Ok(())
            }
            Err(refusal) => {
                let sse_only = accepts_only_sse(head.get(Known::Accept));
                Err(self.refuse(call, &refusal, sse_only))
            }
        }
    }

    /// strata's answer to a refused call, classified by the call's tracker.
    fn refuse(
        &self,
        call: &mut PendingCall<'_>,
        refusal: &Refusal,
        sse_only: bool,
    ) -> Response<AgentBody> {
        self.ctx().metrics.limit_hit(refusal.by().limit());
        let answer = call
            .refusal_answer(refusal, sse_only)
            .unwrap_or_else(|| refusal.answer("null", "the call", sse_only));
        let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
        let mut response = Response::new(ProxyBody::local(Bytes::new()));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        let content_type = HeaderValue::from_static(answer.content_type);
        headers.insert(header::CONTENT_TYPE, content_type);
        headers.insert(header::RETRY_AFTER, HeaderValue::from(answer.retry_after));
        headers.insert("x-strata-error", HeaderValue::from_static(answer.code));
        let body = Full::new(Bytes::from(answer.body));
        *response.body_mut() = match call.take_tracker() {
            Some(mut tracker) => {
                tracker.refused(refusal.by());
                tracker.response_head(answer.status, Some(answer.content_type.as_bytes()));
                tracker.capture_fields(Headers::Map(response.headers()));
                ProxyBody::Replayed(ObservedBody::new(body, tracker))
            }
            None => ProxyBody::Local(body),
        };
        response
    }
}
