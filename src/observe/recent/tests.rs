use std::time::Duration;

use super::*;
use crate::classify::Outcome;

fn config(recent: usize, max_bytes: usize) -> InspectorConfig {
    InspectorConfig {
        enabled: true,
        recent,
        max_bytes,
        ..InspectorConfig::default()
    }
}

fn call(tool: &str, outcome: Outcome) -> CallRecord<'static> {
    let mut record = CallRecord::new("http://u", "tools/call", "1", outcome, Duration::ZERO);
    record.tool = Some(tool.to_owned().into());
    record
}

/// `record` finished, as the tracker hands it over.
fn finish(inspector: &Inspector, record: CallRecord<'_>) {
    inspector.finished(&record, record.fields_text());
}

fn entry(record: CallRecord<'_>, seq: u64, time: SystemTime) -> CallEntry {
    CallEntry::new(&record, record.fields_text(), seq, time)
}

fn tools(entries: &[Arc<CallEntry>]) -> Vec<&str> {
    entries.iter().filter_map(|e| e.tool()).collect()
}

#[test]
fn the_ring_keeps_the_newest_by_count() {
    let inspector = Inspector::new(&config(3, 1 << 20));
    for tool in ["a", "b", "c", "d", "e"] {
        finish(&inspector, call(tool, Outcome::ToolSuccess));
    }
    let kept = inspector.recent(&Filter::default(), 10);
    assert_eq!(tools(&kept), ["e", "d", "c"]);
    assert_eq!(kept.iter().map(|e| e.seq).collect::<Vec<_>>(), [5, 4, 3]);
    assert_eq!(tools(&inspector.recent(&Filter::default(), 2)), ["e", "d"]);
}

#[test]
fn the_ring_keeps_the_newest_by_bytes() {
    let one = entry(call("a", Outcome::ToolSuccess), 1, SystemTime::now()).bytes();
    // Room for two records and a half.
    let inspector = Inspector::new(&config(100, one * 5 / 2));
    for tool in ["a", "b", "c", "d"] {
        finish(&inspector, call(tool, Outcome::ToolSuccess));
    }
    assert_eq!(
        tools(&inspector.recent(&Filter::default(), 100)),
        ["d", "c"]
    );
    let ring = inspector.lock();
    assert_eq!(ring.bytes(), one * 2);
}

#[test]
fn records_out_of_order_are_kept_in_order() {
    let mut ring = Ring::new(10, 1 << 20);
    let now = SystemTime::now();
    for seq in [1, 3, 2, 4] {
        ring.push(Arc::new(entry(call("x", Outcome::Success), seq, now)));
    }
    let order: Vec<u64> = ring.newest_first().map(|e| e.seq).collect();
    assert_eq!(order, [4, 3, 2, 1]);
}

#[test]
fn a_reload_shrinks_and_switching_off_empties() {
    let inspector = Inspector::new(&config(10, 1 << 20));
    for tool in ["a", "b", "c"] {
        finish(&inspector, call(tool, Outcome::ToolError));
    }
    inspector.configure(&config(1, 1 << 20));
    assert_eq!(tools(&inspector.recent(&Filter::default(), 10)), ["c"]);
    assert_eq!(inspector.capacity(), 1);
    inspector.configure(&InspectorConfig::default());
    assert!(!inspector.enabled());
    assert!(inspector.recent(&Filter::default(), 10).is_empty());
}

#[test]
fn filters_select() {
    let inspector = Inspector::new(&config(10, 1 << 20));
    finish(&inspector, call("a", Outcome::ToolSuccess));
    finish(&inspector, call("b", Outcome::ToolError));
    finish(&inspector, call("a", Outcome::HttpError));
    let list = |query: &str| {
        let filter = Filter::from_query(Some(query)).unwrap();
        tools(&inspector.recent(&filter, 10))
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(list("tool=a"), ["a", "a"]);
    assert_eq!(list("outcome=TOOL_ERROR"), ["b"]);
    assert_eq!(list("layer=transport"), ["a"]);
    assert_eq!(list("since=1"), ["a", "b"]);
    assert_eq!(list("since=1h").len(), 3);
    assert_eq!(list("method=ping").len(), 0);
}

#[test]
fn a_reader_that_falls_behind_learns_it() {
    let inspector = Inspector::new(&config(10, 1 << 20));
    let mut reader = inspector.subscribe();
    for _ in 0..FEED_BACKLOG + 1 {
        finish(&inspector, call("a", Outcome::ToolSuccess));
    }
    assert!(matches!(
        reader.try_recv(),
        Err(broadcast::error::TryRecvError::Lagged(1))
    ));
}

/// A call to `method` in flight.
fn in_flight(method: &str, started: tokio::time::Instant, state: InflightState) -> InflightCall {
    let body = format!(r#"{{"jsonrpc":"2.0","id":"x{method}","method":"{method}"}}"#);
    let mut inspector = crate::classify::request::RequestInspector::new();
    inspector.feed(body.as_bytes(), 1 << 16);
    let request = inspector.finish().requests.remove(0);
    InflightCall::of(&request, None, None, started, state)
}

#[tokio::test]
async fn calls_in_flight_leave_when_done() {
    let inflight = Arc::new(Inflight::default());
    let started = tokio::time::Instant::now();
    let one = |method: &str, state| in_flight(method, started, state);
    let mut watch = inflight.watch([
        one("a", InflightState::Waiting),
        one("b", InflightState::Waiting),
    ]);
    let parked = inflight.watch([one("c", InflightState::Parked)]);
    watch.set_state(InflightState::Streaming);
    watch.done(0);
    let now: Vec<(String, InflightState)> = inflight
        .snapshot()
        .into_iter()
        .map(|c| (c.method().into(), c.state))
        .collect();
    assert_eq!(now.len(), 2);
    assert!(now.contains(&("b".into(), InflightState::Streaming)));
    assert!(now.contains(&("c".into(), InflightState::Parked)));
    drop(watch);
    drop(parked);
    assert!(inflight.snapshot().is_empty());
}

/// Calls registered on several threads (each in its own shard) are all seen, and each leaves
/// its shard when its watch drops on another thread.
#[tokio::test]
async fn calls_in_flight_on_every_thread_are_seen() {
    let inflight = Arc::new(Inflight::default());
    let started = tokio::time::Instant::now();
    let watches: Vec<Watch> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let inflight = &inflight;
                scope.spawn(move || {
                    let call = in_flight(&format!("m{i}"), started, InflightState::Waiting);
                    inflight.watch([call])
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut methods: Vec<String> = inflight
        .snapshot()
        .iter()
        .map(|c| c.method().into())
        .collect();
    methods.sort();
    assert_eq!(methods, ["m0", "m1", "m2", "m3"]);
    drop(watches);
    assert!(inflight.snapshot().is_empty());
}
