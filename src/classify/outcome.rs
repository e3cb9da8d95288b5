//! The outcome vocabulary: exactly one [`Outcome`] per JSON-RPC request, each in one [`Layer`].
//!
//! The order of the variants is the order of precedence in README.md ("Outcomes"):
//! when several rules apply to one request, the earliest variant wins.

/// The layer at which a call ended. Used as the `layer` metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layer {
    Transport,
    Protocol,
    Interaction,
    Application,
}

/// What happened to one JSON-RPC request. Used as the `outcome` metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// The agent went away before the final response.
    ClientCancelled,
    /// The final HTTP status was not 2xx (the upstream's, or strata's own 502/504).
    HttpError,
    /// 2xx, but the body ended or broke before the final response for this id.
    StreamIncomplete,
    /// The body, or an SSE event's data, is not valid JSON; or a 2xx content type that is
    /// neither JSON nor SSE.
    MalformedJson,
    /// `jsonrpc` ≠ "2.0", id mismatch, `result` and `error` both or neither, bad error object.
    InvalidEnvelope,
    /// A well-formed top-level JSON-RPC `error`.
    JsonRpcError,
    /// Result not an object, unknown `resultType`, tools/call `content` not an array,
    /// `isError` not boolean.
    InvalidToolResult,
    /// `resultType: "input_required"` (2026-07-28 MRTR): not done, not failed.
    InputRequired,
    /// tools/call, complete, `isError: true`.
    ToolError,
    /// tools/call, complete, `isError` absent or false.
    ToolSuccess,
    /// Any other method's valid result (including a `task` result, see `envelope.rs`).
    Success,
}

// === impl Layer ===

impl Layer {
    pub const ALL: [Layer; 4] = [
        Layer::Transport,
        Layer::Protocol,
        Layer::Interaction,
        Layer::Application,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Layer::Transport => "transport",
            Layer::Protocol => "protocol",
            Layer::Interaction => "interaction",
            Layer::Application => "application",
        }
    }
}

// === impl Outcome ===

impl Outcome {
    pub const ALL: [Outcome; 11] = [
        Outcome::ClientCancelled,
        Outcome::HttpError,
        Outcome::StreamIncomplete,
        Outcome::MalformedJson,
        Outcome::InvalidEnvelope,
        Outcome::JsonRpcError,
        Outcome::InvalidToolResult,
        Outcome::InputRequired,
        Outcome::ToolError,
        Outcome::ToolSuccess,
        Outcome::Success,
    ];

    /// The label value (metric label and log field), as written in README.md "Outcomes".
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::ClientCancelled => "CLIENT_CANCELLED",
            Outcome::HttpError => "HTTP_ERROR",
            Outcome::StreamIncomplete => "STREAM_INCOMPLETE",
            Outcome::MalformedJson => "MALFORMED_JSON",
            Outcome::InvalidEnvelope => "INVALID_ENVELOPE",
            Outcome::JsonRpcError => "JSONRPC_ERROR",
            Outcome::InvalidToolResult => "INVALID_TOOL_RESULT",
            Outcome::InputRequired => "INPUT_REQUIRED",
            Outcome::ToolError => "TOOL_ERROR",
            Outcome::ToolSuccess => "TOOL_SUCCESS",
            Outcome::Success => "SUCCESS",
        }
    }

    pub const fn layer(self) -> Layer {
        match self {
            Outcome::ClientCancelled | Outcome::HttpError | Outcome::StreamIncomplete => {
                Layer::Transport
            }
            Outcome::MalformedJson
            | Outcome::InvalidEnvelope
            | Outcome::JsonRpcError
            | Outcome::InvalidToolResult => Layer::Protocol,
            Outcome::InputRequired => Layer::Interaction,
            Outcome::ToolError | Outcome::ToolSuccess | Outcome::Success => Layer::Application,
        }
    }

    /// Parses a label value back (used by tests and the demo's table).
    /// Whether the call succeeded: a valid result, and for tools/call `isError` not set.
    pub const fn succeeded(self) -> bool {
        matches!(self, Outcome::ToolSuccess | Outcome::Success)
    }

    pub fn from_label(s: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
