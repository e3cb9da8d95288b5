//! `limits.calls` rules: matched as `tools:` rules are (`match` globs the tool name of a
//! tools/call, `method` the JSON-RPC method), first match wins. Each rule owns its limiter.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::bucket::Bucket;
use super::concurrency::{Slot, Slots};
use super::refusal::{CONCURRENCY_RETRY_AFTER, Reason, Refusal};
use crate::config::{CallRule, Rate, RefuseAs};

/// One rule: what it matches, and its limiter.
#[derive(Debug)]
pub struct Rule {
    /// The rule as configured, to keep its limiter across a reload that leaves it unchanged.
    config: CallRule,
    limiter: Arc<Limiter>,
}

/// A rule's limits, shared by every call it matches (and by a retry, for its token).
#[derive(Debug)]
pub struct Limiter {
    slots: Option<Slots>,
    bucket: Option<(Bucket, Rate)>,
    queue: Duration,
    refuse_as: Option<RefuseAs>,
}

impl Rule {
    /// The rule `rule` sets; `previous`: the rules in force before a reload, whose limiter
    /// (with its calls in flight and its tokens) an unchanged rule keeps.
    pub fn new(rule: &CallRule, previous: &[Rule], now: Instant) -> Rule {
        let kept = previous.iter().find(|old| old.config == *rule);
        let limiter = match kept {
            Some(old) => old.limiter.clone(),
            None => Arc::new(Limiter::new(rule, now)),
        };
        Rule {
            config: rule.clone(),
            limiter,
        }
    }

    /// Whether the rule covers a call of `method` (and `tool`, for tools/call).
    pub fn matches(&self, method: &str, tool: &str) -> bool {
        let is_tool_call = method == "tools/call";
        let method_ok = match &self.config.method {
            Some(m) => m.matches(method),
            None => is_tool_call,
        };
        let tool_ok = match &self.config.tool {
            Some(t) => is_tool_call && t.matches(tool),
            None => true,
        };
        method_ok && tool_ok
    }

    pub fn limiter(&self) -> &Arc<Limiter> {
        &self.limiter
    }
}

impl Limiter {
    fn new(rule: &CallRule, now: Instant) -> Limiter {
        let bucket = rule.rate.map(|rate| {
            let burst = rule.burst.unwrap_or(rate.calls);
            (Bucket::new(rate, burst, now), rate)
        });
        Limiter {
            slots: rule.max_concurrent.map(Slots::new),
            bucket,
            queue: rule.queue,
            refuse_as: rule.refuse_as,
        }
    }

    /// A slot (when the rule limits concurrency) and a token (when it limits the rate),
    /// each waited for within the rule's `queue`; or the refusal, with nothing held. `now`:
    /// the time the call arrived, read again after a wait, so the circuit is asked at the
    /// time the limiter let the call go.
    ///
    /// A wait (its timer and notice) is boxed: only a call that queues takes its room, and
    /// the future of a call that passes at once stays small enough not to be boxed itself.
    pub async fn admit(&self, tool_call: bool, now: &mut Instant) -> Result<Option<Slot>, Refusal> {
        let started = *now;
        let slot = match &self.slots {
            Some(slots) => match slots.try_take() {
                Some(slot) => Some(slot),
                None => match Box::pin(slots.take_within(self.queue)).await {
                    Some(slot) => {
                        *now = Instant::now();
                        Some(slot)
                    }
                    None => return Err(self.refusal(Reason::Concurrency(slots.max()), tool_call)),
                },
            },
            None => None,
        };
        let left = self
            .queue
            .saturating_sub(now.saturating_duration_since(started));
        if let Some((bucket, rate)) = &self.bucket {
            match bucket.take(*now, left) {
                Ok(wait) if wait.is_zero() => {}
                Ok(wait) => {
                    Box::pin(tokio::time::sleep(wait)).await;
                    *now = Instant::now();
                }
                Err(due) => {
                    let mut refusal = self.refusal(Reason::Rate(*rate), tool_call);
                    refusal.retry_after = due;
                    return Err(refusal);
                }
            }
        }
        Ok(slot)
    }

    /// A token for a retry, taken now or not at all (a retry never queues).
    pub fn retry_token(&self) -> bool {
        match &self.bucket {
            Some((bucket, _)) => bucket.take(Instant::now(), Duration::ZERO).is_ok(),
            None => true,
        }
    }

    /// Gives back the token a call took that another limit then refused.
    pub fn give_back(&self) {
        if let Some((bucket, _)) = &self.bucket {
            bucket.give_back();
        }
    }

    fn refusal(&self, reason: Reason, tool_call: bool) -> Refusal {
        Refusal {
            reason,
            retry_after: CONCURRENCY_RETRY_AFTER,
            form: RefuseAs::for_call(self.refuse_as, tool_call),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Glob;

    fn rule(tool: Option<&str>, method: Option<&str>) -> Rule {
        let config = CallRule {
            tool: tool.map(Glob::new),
            method: method.map(Glob::new),
            max_concurrent: Some(1),
            rate: None,
            burst: None,
            queue: Duration::ZERO,
            refuse_as: None,
        };
        Rule::new(&config, &[], Instant::now())
    }

    #[tokio::test(start_paused = true)]
    async fn rules_match_as_tools_rules_do() {
        let search = rule(Some("search_*"), None);
        assert!(search.matches("tools/call", "search_web"));
        assert!(!search.matches("tools/call", "fetch"));
        assert!(!search.matches("prompts/get", "search_web"));
        let any = rule(None, Some("*"));
        assert!(any.matches("ping", ""));
        assert!(any.matches("tools/call", "fetch"));
        let list = rule(None, Some("*/list"));
        assert!(list.matches("tools/list", "") && !list.matches("ping", ""));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_past_the_slots_is_refused_with_nothing_held() {
        let limiter = rule(Some("*"), None).limiter().clone();
        let held = limiter.admit(true, &mut Instant::now()).await.unwrap();
        let refused = limiter.admit(true, &mut Instant::now()).await.unwrap_err();
        assert_eq!(refused.reason, Reason::Concurrency(1));
        assert_eq!(refused.form, RefuseAs::ToolError);
        drop(held);
        assert!(
            limiter
                .admit(true, &mut Instant::now())
                .await
                .unwrap()
                .is_some()
        );
    }
}
