use std::time::Duration;

use super::*;
use crate::config::{Glob, Rate};

async fn admit(limits: &CallLimits, method: &str, tool: &str) -> Result<Admission, Refusal> {
    let rule = limits.rule(method, tool);
    limits.admit(rule, method == "tools/call").await
}

fn limits(metrics: &Metrics) -> Arc<CallLimits> {
    let rule = CallRule {
        tool: Some(Glob::new("search_*")),
        method: None,
        max_concurrent: Some(2),
        rate: Some(Rate {
            calls: 10,
            per: Duration::from_secs(1),
        }),
        burst: Some(3),
        queue: Duration::ZERO,
        refuse_as: None,
    };
    let circuit = CircuitConfig {
        consecutive_failures: 2,
        open_for: Duration::from_secs(5),
        max_open_for: Duration::from_secs(60),
        on: CircuitOn::ALL.to_vec(),
        refuse_as: Some(RefuseAs::Http429),
    };
    CallLimits::new(&[rule], Some(&circuit), None, metrics).unwrap()
}

#[tokio::test(start_paused = true)]
async fn nothing_configured_is_no_limits() {
    let metrics = Metrics::new(8, 8).unwrap();
    assert!(CallLimits::new(&[], None, None, &metrics).is_none());
}

#[tokio::test(start_paused = true)]
async fn a_call_holds_its_slot_and_the_bucket_refuses_past_its_burst() {
    let metrics = Metrics::new(8, 8).unwrap();
    let limits = limits(&metrics);
    let a = admit(&limits, "tools/call", "search_web").await.unwrap();
    let b = admit(&limits, "tools/call", "search_web").await.unwrap();
    let refused = admit(&limits, "tools/call", "search_web")
        .await
        .unwrap_err();
    assert_eq!(refused.by(), refusal::RefusedBy::Concurrency);
    // Another tool matches no rule: only the circuit applies.
    assert!(admit(&limits, "tools/call", "fetch").await.is_ok());
    drop((a, b));
    // Two tokens were taken; the third is the burst's last.
    assert!(admit(&limits, "tools/call", "search_web").await.is_ok());
    let refused = admit(&limits, "tools/call", "search_web")
        .await
        .unwrap_err();
    assert_eq!(refused.by(), refusal::RefusedBy::Rate);
    assert_eq!(refused.retry_after, Duration::from_millis(100));
}

