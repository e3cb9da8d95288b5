//! The scenario catalogue: every scenario is a tool, and calling it produces one specific wire
//! behaviour. `strata demo` walks this table; the tests check the testbed against it.

use serde_json::{Map, Value, json};

use super::rpc::Era;
use crate::classify::Outcome;

/// One fault-injection scenario, exposed as a tool of the same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scenario {
    /// The tool name to call (`tools/call` `params.name`).
    pub tool: &'static str,
    /// What strata should classify the *first* call of this scenario as, on a fresh session,
    /// with no proxy retries: an `Outcome` label (`Outcome::from_label` parses it).
    pub expected_outcome: &'static str,
    /// What goes on the wire, in one line.
    pub description: &'static str,
    /// Only meaningful in the legacy era (server→client requests on a POST stream and SSE
    /// resumption were removed in 2026-07-28); a 2026-era call gets a -32602 error instead.
    pub legacy_only: bool,
}

const fn s(
    tool: &'static str,
    outcome: Outcome,
    description: &'static str,
    legacy_only: bool,
) -> Scenario {
    Scenario {
        tool,
        expected_outcome: outcome.as_str(),
        description,
        legacy_only,
    }
}

use Outcome::*;

/// Every scenario the testbed serves, in the order `strata demo` prints them.
pub const SCENARIOS: &[Scenario] = &[
    s("ok", ToolSuccess, "200 JSON, a text result", false),
    s("tool_error", ToolError, "200 JSON, isError: true", false),
    s(
        "jsonrpc_error",
        JsonRpcError,
        "200 JSON, error -32602 Invalid params",
        false,
    ),
    s(
        "http_503_then_200",
        HttpError,
        "503 with no body on odd calls, a text result on even calls (per session or, stateless, per testbed)",
        false,
    ),
    s(
        "read_flaky",
        HttpError,
        "read-only tool: 503 for the first N calls per session (default 1), then a text result",
        false,
    ),
    s(
        "read_rate_limited",
        HttpError,
        "read-only tool: 429 with Retry-After (arguments.retry_after seconds, default 1) for \
         the first N calls per session (default 1), then a text result",
        false,
    ),
    s(
        "write_flaky",
        HttpError,
        "destructive tool: 503 for the first N calls per session (default 1), then a text result",
        false,
    ),
    s(
        "http_429",
        HttpError,
        "429 with Retry-After: 1 and no body",
        false,
    ),
    s(
        "http_500_success_body",
        HttpError,
        "500 carrying a success-looking JSON-RPC result",
        false,
    ),
    s(
        "input_required",
        InputRequired,
        "resultType input_required with an elicitation; a retry with inputResponses succeeds",
        false,
    ),
    s(
        "legacy_result",
        ToolSuccess,
        "a text result without resultType, even in 2026-07-28",
        false,
    ),
    s(
        "content_not_array",
        InvalidToolResult,
        "content is a string, not an array",
        false,
    ),
    s(
        "wrong_id",
        InvalidEnvelope,
        "the response id is 99999 (\"wrong\" if the request id is 99999)",
        false,
    ),
    s(
        "result_and_error",
        InvalidEnvelope,
        "the response carries both result and error",
        false,
    ),
    s(
        "bad_jsonrpc_version",
        InvalidEnvelope,
        "the response says jsonrpc \"1.0\"",
        false,
    ),
    s(
        "malformed_json",
        MalformedJson,
        "200 application/json whose body is `{ not valid json`",
        false,
    ),
    s(
        "sse_progress",
        ToolSuccess,
        "SSE: three progress notifications 20 ms apart, then the result",
        false,
    ),
    s(
        "sse_closed_early",
        StreamIncomplete,
        "SSE: one progress notification, then a clean end without the result",
        false,
    ),
    s(
        "sse_final_error",
        JsonRpcError,
        "SSE: one progress notification, then a JSON-RPC error",
        false,
    ),
    s(
        "sse_server_request",
        ToolSuccess,
        "SSE: a roots/list server request whose id 0 collides with client ids, then the result",
        true,
    ),
    s(
        "sse_drip",
        ToolSuccess,
        "SSE: arguments.count (5) progress events arguments.interval_ms (100) apart, then the result",
        false,
    ),
    s(
        "sse_resumable",
        StreamIncomplete,
        "SSE with event ids closes before the result; GET with Last-Event-ID replays it",
        true,
    ),
    s(
        "sse_reset",
        StreamIncomplete,
        "SSE: one progress notification, then the stream is reset",
        false,
    ),
    s(
        "json_reset",
        StreamIncomplete,
        "200 JSON whose Content-Length is never met: reset mid-body",
        false,
    ),
    s(
        "large_result",
        ToolSuccess,
        "200 JSON, a text result arguments.bytes long (1 MiB), generated while streaming",
        false,
    ),
    s(
        "slow",
        ToolSuccess,
        "waits arguments.ms (1000) before the text result",
        false,
    ),
    s(
        "empty_202",
        StreamIncomplete,
        "answers the request with 202 and no body",
        false,
    ),
    s(
        "wrong_content_type",
        MalformedJson,
        "200 text/plain \"hello\"",
        false,
    ),
    s(
        "echo_headers",
        ToolSuccess,
        "a text result holding the request headers as a JSON object (lowercase names)",
        false,
    ),
];

