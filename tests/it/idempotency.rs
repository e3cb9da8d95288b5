//! Idempotency keys through strata: one upstream execution per key, repeats answered from
//! the record with their own ids, 409 while the first runs, 422 for a different request,
//! expiry; the same with the Redis store, and across two strata replicas sharing it.
#![cfg(test)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use strata::app::{Running, start};
use strata::config::{Config, IdempotencyConfig, RedisConfig, StoreKind, Upstream};
use strata::testbed::{Testbed, TestbedHandle};
use support::post::{Agent, series};
use support::redis::Redis;

pub(crate) struct Bed {
    pub(crate) testbed: Arc<Testbed>,
    _handle: TestbedHandle,
    upstream: Upstream,
}

pub(crate) async fn testbed() -> Bed {
    let (addr, testbed, handle) = Testbed::spawn_local().await.unwrap();
    Bed {
        testbed,
        _handle: handle,
        upstream: Upstream::parse(&format!("http://{addr}")).unwrap(),
    }
}

pub(crate) async fn strata(bed: &Bed, idempotency: IdempotencyConfig) -> Running {
    let mut config = Config::default_with_upstream(bed.upstream.clone());
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.admin = "127.0.0.1:0".parse().unwrap();
    config.policy.idempotency = idempotency;
    start(&config).await.unwrap()
}

fn memory(ttl: Duration) -> IdempotencyConfig {
    IdempotencyConfig {
        ttl,
        ..IdempotencyConfig::default()
    }
}

const KEY: (&str, &str) = ("idempotency-key", "order-7");

/// Same key twice: one execution, the same result, each with its own id.
async fn repeat_is_replayed(first: &Running, second: &Running, bed: &Bed) {
    let a = Agent::new(first.listen)
        .call(json!(1), "ok", json!({}), &[KEY])
        .await;
    let b = Agent::new(second.listen)
        .call(json!("two"), "ok", json!({}), &[KEY])
        .await;
    assert_eq!((a.status, b.status), (200, 200));
    assert_eq!(bed.testbed.calls_of("ok"), 1, "one upstream execution");
    let (a, b) = (a.json(), {
        assert_eq!(b.header("idempotent-replayed"), Some("true"));
        b.json()
    });
    assert_eq!(a["id"], json!(1));
    assert_eq!(b["id"], json!("two"), "the repeat's own id");
    assert_eq!(a["result"], b["result"], "identical results");
}

#[tokio::test]
async fn memory_same_key_twice_runs_once() {
    let bed = testbed().await;
    let s = strata(&bed, memory(Duration::from_secs(60))).await;
    repeat_is_replayed(&s, &s, &bed).await;
    let text = s.metrics.render();
    assert_eq!(
        series(
            &text,
            "strata_idempotent_replays_total",
            &[("result", "replayed")]
        ),
        1.0
    );
    // Both calls are classified, once each; the repeat is the agent's retry.
    assert_eq!(
        series(
            &text,
            "strata_calls_total",
            &[("tool", "ok"), ("outcome", "TOOL_SUCCESS")]
        ),
        2.0
    );
}

/// A keyed POST that strata's own connection reads goes out from its fields as read: the key
/// is scoped by `Authorization` as read, and the record is taken from the answer's fields (a
/// repeat gets the answer's `Content-Type`, the first answer this hop's `Via`).
#[tokio::test]
async fn keys_read_from_fields_are_scoped_and_recorded() {
    let bed = testbed().await;
    let s = strata(&bed, memory(Duration::from_secs(60))).await;
    let agent = Agent::new(s.listen);
    let as_one = [KEY, ("authorization", "Bearer one")];
    let first = agent.call(json!(1), "ok", json!({}), &as_one).await;
    let other = agent
        .call(
            json!(2),
            "ok",
            json!({}),
            &[KEY, ("authorization", "Bearer two")],
        )
        .await;
    assert_eq!((first.status, other.status), (200, 200));
    assert_eq!(
        bed.testbed.calls_of("ok"),
        2,
        "another Authorization: another key"
    );
    assert!(first.header("via").is_some_and(|v| v.contains("strata")));
    let again = agent.call(json!(3), "ok", json!({}), &as_one).await;
    assert_eq!(
        bed.testbed.calls_of("ok"),
        2,
        "the same scope and key: replayed"
    );
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert!(first.header("content-type").is_some());
    assert_eq!(again.header("content-type"), first.header("content-type"));
    assert_eq!(again.json()["id"], json!(3));
    assert_eq!(again.json()["result"], first.json()["result"]);
}