#[tokio::test(start_paused = true)]
async fn failed_attempts_open_the_circuit_and_no_retry_goes_into_it() {
    let metrics = Metrics::new(8, 8).unwrap();
    let limits = limits(&metrics);
    let mut first = admit(&limits, "tools/call", "fetch").await.unwrap();
    assert!(first.may_retry());
    first.attempt_ended(Some(CircuitOn::Http503), Some(503));
    first.attempt_ended(Some(CircuitOn::ConnectError), None);
    assert!(!first.may_retry(), "the circuit is open");
    let refused = admit(&limits, "ping", "").await.unwrap_err();
    assert_eq!(refused.by(), refusal::RefusedBy::Circuit);
    assert_eq!(refused.form, RefuseAs::Http429);
    assert_eq!(refused.retry_after, Duration::from_secs(5));
    tokio::time::advance(Duration::from_secs(5)).await;
    let mut probe = admit(&limits, "ping", "").await.unwrap();
    assert!(
        admit(&limits, "ping", "").await.is_err(),
        "one probe at a time"
    );
    probe.attempt_ended(None, Some(200));
    probe.finished(Outcome::Success);
    assert!(
        admit(&limits, "ping", "").await.is_ok(),
        "the probe closed it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_refused_by_the_circuit_gives_its_token_back() {
    let metrics = Metrics::new(8, 8).unwrap();
    let limits = limits(&metrics);
    let mut failing = admit(&limits, "tools/call", "fetch").await.unwrap();
    failing.attempt_ended(Some(CircuitOn::Http502), Some(502));
    failing.attempt_ended(Some(CircuitOn::Http502), Some(502));
    for _ in 0..5 {
        let refused = admit(&limits, "tools/call", "search_web")
            .await
            .unwrap_err();
        assert_eq!(refused.by(), refusal::RefusedBy::Circuit);
    }
    let limiter = limits.rule("tools/call", "search_web").unwrap();
    let tokens = (0..4).filter(|_| limiter.retry_token()).count();
    assert_eq!(tokens, 3, "the bucket still holds its burst");
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_ends_early_counts_at_the_outcome_and_a_probe_left_is_released() {
    let metrics = Metrics::new(8, 8).unwrap();
    let limits = limits(&metrics);
    for _ in 0..2 {
        let mut call = admit(&limits, "tools/call", "fetch").await.unwrap();
        call.attempt_ended(None, Some(200));
        call.finished(Outcome::StreamIncomplete);
    }
    assert!(admit(&limits, "ping", "").await.is_err(), "open");
    tokio::time::advance(Duration::from_secs(5)).await;
    let probe = admit(&limits, "ping", "").await.unwrap();
    drop(probe);
    let mut probe = admit(&limits, "ping", "").await.unwrap();
    probe.attempt_ended(None, Some(500));
    assert!(
        admit(&limits, "ping", "").await.is_ok(),
        "an answer closes it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_reload_keeps_an_unchanged_circuit() {
    let metrics = Metrics::new(8, 8).unwrap();
    let old = limits(&metrics);
    let mut call = admit(&old, "ping", "").await.unwrap();
    call.attempt_ended(Some(CircuitOn::Http504), Some(504));
    call.attempt_ended(Some(CircuitOn::Http504), Some(504));
    let circuit = old.circuit.as_ref().map(|(_, c)| c.clone());
    let new = CallLimits::new(&[], circuit.as_ref(), Some(&old), &metrics).unwrap();
    assert!(admit(&new, "ping", "").await.is_err(), "still open");
    let mut changed = circuit.unwrap();
    changed.consecutive_failures = 9;
    let new = CallLimits::new(&[], Some(&changed), Some(&old), &metrics).unwrap();
    assert!(admit(&new, "ping", "").await.is_ok(), "a new circuit");
}

#[tokio::test(start_paused = true)]
async fn a_status_the_circuit_does_not_name_is_an_answer() {
    let metrics = Metrics::new(8, 8).unwrap();
    let config = CircuitConfig {
        consecutive_failures: 2,
        on: vec![CircuitOn::Http502],
        ..CircuitConfig::default()
    };
    let limits = CallLimits::new(&[], Some(&config), None, &metrics).unwrap();
    let mut call = admit(&limits, "ping", "").await.unwrap();
    call.attempt_ended(Some(CircuitOn::Http502), Some(502));
    call.attempt_ended(Some(CircuitOn::Http503), Some(503));
    call.attempt_ended(Some(CircuitOn::Http502), Some(502));
    assert!(
        admit(&limits, "ping", "").await.is_ok(),
        "the 503 reset the count"
    );
    call.attempt_ended(Some(CircuitOn::ConnectError), None);
    call.attempt_ended(Some(CircuitOn::Http502), Some(502));
    assert!(
        admit(&limits, "ping", "").await.is_err(),
        "a connect error says nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn a_reload_keeps_an_unchanged_rule_s_limiter_and_renews_a_changed_one() {
    let metrics = Metrics::new(8, 8).unwrap();
    let old = limits(&metrics);
    let held = admit(&old, "tools/call", "search_web").await.unwrap();
    let _also = admit(&old, "tools/call", "search_web").await.unwrap();
    let mut rules = vec![CallRule {
        tool: Some(Glob::new("search_*")),
        method: None,
        max_concurrent: Some(2),
        rate: Some(Rate {
            calls: 10,
            per: Duration::from_secs(1),
        }),
        burst: Some(3),
        queue: Duration::ZERO,
        refuse_as: None,
    }];
    let same = CallLimits::new(&rules, None, Some(&old), &metrics).unwrap();
    let refused = admit(&same, "tools/call", "search_web").await.unwrap_err();
    assert_eq!(
        refused.by(),
        refusal::RefusedBy::Concurrency,
        "its slots are taken"
    );
    rules[0].max_concurrent = Some(3);
    let changed = CallLimits::new(&rules, None, Some(&same), &metrics).unwrap();
    assert!(
        admit(&changed, "tools/call", "search_web").await.is_ok(),
        "a new limiter"
    );
    drop(held);
    assert!(
        admit(&same, "tools/call", "search_web").await.is_ok(),
        "the old one, freed"
    );
}