/// The scenario named `tool`, if any.
pub fn scenario(tool: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.tool == tool)
}

/// Tool annotations (2025-06-18+ `ToolAnnotations`). Only the flaky pair is annotated: the
/// retry tests use `read_flaky` (safe to re-send) against `write_flaky` (not), and leaving the
/// other faults unannotated keeps their first-call outcome independent of annotation trust.
fn annotations(tool: &str) -> Option<Value> {
    match tool {
        "read_flaky" | "read_rate_limited" => Some(json!({"readOnlyHint": true})),
        "write_flaky" => Some(json!({"readOnlyHint": false, "destructiveHint": true})),
        _ => None,
    }
}

/// The `tools/list` result. 2026-07-28 lists only what the era can run, and adds the
/// `resultType` and the cache hints `ListToolsResult` requires there (2026-07-28 schema
/// `CacheableResult`).
pub(crate) fn tools_list(era: Era) -> Value {
    let tools: Vec<Value> = SCENARIOS
        .iter()
        .filter(|s| era == Era::Legacy || !s.legacy_only)
        .map(|s| {
            let mut tool = json!({
                "name": s.tool,
                "description": s.description,
                "inputSchema": {"type": "object"},
            });
            if let (Some(a), Some(obj)) = (annotations(s.tool), tool.as_object_mut()) {
                obj.insert("annotations".into(), a);
            }
            tool
        })
        .collect();
    let mut result = Map::new();
    result.insert("tools".into(), Value::Array(tools));
    if era == Era::Modern {
        result.insert("ttlMs".into(), json!(0));
        result.insert("cacheScope".into(), json!("private"));
    }
    super::rpc::complete(era, result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_expected_outcome_is_an_outcome_label() {
        for s in SCENARIOS {
            assert!(
                Outcome::from_label(s.expected_outcome).is_some(),
                "{}",
                s.tool
            );
        }
    }

    #[test]
    fn tool_names_are_unique() {
        for (i, a) in SCENARIOS.iter().enumerate() {
            assert!(
                SCENARIOS[i + 1..].iter().all(|b| b.tool != a.tool),
                "{}",
                a.tool
            );
        }
    }

    #[test]
    fn modern_list_hides_legacy_only_tools() {
        let list = tools_list(Era::Modern);
        let names: Vec<&str> = list["tools"]
            .as_array()
            .map(|a| a.iter().filter_map(|t| t["name"].as_str()).collect())
            .unwrap_or_default();
        assert!(!names.contains(&"sse_resumable"));
        assert!(names.contains(&"ok"));
        assert_eq!(list["resultType"], "complete");
    }
}
