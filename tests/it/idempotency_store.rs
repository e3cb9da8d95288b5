//! The Redis idempotency store against a real `redis-server`, one per test on a free port,
//! killed by its PID when the test ends. Without `redis-server` on the PATH the Redis tests
//! print a note and pass, unless `STRATA_REQUIRE_REDIS` is set (CI sets it, so a missing
//! server fails there instead of silently skipping). Real sockets and Redis's own clock:
//! these tests run on real time, with TTLs of a few hundred milliseconds.
#![cfg(test)]

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use strata::config::{IdempotencyConfig, RedisConfig, StoreKind};
use strata::idempotency::{
    Claim, Completion, Fingerprint, Hashing, Key, Record, Store, StoreError, fingerprint,
};
use support::redis::{Redis, free_port, raw};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, sleep};

pub(crate) fn key(k: &str) -> Key {
    Key::new(k.as_bytes(), b"tenant").unwrap()
}

pub(crate) fn record(body: &str) -> Record {
    Record {
        status: 200,
        headers: vec![("content-type".into(), b"application/json".to_vec())],
        body: Bytes::copy_from_slice(body.as_bytes()),
        sse: false,
        ids: vec!["1".into()],
    }
}

pub(crate) async fn kind(store: &Store, k: &str, fp: u128) -> &'static str {
    match store.claim(&key(k), Fingerprint(fp)).await.unwrap() {
        Claim::Fresh(_) => "fresh",
        Claim::InFlight => "in_flight",
        Claim::Mismatch => "mismatch",
        Claim::Done(_) => "done",
    }
}

pub(crate) async fn fresh(store: &Store, k: &str, fp: u128) -> strata::idempotency::Ticket {
    match store.claim(&key(k), Fingerprint(fp)).await.unwrap() {
        Claim::Fresh(t) => t,
        other => panic!("expected Fresh, got {other:?}"),
    }
}

#[tokio::test]
async fn claim_in_flight_mismatch_done() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    let store = redis.store();
    let t = fresh(&store, "k", 1).await;
    assert_eq!(kind(&store, "k", 1).await, "in_flight");
    assert_eq!(kind(&store, "k", 2).await, "mismatch");
    assert_eq!(t.complete(record("{}")).await.unwrap(), Completion::Stored);
    match store.claim(&key("k"), Fingerprint(1)).await.unwrap() {
        Claim::Done(r) => assert_eq!(r, record("{}")),
        other => panic!("{other:?}"),
    }
    assert_eq!(kind(&store, "k", 2).await, "mismatch");
    // The key is where the docs say, with a TTL.
    let mut conn = TcpStream::connect(("127.0.0.1", redis.port)).await.unwrap();
    let name = format!("strata:idem:{}", key("k").as_str());
    let ttl = raw(&mut conn, &[b"PTTL", name.as_bytes()]).await;
    let ttl: i64 = std::str::from_utf8(&ttl[1..ttl.len() - 2])
        .unwrap()
        .parse()
        .unwrap();
    assert!((50_000..=60_000).contains(&ttl), "{ttl}");
}

#[tokio::test]
async fn a_second_replica_recognises_the_key() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    let (a, b) = (redis.store(), redis.store());
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"cents":5}}}"#;
    let first = a.fingerprint("/mcp", body).unwrap();
    // The hash records have always carried, which replicas of earlier builds still read.
    assert_eq!(
        Some(&first),
        fingerprint("/mcp", body, Hashing::Shared).as_ref()
    );
    let t = fresh(&a, "pay-1", first.fingerprint.0).await;
    assert_eq!(kind(&b, "pay-1", first.fingerprint.0).await, "in_flight");
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}"#;
    let mut r = record(answer);
    r.ids = first.ids.clone();
    assert_eq!(t.complete(r).await.unwrap(), Completion::Stored);

    // The repeat lands on replica b, with its own id.
    let again = br#"{"jsonrpc":"2.0","id":"r2","method":"tools/call","params":{"name":"pay","arguments":{"cents":5},"_meta":{"progressToken":"p"}}}"#;
    let repeat = b.fingerprint("/mcp", again).unwrap();
    assert_eq!(repeat.fingerprint, first.fingerprint);
    let Claim::Done(record) = b.claim(&key("pay-1"), repeat.fingerprint).await.unwrap() else {
        panic!("replica b did not find the record");
    };
    assert_eq!(record.status, 200);
    assert_eq!(
        &record.replay_body(&repeat.ids)[..],
        answer.replace(r#""id":1"#, r#""id":"r2""#).as_bytes()
    );
    // Different arguments under the same key, on either replica.
    let other = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"pay","arguments":{"cents":6}}}"#;
    let other = b.fingerprint("/mcp", other).unwrap().fingerprint;
    assert!(matches!(
        b.claim(&key("pay-1"), other).await,
        Ok(Claim::Mismatch)
    ));
    assert!(matches!(
        a.claim(&key("pay-1"), other).await,
        Ok(Claim::Mismatch)
    ));
}

