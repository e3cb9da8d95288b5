//! What may be re-sent: an operator's rule (first match wins), the upstream's own tool
//! annotations (opt-in: annotations are untrusted hints, 2025-06-18 server/tools
//! §ToolAnnotations), an `Idempotency-Key` the upstream honours, or a method that only reads.

use std::collections::HashMap;
use std::sync::RwLock;

use crate::config::ToolRule;

/// Methods that only read, idempotent by default (spec revisions 2025-03-26 … 2026-07-28).
/// `tools/call` is never on this list: a tool may charge a card or write a row.
pub const READ_ONLY_METHODS: [&str; 12] = [
    "ping",
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "server/discover",
    "tasks/get",
    "tasks/list",
    "tasks/result",
];

/// Tools whose annotations are remembered at most (names come from the upstream).
pub const MAX_ANNOTATED_TOOLS: usize = 10_000;

/// Why a call may be re-sent, or why not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// An operator rule says so.
    Rule(bool),
    /// The upstream marked the tool `readOnlyHint` or `idempotentHint`.
    Annotation,
    /// The request carries an `Idempotency-Key` that the upstream honours.
    Key,
    /// A method that only reads.
    ReadOnlyMethod,
    /// Nothing makes it safe.
    Unknown,
}

impl Verdict {
    pub fn idempotent(self) -> bool {
        matches!(
            self,
            Verdict::Rule(true) | Verdict::Annotation | Verdict::Key | Verdict::ReadOnlyMethod
        )
    }
}

/// The hints an upstream gave for its tools, learnt from `tools/list` results.
#[derive(Default)]
pub struct Annotations {
    tools: RwLock<HashMap<Box<str>, bool>>,
}

impl Annotations {
    /// Records a tool's hints: idempotent when `readOnlyHint` (a read-only tool is idempotent)
    /// or `idempotentHint` is true.
    pub fn learn(&self, tool: &str, read_only: bool, idempotent: bool) {
        let mut tools = self.tools.write().unwrap_or_else(|e| e.into_inner());
        if tools.len() >= MAX_ANNOTATED_TOOLS && !tools.contains_key(tool) {
            return;
        }
        tools.insert(tool.into(), read_only || idempotent);
    }

    pub fn idempotent(&self, tool: &str) -> bool {
        let tools = self.tools.read().unwrap_or_else(|e| e.into_inner());
        tools.get(tool).copied().unwrap_or(false)
    }
}

/// The decision for one request.
pub fn decide(
    rules: &[ToolRule],
    annotations: Option<&Annotations>,
    honours_keys: bool,
    method: &str,
    tool: &str,
    has_key: bool,
) -> Verdict {
    let is_tool_call = method == "tools/call";
    for rule in rules {
        let method_ok = match (&rule.method, &rule.tool) {
            (Some(m), _) => m.matches(method),
            (None, _) => is_tool_call,
        };
        let tool_ok = match &rule.tool {
            Some(t) => is_tool_call && t.matches(tool),
            None => true,
        };
        if method_ok && tool_ok {
            return Verdict::Rule(rule.idempotent);
        }
    }
    if is_tool_call && annotations.is_some_and(|a| a.idempotent(tool)) {
        return Verdict::Annotation;
    }
    if has_key && honours_keys {
        return Verdict::Key;
    }
    if READ_ONLY_METHODS.contains(&method) {
        return Verdict::ReadOnlyMethod;
    }
    Verdict::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Glob;

    fn rule(tool: Option<&str>, method: Option<&str>, idempotent: bool) -> ToolRule {
        ToolRule {
            tool: tool.map(Glob::new),
            method: method.map(Glob::new),
            idempotent,
        }
    }

    #[test]
    fn rules_first_then_annotations_keys_and_reads() {
        let rules = [
            rule(Some("read_*"), None, true),
            rule(None, Some("prompts/get"), false),
        ];
        let ann = Annotations::default();
        ann.learn("lookup", true, false);
        let d = |m: &str, t: &str, key: bool| decide(&rules, Some(&ann), true, m, t, key);
        assert_eq!(d("tools/call", "read_file", false), Verdict::Rule(true));
        assert_eq!(d("prompts/get", "", false), Verdict::Rule(false));
        assert_eq!(d("tools/call", "lookup", false), Verdict::Annotation);
        assert_eq!(d("tools/call", "charge", true), Verdict::Key);
        assert_eq!(d("tools/call", "charge", false), Verdict::Unknown);
        assert_eq!(d("tools/list", "", false), Verdict::ReadOnlyMethod);
        assert!(!d("tools/call", "charge", false).idempotent());
        // Annotations are ignored unless trusted.
        assert_eq!(
            decide(&rules, None, false, "tools/call", "lookup", false),
            Verdict::Unknown
        );
        // A read rule does not match a tool of another method.
        assert_eq!(
            d("resources/read", "read_x", false),
            Verdict::ReadOnlyMethod
        );
    }
}
