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

fn tools(entries: &[Arc<CallEntry>]) -> Vec<&str> {
    entries.iter().filter_map(|e| e.tool()).collect()
}

#[test]
fn the_ring_keeps_the_newest_by_count() {
    let inspector = Inspector::new(&config(3, 1 << 20));
    for tool in ["a", "b", "c", "d", "e"] {
        inspector.finished(&call(tool, Outcome::ToolSuccess));
    }
    let kept = inspector.recent(&Filter::default(), 10);
    assert_eq!(tools(&kept), ["e", "d", "c"]);
    assert_eq!(kept.iter().map(|e| e.seq).collect::<Vec<_>>(), [5, 4, 3]);
    assert_eq!(tools(&inspector.recent(&Filter::default(), 2)), ["e", "d"]);
}

#[test]
fn the_ring_keeps_the_newest_by_bytes() {
    let one = CallEntry::new(&call("a", Outcome::ToolSuccess), 1, SystemTime::now()).bytes();
    // Room for two records and a half.
    let inspector = Inspector::new(&config(100, one * 5 / 2));
    for tool in ["a", "b", "c", "d"] {
        inspector.finished(&call(tool, Outcome::ToolSuccess));
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
        ring.push(Arc::new(CallEntry::new(
            &call("x", Outcome::Success),
            seq,
            now,
        )));
    }
    let order: Vec<u64> = ring.newest_first().map(|e| e.seq).collect();
    assert_eq!(order, [4, 3, 2, 1]);
}

#[test]
fn a_reload_shrinks_and_switching_off_empties() {
    let inspector = Inspector::new(&config(10, 1 << 20));
    for tool in ["a", "b", "c"] {
        inspector.finished(&call(tool, Outcome::ToolError));
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
    inspector.finished(&call("a", Outcome::ToolSuccess));
    inspector.finished(&call("b", Outcome::ToolError));
    inspector.finished(&call("a", Outcome::HttpError));
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
        inspector.finished(&call("a", Outcome::ToolSuccess));
    }
    assert!(matches!(
        reader.try_recv(),
        Err(broadcast::error::TryRecvError::Lagged(1))
    ));
}

#[tokio::test]
async fn calls_in_flight_leave_when_done() {
    let inflight = Arc::new(Inflight::default());
    let started = tokio::time::Instant::now();
    let one = |method: &str, state| InflightCall {
        method: method.into(),
        tool: None,
        jsonrpc_id: "1".into(),
        client: None,
        session: None,
        started,
        state,
    };
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
        .map(|c| (c.method.into(), c.state))
        .collect();
    assert_eq!(now.len(), 2);
    assert!(now.contains(&("b".into(), InflightState::Streaming)));
    assert!(now.contains(&("c".into(), InflightState::Parked)));
    drop(watch);
    drop(parked);
    assert!(inflight.snapshot().is_empty());
}