#[tokio::test]
async fn concurrent_claims_across_replicas_have_one_winner() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    let stores = [redis.store(), redis.store()];
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let store = stores[i % 2].clone();
            tokio::spawn(async move { store.claim(&key("k"), Fingerprint(1)).await.unwrap() })
        })
        .collect();
    let mut fresh = 0;
    let mut in_flight = 0;
    for t in tasks {
        match t.await.unwrap() {
            Claim::Fresh(t) => {
                fresh += 1;
                std::mem::forget(t); // keep the marker
            }
            Claim::InFlight => in_flight += 1,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((fresh, in_flight), (1, 19));
}

#[tokio::test]
async fn release_and_dropped_tickets_give_the_key_back() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    let store = redis.store();
    fresh(&store, "k", 1).await.release().await.unwrap();
    let t = fresh(&store, "k", 2).await;
    drop(t); // released by a spawned task
    let deadline = Instant::now() + Duration::from_secs(2);
    while kind(&store, "k", 1).await != "fresh" {
        assert!(
            Instant::now() < deadline,
            "the dropped ticket was not released"
        );
        sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn records_and_markers_expire() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    let store = Store::new(&redis.config(0, Duration::from_millis(300)));
    fresh(&store, "done", 1)
        .await
        .complete(record("{}"))
        .await
        .unwrap();
    let stuck = fresh(&store, "stuck", 1).await;
    assert_eq!(kind(&store, "done", 1).await, "done");
    assert_eq!(kind(&store, "stuck", 1).await, "in_flight");
    sleep(Duration::from_millis(400)).await;
    assert_eq!(kind(&store, "done", 1).await, "fresh");
    // The stuck call's key was taken by a new claim: its late answer is not written over it,
    // and its late release does not delete the new claim.
    let next = fresh(&store, "stuck", 2).await;
    assert_eq!(
        stuck.complete(record("late")).await.unwrap(),
        Completion::Lost
    );
    assert_eq!(kind(&store, "stuck", 2).await, "in_flight");
    assert_eq!(
        next.complete(record("{}")).await.unwrap(),
        Completion::Stored
    );
    assert_eq!(kind(&store, "stuck", 2).await, "done");
}

#[tokio::test]
async fn record_over_its_cap_is_not_kept() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    let mut config = redis.config(0, Duration::from_secs(60));
    config.max_record_bytes = record("0123456789").size() - 1;
    let store = Store::new(&config);
    let t = fresh(&store, "k", 1).await;
    assert_eq!(
        t.complete(record("0123456789")).await.unwrap(),
        Completion::TooLarge
    );
    assert_eq!(kind(&store, "k", 1).await, "fresh");
}

#[tokio::test]
async fn databases_are_separate() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    let db3 = Store::new(&redis.config(3, Duration::from_secs(60)));
    let _t = fresh(&db3, "k", 1).await;
    assert_eq!(kind(&db3, "k", 1).await, "in_flight");
    assert_eq!(kind(&redis.store(), "k", 1).await, "fresh");
}

#[tokio::test]
async fn a_foreign_value_is_an_error_not_an_answer() {
    let Some(redis) = Redis::start().await else {
        return;
    };
    let mut conn = TcpStream::connect(("127.0.0.1", redis.port)).await.unwrap();
    let name = format!("strata:idem:{}", key("k").as_str());
    assert_eq!(
        raw(&mut conn, &[b"SET", name.as_bytes(), b"hello"]).await,
        b"+OK\r\n"
    );
    match redis.store().claim(&key("k"), Fingerprint(1)).await {
        Err(e @ StoreError::Redis { .. }) => {
            assert!(e.to_string().contains("not a strata record"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn survives_a_redis_restart() {
    let Some(mut redis) = Redis::start().await else {
        return;
    };
    let store = redis.store();
    let _t = fresh(&store, "before", 1).await; // leaves a pooled connection
    let port = redis.port;
    drop(redis);
    redis = Redis::start_on(port)
        .await
        .expect("restart on the same port");
    // The pooled connection is dead; the store retries on a new one.
    assert_eq!(kind(&store, "after", 1).await, "fresh");
    drop(redis);
}

#[tokio::test]
async fn unreachable_redis_fails_fast_then_cools_down() {
    let port = free_port(); // nothing listens there
    let config = IdempotencyConfig {
        store: StoreKind::Redis(RedisConfig::single("127.0.0.1", port, 0)),
        ..IdempotencyConfig::default()
    };
    let store = Store::new(&config);
    let err = store.claim(&key("k"), Fingerprint(1)).await.unwrap_err();
    assert!(err.to_string().contains("cannot connect"), "{err}");
    let err = store.claim(&key("k"), Fingerprint(1)).await.unwrap_err();
    assert!(err.to_string().contains("not tried"), "{err}");
}

#[tokio::test]
async fn a_silent_redis_times_out() {
    // Accepts connections and never answers.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let _server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((conn, _)) = listener.accept().await {
            held.push(conn);
        }
    });
    let mut redis = RedisConfig::single("127.0.0.1", port, 0);
    redis.timeout = Duration::from_millis(100);
    let config = IdempotencyConfig {
        store: StoreKind::Redis(redis),
        ..IdempotencyConfig::default()
    };
    let store = Store::new(&config);
    let started = Instant::now();
    let err = store.claim(&key("k"), Fingerprint(1)).await.unwrap_err();
    // The connect's handshake gets no answer either: the operation's timeout ends the wait.
    assert!(err.to_string().contains("within 100ms"), "{err}");
    assert!(started.elapsed() < Duration::from_millis(500));
    let err = store.claim(&key("k"), Fingerprint(1)).await.unwrap_err();
    assert!(err.to_string().contains("not tried"), "{err}");
}