#[tokio::test]
async fn memory_same_key_other_arguments_is_422() {
    let bed = testbed().await;
    let s = strata(&bed, memory(Duration::from_secs(60))).await;
    let agent = Agent::new(s.listen);
    assert_eq!(
        agent
            .call(json!(1), "ok", json!({"a": 1}), &[KEY])
            .await
            .status,
        200
    );
    let other = agent.call(json!(2), "ok", json!({"a": 2}), &[KEY]).await;
    assert_eq!(other.status, 422);
    assert!(
        other.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("different request")
    );
    assert_eq!(bed.testbed.calls_of("ok"), 1);
    let text = s.metrics.render();
    assert_eq!(
        series(
            &text,
            "strata_idempotent_replays_total",
            &[("result", "mismatch")]
        ),
        1.0
    );
}

#[tokio::test]
async fn memory_concurrent_same_key_is_409() {
    let bed = testbed().await;
    let s = strata(&bed, memory(Duration::from_secs(60))).await;
    let agent = Agent::new(s.listen);
    let slow = {
        let agent = agent.clone();
        tokio::spawn(async move {
            agent
                .call(json!(1), "slow", json!({"ms": 600}), &[KEY])
                .await
        })
    };
    // Wait until the first call reached the upstream, then repeat it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while bed.testbed.calls_of("slow") == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second = agent
        .call(json!(2), "slow", json!({"ms": 600}), &[KEY])
        .await;
    assert_eq!(second.status, 409);
    assert!(
        second.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in progress")
    );
    assert_eq!(slow.await.unwrap().status, 200);
    assert_eq!(bed.testbed.calls_of("slow"), 1);
}

#[tokio::test]
async fn memory_records_expire() {
    let bed = testbed().await;
    let s = strata(&bed, memory(Duration::from_millis(200))).await;
    let agent = Agent::new(s.listen);
    agent.call(json!(1), "ok", json!({}), &[KEY]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = agent.call(json!(2), "ok", json!({}), &[KEY]).await;
    assert_eq!(again.header("idempotent-replayed"), None);
    assert_eq!(bed.testbed.calls_of("ok"), 2, "expired: executed again");
}

#[tokio::test]
async fn failures_are_not_recorded() {
    let bed = testbed().await;
    let s = strata(&bed, memory(Duration::from_secs(60))).await;
    let agent = Agent::new(s.listen);
    // write_flaky: 503 first (not recorded: the agent may try again), then success.
    assert_eq!(
        agent
            .call(json!(1), "write_flaky", json!({}), &[KEY])
            .await
            .status,
        503
    );
    assert_eq!(
        agent
            .call(json!(2), "write_flaky", json!({}), &[KEY])
            .await
            .status,
        200
    );
    assert_eq!(bed.testbed.calls_of("write_flaky"), 2);
    let third = agent.call(json!(3), "write_flaky", json!({}), &[KEY]).await;
    assert_eq!(third.header("idempotent-replayed"), Some("true"));
    assert_eq!(bed.testbed.calls_of("write_flaky"), 2);
}

fn redis_config(redis: &Redis, ttl: Duration) -> IdempotencyConfig {
    IdempotencyConfig {
        store: StoreKind::Redis(RedisConfig::single("127.0.0.1", redis.port, 0)),
        ttl,
        ..IdempotencyConfig::default()
    }
}

#[tokio::test]
async fn redis_second_replica_recognises_the_key() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    let bed = testbed().await;
    let one = strata(&bed, redis_config(&redis, Duration::from_secs(60))).await;
    let two = strata(&bed, redis_config(&redis, Duration::from_secs(60))).await;
    repeat_is_replayed(&one, &two, &bed).await;
    let other = Agent::new(two.listen)
        .call(json!(3), "ok", json!({"x": 1}), &[KEY])
        .await;
    assert_eq!(
        other.status, 422,
        "a different request on the other replica"
    );
}

#[tokio::test]
async fn redis_records_expire() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    let bed = testbed().await;
    let s = strata(&bed, redis_config(&redis, Duration::from_millis(200))).await;
    let agent = Agent::new(s.listen);
    agent.call(json!(1), "ok", json!({}), &[KEY]).await;
    tokio::time::sleep(Duration::from_millis(350)).await;
    agent.call(json!(2), "ok", json!({}), &[KEY]).await;
    assert_eq!(bed.testbed.calls_of("ok"), 2);
}
