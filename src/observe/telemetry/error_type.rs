//! `error.type` for a call's span, from its outcome (OpenTelemetry MCP semantic conventions,
//! `docs/gen-ai/mcp.md`: the JSON-RPC error code as a string, `tool_error` for a result with
//! `isError: true`, otherwise a low-cardinality value of the instrumentation's choosing). The
//! span's status is ERROR exactly when this is set. README.md, "OpenTelemetry", has the table.

use std::borrow::Cow;

use crate::classify::Outcome;
use crate::policy::Failure;

/// The call's `error.type`, or `None` when it did not fail (SUCCESS, TOOL_SUCCESS, and
/// INPUT_REQUIRED, which is not done rather than failed). `status`: the last HTTP status the
/// agent was answered with; `code`: the JSON-RPC error code.
pub(super) fn of_call(
    outcome: Outcome,
    status: Option<u16>,
    code: Option<i64>,
) -> Option<Cow<'static, str>> {
    Some(match outcome {
        Outcome::Success | Outcome::ToolSuccess | Outcome::InputRequired => return None,
        Outcome::ToolError => Cow::Borrowed("tool_error"),
        Outcome::JsonRpcError => match code {
            Some(code) => Cow::Owned(code.to_string()),
            None => Cow::Borrowed("_OTHER"),
        },
        Outcome::HttpError => match status {
            Some(status) => Cow::Owned(status.to_string()),
            None => Cow::Borrowed("_OTHER"),
        },
        Outcome::StreamIncomplete => Cow::Borrowed("stream_incomplete"),
        Outcome::MalformedJson => Cow::Borrowed("malformed_json"),
        Outcome::InvalidEnvelope => Cow::Borrowed("invalid_envelope"),
        Outcome::InvalidToolResult => Cow::Borrowed("invalid_tool_result"),
        Outcome::ClientCancelled => Cow::Borrowed("client_cancelled"),
    })
}

/// A failed attempt's `error.type`: its HTTP status, or what kept it from having one.
pub(super) fn of_failure(failure: Failure) -> Cow<'static, str> {
    match failure {
        Failure::Status(status) => Cow::Owned(status.as_u16().to_string()),
        Failure::ConnectError => Cow::Borrowed("connect_error"),
        Failure::UpstreamReset => Cow::Borrowed("upstream_reset"),
        Failure::HeadTimeout => Cow::Borrowed("timeout"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_outcome_has_a_type_and_no_success_has_one() {
        for outcome in Outcome::ALL {
            let ty = of_call(outcome, Some(503), Some(-32602));
            let failed = !matches!(
                outcome,
                Outcome::Success | Outcome::ToolSuccess | Outcome::InputRequired
            );
            assert_eq!(ty.is_some(), failed, "{outcome:?}");
        }
        assert_eq!(
            of_call(Outcome::ToolError, None, None).as_deref(),
            Some("tool_error")
        );
        assert_eq!(
            of_call(Outcome::JsonRpcError, Some(200), Some(-32602)).as_deref(),
            Some("-32602")
        );
        assert_eq!(
            of_call(Outcome::HttpError, Some(503), None).as_deref(),
            Some("503")
        );
        assert_eq!(
            of_call(Outcome::JsonRpcError, Some(200), None).as_deref(),
            Some("_OTHER")
        );
    }

    #[test]
    fn a_failed_attempt_is_typed_by_its_status_or_its_failure() {
        let status = Failure::Status(http::StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(of_failure(status), "503");
        assert_eq!(of_failure(Failure::ConnectError), "connect_error");
        assert_eq!(of_failure(Failure::HeadTimeout), "timeout");
    }
}
