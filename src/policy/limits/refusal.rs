//! A refused call's answer, in a form a model reads: a tools/call result with `isError:
//! true` and a sentence saying what was limited and when to retry (MCP 2025-11-25
//! server/tools §Error Handling: tool execution errors go in the result, for the model), a
//! JSON-RPC error with the request's id, or HTTP 429 / 503 with `Retry-After`.

use std::time::Duration;

use crate::config::{Rate, RefuseAs};
use crate::metrics::Limit;

/// The JSON-RPC error code of a call refused by a rate or concurrency limit (in the
/// implementation-defined server error range, JSON-RPC 2.0 §5.1).
pub const LIMITED_CODE: i64 = -32029;
/// The JSON-RPC error code of a call refused while the upstream's circuit is open.
pub const CIRCUIT_OPEN_CODE: i64 = -32053;
/// What a call refused by a concurrency limit is told to wait: no slot's end can be known.
pub const CONCURRENCY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Which limit refused a call (the log record's `refused_by`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusedBy {
    Rate,
    Concurrency,
    Circuit,
}

/// What the refused call ran into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Rate(Rate),
    Concurrency(u32),
    /// The upstream's circuit is open.
    Circuit,
}

/// A call strata answers itself instead of sending it upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: Reason,
    /// When a call like it may pass.
    pub retry_after: Duration,
    /// The answer's form, for this call's method.
    pub form: RefuseAs,
}

/// The answer's parts, for the data path to send.
#[derive(Debug)]
pub struct RefusalAnswer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    /// `Retry-After`, in whole seconds (at least 1).
    pub retry_after: u64,
    /// The `x-strata-error` value.
    pub code: &'static str,
}

impl RefusedBy {
    pub const fn as_str(self) -> &'static str {
        match self {
            RefusedBy::Rate => "rate",
            RefusedBy::Concurrency => "concurrency",
            RefusedBy::Circuit => "circuit",
        }
    }

    /// The `strata_limit_hits_total{limit}` it counts under.
    pub const fn limit(self) -> Limit {
        match self {
            RefusedBy::Rate => Limit::Rate,
            RefusedBy::Concurrency => Limit::Concurrency,
            RefusedBy::Circuit => Limit::Circuit,
        }
    }
}

impl RefuseAs {
    /// The form for a call (`tool_call`: a tools/call): a tool error only answers
    /// tools/call; other methods get the JSON-RPC error. `None` (not configured): the tool
    /// error for tools/call.
    pub fn for_call(configured: Option<RefuseAs>, tool_call: bool) -> RefuseAs {
        match configured.unwrap_or(RefuseAs::ToolError) {
            RefuseAs::ToolError if !tool_call => RefuseAs::JsonRpcError,
            form => form,
        }
    }
}

impl Refusal {
    pub fn by(&self) -> RefusedBy {
        match self.reason {
            Reason::Rate(_) => RefusedBy::Rate,
            Reason::Concurrency(_) => RefusedBy::Concurrency,
            Reason::Circuit => RefusedBy::Circuit,
        }
    }

    /// The sentence the agent (and its model) reads; `subject`: the tool, or the method.
    pub fn message(&self, subject: &str) -> String {
        let after = self.retry_after.as_secs_f64();
        match self.reason {
            Reason::Rate(rate) => format!(
                "strata: {subject} is limited to {}; retry after {after:.1} s",
                rate_text(rate)
            ),
            Reason::Concurrency(max) => format!(
                "strata: {subject} is limited to {max} calls at once; retry after {after:.1} s"
            ),
            Reason::Circuit => format!(
                "strata: {subject} was not sent: the MCP server (upstream) is failing; retry after {after:.1} s"
            ),
        }
    }

