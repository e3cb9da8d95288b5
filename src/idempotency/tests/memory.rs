use std::time::Duration;

use bytes::Bytes;

use super::super::*;
use super::config;

fn key(k: &str) -> Key {
    Key::new(k.as_bytes(), b"").unwrap()
}

fn record(body: &str) -> Record {
    Record {
        status: 200,
        headers: vec![("content-type".into(), b"application/json".to_vec())],
        body: Bytes::copy_from_slice(body.as_bytes()),
        sse: false,
        ids: vec!["1".into()],
    }
}

async fn fresh(store: &Store, k: &str, fp: u128) -> Ticket {
    match store.claim(&key(k), Fingerprint(fp)).await.unwrap() {
        Claim::Fresh(t) => t,
        other => panic!("expected Fresh, got {other:?}"),
    }
}

async fn claim(store: &Store, k: &str, fp: u128) -> &'static str {
    match store.claim(&key(k), Fingerprint(fp)).await.unwrap() {
        Claim::Fresh(_) => "fresh",
        Claim::InFlight => "in_flight",
        Claim::Mismatch => "mismatch",
        Claim::Done(_) => "done",
    }
}

#[tokio::test(start_paused = true)]
async fn claim_in_flight_mismatch_done() {
    let store = Store::new(&config(60, 100, 1 << 20, 1 << 16));
    let t = fresh(&store, "k", 1).await;
    assert_eq!(claim(&store, "k", 1).await, "in_flight");
    assert_eq!(claim(&store, "k", 2).await, "mismatch");
    assert_eq!(t.complete(record("{}")).await.unwrap(), Completion::Stored);
    match store.claim(&key("k"), Fingerprint(1)).await.unwrap() {
        Claim::Done(r) => assert_eq!(r, record("{}")),
        other => panic!("{other:?}"),
    }
    assert_eq!(claim(&store, "k", 2).await, "mismatch");
    // Other keys are independent.
    assert_eq!(claim(&store, "other", 2).await, "fresh");
}

/// The memory store's fingerprints never leave the process: they are taken with the faster
/// hash, and a repeat of the request is still recognised by them.
#[tokio::test(start_paused = true)]
async fn fingerprints_in_process_and_replays_by_them() {
    let store = Store::new(&config(60, 100, 1 << 20, 1 << 16));
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#;
    let first = store.fingerprint("/mcp", body).unwrap();
    assert_eq!(
        Some(&first),
        fingerprint("/mcp", body, Hashing::InProcess).as_ref()
    );
    assert_ne!(
        Some(&first),
        fingerprint("/mcp", body, Hashing::Shared).as_ref()
    );
    let t = fresh(&store, "k", first.fingerprint.0).await;
    assert_eq!(t.complete(record("{}")).await.unwrap(), Completion::Stored);
    let again = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t"}}"#;
    let repeat = store.fingerprint("/mcp", again).unwrap();
    assert_eq!(claim(&store, "k", repeat.fingerprint.0).await, "done");
    let other = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"u"}}"#;
    let other = store.fingerprint("/mcp", other).unwrap();
    assert_eq!(claim(&store, "k", other.fingerprint.0).await, "mismatch");
}

#[tokio::test(start_paused = true)]
async fn concurrent_claims_have_one_winner() {
    let store = Store::new(&config(60, 100, 1 << 20, 1 << 16));
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.claim(&key("k"), Fingerprint(1)).await.unwrap() })
        })
        .collect();
    let mut claims = Vec::new();
    for t in tasks {
        claims.push(t.await.unwrap());
    }
    let fresh = claims
        .iter()
        .filter(|c| matches!(c, Claim::Fresh(_)))
        .count();
    let in_flight = claims
        .iter()
        .filter(|c| matches!(c, Claim::InFlight))
        .count();
    assert_eq!((fresh, in_flight), (1, 15));
}

