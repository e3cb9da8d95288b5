//! Typed settings of the retry and idempotency policy (`retry`, `tools`, `trust_annotations`,
//! `idempotency`). Plain data; `policy/` builds the runtime from it.

use std::str::Chars;
use std::time::Duration;

use super::redis::RedisConfig;

/// A transport-layer failure a call may be re-sent after.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryOn {
    Http502,
    Http503,
    Http504,
    Http429,
    /// No connection to the upstream: nothing was sent.
    ConnectError,
    /// The upstream closed the connection before a response head.
    UpstreamReset,
}

/// The retry loop's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryConfig {
    /// Attempts in all, the first included (1: never retry).
    pub max_attempts: u32,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// The failures that may be retried.
    pub on: Vec<RetryOn>,
    pub budget: RetryBudget,
    /// A `Retry-After` longer than this is not waited for: the 429/503 goes to the agent.
    pub max_retry_after: Duration,
    /// The capped replay buffer: a request body larger than this is streamed and never retried.
    pub replay_buffer: usize,
    /// No retry starts later than this after the call arrived.
    pub deadline: Duration,
}

/// Linkerd-style budget: retries may add `ratio` of the calls, plus `min_per_second`,
/// counted over `window`.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryBudget {
    pub ratio: f64,
    pub min_per_second: u32,
    pub window: Duration,
}

/// A shell-style glob: `*` any run of characters, `?` one character; everything else literal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Glob(String);

/// An operator's word on what is idempotent. The first rule that matches a call decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolRule {
    /// Glob on the tool name (tools/call only); `None` matches any call of `method`.
    pub tool: Option<Glob>,
    /// Glob on the JSON-RPC method; `None` with a `tool` means tools/call.
    pub method: Option<Glob>,
    pub idempotent: bool,
}

/// Where idempotency records live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreKind {
    Memory,
    /// `redis://…` or `rediss://…`: shared by every replica.
    Redis(RedisConfig),
}

/// `Idempotency-Key` handling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdempotencyConfig {
    pub store: StoreKind,
    /// How long a completed call's record answers repeats.
    pub ttl: Duration,
    /// Records kept at most (memory store).
    pub max_entries: usize,
    /// Bytes of recorded responses kept at most (memory store).
    pub max_bytes: usize,
    /// A response larger than this is not recorded (a repeat is then forwarded).
    pub max_record_bytes: usize,
    /// The upstream itself honours `Idempotency-Key`, so a keyed call may be retried.
    pub upstream_honours_keys: bool,
}

/// The policy settings, as one section of [`Config`](super::Config).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyConfig {
    pub retry: RetryConfig,
    pub tools: Vec<ToolRule>,
    /// Believe the upstream's `readOnlyHint`/`idempotentHint` tool annotations (untrusted hints).
    pub trust_annotations: bool,
    pub idempotency: IdempotencyConfig,
}

// === impl RetryOn ===

impl RetryOn {
    pub const ALL: [RetryOn; 6] = [
        RetryOn::Http502,
        RetryOn::Http503,
        RetryOn::Http504,
        RetryOn::Http429,
        RetryOn::ConnectError,
        RetryOn::UpstreamReset,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            RetryOn::Http502 => "http_502",
            RetryOn::Http503 => "http_503",
            RetryOn::Http504 => "http_504",
            RetryOn::Http429 => "http_429",
            RetryOn::ConnectError => "connect_error",
            RetryOn::UpstreamReset => "upstream_reset",
        }
    }

    pub fn parse(word: &str) -> Option<RetryOn> {
        RetryOn::ALL.into_iter().find(|r| r.as_str() == word.trim())
    }
}

// === impl Glob ===

impl Glob {
    pub fn new(pattern: impl Into<String>) -> Glob {
        Glob(pattern.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `text` matches (iterative, with one backtrack point: linear in practice).
    /// Walks both strings by `char` in place: it runs for every limited call, and allocates
    /// nothing.
    pub fn matches(&self, text: &str) -> bool {
        let (mut p, mut t) = (self.0.chars(), text.chars());
        // After the last `*`: the pattern past it, and where in `text` it was tried last.
        let mut star: Option<(Chars<'_>, Chars<'_>)> = None;
        loop {
            match (p.clone().next(), t.clone().next()) {
                (Some('*'), _) => {
                    p.next();
                    star = Some((p.clone(), t.clone()));
                }
                (Some(c), Some(x)) if c == '?' || c == x => {
                    p.next();
                    t.next();
                }
                (_, None) => return p.all(|c| c == '*'),
                _ => match &mut star {
                    // The `*` takes one more char of `text`, and the rest is tried again.
                    Some((after, tried)) => {
                        tried.next();
                        (p, t) = (after.clone(), tried.clone());
                    }
                    None => return false,
                },
            }
        }
    }
}

// === defaults ===

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(2),
            on: vec![
                RetryOn::Http502,
                RetryOn::Http503,
                RetryOn::Http504,
                RetryOn::Http429,
                RetryOn::ConnectError,
            ],
            budget: RetryBudget::default(),
            max_retry_after: Duration::from_secs(5),
            replay_buffer: 64 << 10,
            deadline: Duration::from_secs(30),
        }
    }
}

impl Default for RetryBudget {
    fn default() -> Self {
        RetryBudget {
            ratio: 0.2,
            min_per_second: 10,
            window: Duration::from_secs(10),
        }
    }
}

impl Default for IdempotencyConfig {
    fn default() -> Self {
        IdempotencyConfig {
            store: StoreKind::Memory,
            ttl: Duration::from_secs(60 * 60),
            max_entries: 10_000,
            max_bytes: 64 << 20,
            max_record_bytes: 1 << 20,
            upstream_honours_keys: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Glob;

    #[test]
    fn globs() {
        let g = Glob::new("read_*");
        assert!(g.matches("read_file"));
        assert!(g.matches("read_"));
        assert!(!g.matches("write_file"));
        assert!(Glob::new("*").matches(""));
        assert!(Glob::new("a*b*c").matches("axxbyyc"));
        assert!(!Glob::new("a*b*c").matches("axxbyy"));
        assert!(Glob::new("r??d").matches("read"));
        assert!(!Glob::new("r??d").matches("rd"));
        assert!(Glob::new("*_get").matches("github_issue_get"));
        assert!(!Glob::new("*_get").matches("github_get_issue"));
        assert!(Glob::new("*a").matches("aaa") && !Glob::new("a*a").matches("a"));
        assert!(Glob::new("**").matches("x") && Glob::new("x**").matches("x"));
        assert!(!Glob::new("").matches("x") && Glob::new("").matches(""));
        // `?` is one char, not one byte.
        assert!(Glob::new("caf?").matches("café") && !Glob::new("caf??").matches("café"));
        assert!(Glob::new("*é*").matches("résumé") && !Glob::new("*é").matches("résume"));
    }
}