    /// The answer to the request whose id is `id` (its JSON text), as JSON or, for an agent
    /// that accepts only `text/event-stream`, as one SSE event.
    pub fn answer(&self, id: &str, subject: &str, sse: bool) -> RefusalAnswer {
        let text = json_string(&self.message(subject));
        let message = match self.form {
            RefuseAs::ToolError => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":{text}}}],"isError":true}}}}"#
            ),
            RefuseAs::JsonRpcError | RefuseAs::Http429 => {
                let code = match self.reason {
                    Reason::Circuit => CIRCUIT_OPEN_CODE,
                    _ => LIMITED_CODE,
                };
                let (by, after) = (self.by().as_str(), self.retry_after.as_secs_f64());
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{text},"data":{{"refused_by":"{by}","retry_after":{after:.3}}}}}}}"#
                )
            }
        };
        let status = match (self.form, self.reason) {
            (RefuseAs::Http429, Reason::Circuit) => 503,
            (RefuseAs::Http429, _) => 429,
            _ => 200,
        };
        let (content_type, body) = match sse {
            true => (
                "text/event-stream",
                format!("event: message\ndata: {message}\n\n"),
            ),
            false => ("application/json", message),
        };
        RefusalAnswer {
            status,
            content_type,
            body,
            retry_after: self.retry_after.as_secs_f64().ceil().max(1.0) as u64,
            code: match self.reason {
                Reason::Circuit => "upstream:circuit_open",
                Reason::Rate(_) => "downstream:rate_limited",
                Reason::Concurrency(_) => "downstream:concurrency_limited",
            },
        }
    }
}

/// `10 calls/s`, `600 calls/min`, `3 calls per 100ms`.
fn rate_text(rate: Rate) -> String {
    match rate.per.as_secs() {
        1 if rate.per.subsec_nanos() == 0 => format!("{} calls/s", rate.calls),
        60 if rate.per.subsec_nanos() == 0 => format!("{} calls/min", rate.calls),
        3600 if rate.per.subsec_nanos() == 0 => format!("{} calls/h", rate.calls),
        _ => format!("{} calls per {:?}", rate.calls, rate.per),
    }
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| String::from("\"strata: refused\""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn rate_refusal(form: RefuseAs) -> Refusal {
        let rate = Rate {
            calls: 10,
            per: Duration::from_secs(1),
        };
        Refusal {
            reason: Reason::Rate(rate),
            retry_after: Duration::from_millis(400),
            form,
        }
    }

    #[test]
    fn a_tool_error_tells_the_model_the_limit_and_the_wait() {
        let answer = rate_refusal(RefuseAs::ToolError).answer("\"a\"", "search_web", false);
        assert_eq!(
            (answer.status, answer.content_type),
            (200, "application/json")
        );
        let v: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(v["id"], "a");
        assert_eq!(v["result"]["isError"], true);
        assert_eq!(
            v["result"]["content"][0]["text"],
            "strata: search_web is limited to 10 calls/s; retry after 0.4 s"
        );
        assert_eq!(answer.retry_after, 1);
    }

    #[test]
    fn a_jsonrpc_error_and_http_429_carry_the_code_and_what_refused() {
        let answer = rate_refusal(RefuseAs::JsonRpcError).answer("7", "ping", false);
        let v: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!((answer.status, v["id"].clone()), (200, Value::from(7)));
        assert_eq!(v["error"]["code"], LIMITED_CODE);
        assert_eq!(v["error"]["data"]["refused_by"], "rate");
        let answer = rate_refusal(RefuseAs::Http429).answer("7", "ping", false);
        assert_eq!(answer.status, 429);
        let circuit = Refusal {
            reason: Reason::Circuit,
            retry_after: Duration::from_millis(2500),
            form: RefuseAs::Http429,
        };
        let answer = circuit.answer("7", "ping", false);
        assert_eq!((answer.status, answer.retry_after), (503, 3));
        let v: Value = serde_json::from_str(&answer.body).unwrap();
        assert_eq!(v["error"]["code"], CIRCUIT_OPEN_CODE);
    }

    #[test]
    fn an_agent_accepting_only_sse_gets_one_event() {
        let answer = rate_refusal(RefuseAs::ToolError).answer("1", "t", true);
        assert_eq!(answer.content_type, "text/event-stream");
        let data = answer.body.strip_prefix("event: message\ndata: ").unwrap();
        let v: Value = serde_json::from_str(data.trim_end()).unwrap();
        assert_eq!(v["result"]["isError"], true);
    }

    #[test]
    fn a_tool_error_answers_only_tools_call() {
        assert_eq!(RefuseAs::for_call(None, true), RefuseAs::ToolError);
        assert_eq!(RefuseAs::for_call(None, false), RefuseAs::JsonRpcError);
        let asked = Some(RefuseAs::ToolError);
        assert_eq!(RefuseAs::for_call(asked, false), RefuseAs::JsonRpcError);
        let asked = Some(RefuseAs::Http429);
        assert_eq!(RefuseAs::for_call(asked, false), RefuseAs::Http429);
    }
}