#[tokio::test(start_paused = true)]
async fn release_and_drop_give_the_key_back() {
    let store = Store::new(&config(60, 100, 1 << 20, 1 << 16));
    fresh(&store, "k", 1).await.release().await.unwrap();
    let t = fresh(&store, "k", 2).await;
    drop(t);
    let t = fresh(&store, "k", 1).await;
    assert_eq!(store.usage().unwrap().in_flight, 1);
    t.release().await.unwrap();
    assert_eq!(store.usage().unwrap(), Usage::default());
}

#[tokio::test(start_paused = true)]
async fn records_and_markers_expire() {
    let store = Store::new(&config(10, 100, 1 << 20, 1 << 16));
    fresh(&store, "done", 1)
        .await
        .complete(record("{}"))
        .await
        .unwrap();
    let stuck = fresh(&store, "stuck", 1).await;
    tokio::time::advance(Duration::from_secs(9)).await;
    assert_eq!(claim(&store, "done", 1).await, "done");
    assert_eq!(claim(&store, "stuck", 1).await, "in_flight");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(store.usage().unwrap(), Usage::default());
    // The stuck call's key was taken by a new claim: its late answer is not written over it.
    let next = fresh(&store, "stuck", 2).await;
    assert_eq!(
        stuck.complete(record("late")).await.unwrap(),
        Completion::Lost
    );
    assert_eq!(claim(&store, "stuck", 2).await, "in_flight");
    next.release().await.unwrap();
    assert_eq!(claim(&store, "done", 1).await, "fresh");
}

#[tokio::test(start_paused = true)]
async fn entries_bound_evicts_oldest_records_never_markers() {
    let store = Store::new(&config(60, 3, 1 << 20, 1 << 16));
    for k in ["a", "b", "c"] {
        fresh(&store, k, 1).await.complete(record(k)).await.unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    let _d = fresh(&store, "d", 1).await; // evicts "a"
    let _e = fresh(&store, "e", 1).await; // evicts "b"
    let _f = fresh(&store, "f", 1).await; // evicts "c"
    let usage = store.usage().unwrap();
    assert_eq!((usage.in_flight, usage.records, usage.bytes), (3, 0, 0));
    // Only markers left: no room, and none of them is dropped.
    match store.claim(&key("g"), Fingerprint(1)).await {
        Err(StoreError::Full { entries: 3 }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(claim(&store, "d", 1).await, "in_flight");
}

#[tokio::test(start_paused = true)]
async fn bytes_bound_evicts_oldest_records() {
    let size = record("0123456789").size();
    let store = Store::new(&config(60, 100, size * 5 / 2, 1 << 16));
    for k in ["a", "b", "c"] {
        let t = fresh(&store, k, 1).await;
        assert_eq!(
            t.complete(record("0123456789")).await.unwrap(),
            Completion::Stored
        );
    }
    let usage = store.usage().unwrap();
    assert_eq!((usage.records, usage.bytes), (2, 2 * size));
    assert_eq!(claim(&store, "a", 1).await, "fresh");
    assert_eq!(claim(&store, "b", 1).await, "done");
    assert_eq!(claim(&store, "c", 1).await, "done");
}

#[tokio::test(start_paused = true)]
async fn record_over_its_cap_is_not_kept() {
    let size = record("0123456789").size();
    let store = Store::new(&config(60, 100, 1 << 20, size - 1));
    assert_eq!(store.record_cap(), size - 1);
    let t = fresh(&store, "k", 1).await;
    assert_eq!(
        t.complete(record("0123456789")).await.unwrap(),
        Completion::TooLarge
    );
    assert_eq!(claim(&store, "k", 1).await, "fresh");
    // And one that fits the record cap but not the store.
    let store = Store::new(&config(60, 100, size - 1, 1 << 20));
    let t = fresh(&store, "k", 1).await;
    assert_eq!(
        t.complete(record("0123456789")).await.unwrap(),
        Completion::TooLarge
    );
    assert_eq!(store.usage().unwrap(), Usage::default());
}
