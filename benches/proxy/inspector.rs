//! The inspector part (`--only inspector`): what the recent-calls inspector costs a call, with
//! nobody looking and with a page open on it.
//!
//! Against the fixed upstream, JSON tools/call, interleaved round by round as every load:
//!
//! - `off`: strata as the other parts run it (no `inspector` section);
//! - `on`: `inspector: { enabled: true }`, nobody reading;
//! - `watched`: the same, with a [`Watcher`] doing what the page does: `GET /calls` once,
//!   then the live stream as the page reads it (`/calls/stream?max_rate=250`, every event read) and `/calls/counts` every 2 s;
//! - `base` (with `--baseline`): the other binary, inspector off;
//! - `direct`, for the added latency.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use crate::measure;
use crate::procs::{self};
use crate::run::Part;

/// How often the page asks for the counts.
const COUNTS_EVERY: Duration = Duration::from_secs(2);
/// The section the `on` and `watched` rows run with.
const ENABLED: &str = "inspector:\n  enabled: true\n";

pub(crate) fn run(part: Part<'_>) -> anyhow::Result<Value> {
    let (rt, plan, scratch, ticks_per_s) = (part.rt, part.plan, part.scratch, part.ticks_per_s);
    let (_up_proc, up) = procs::upstream(false)?;
    let up_url = format!("http://{up}");
    let dir = scratch.path();
    let mut rows = procs::Rows::new("inspector", up_url, dir);
    let base = match &plan.baseline {
        Some(bin) => Some(rows.start("base", bin, "")?),
        None => None,
    };
    let off = rows.start("off", &plan.strata, "")?;
    let on = rows.start("on", &plan.strata, ENABLED)?;
    let watched = rows.start("watched", &plan.strata, ENABLED)?;
    let admin = watched
        .admin
        .context("the watched strata has no admin address")?;
    let watcher = Watcher::start(admin)?;
    let measured = [&off, &on, &watched];
    let loads = measure::part_loads(rt, plan, up, base.as_ref(), &measured, &[], ticks_per_s)?;
    let seen = watcher.stop();
    eprintln!(
        "inspector watcher: {} call events read, {} count polls",
        seen.events, seen.polls
    );
    drop(rows);
    Ok(json!({
        "load": loads,
        "watcher": { "events": seen.events, "polls": seen.polls, "bytes": seen.bytes },
    }))
}

/// What the watcher read.
struct Seen {
    events: u64,
    polls: u64,
    bytes: u64,
}

/// A page's worth of reading, on threads of its own (never the load generator's runtime).
struct Watcher {
    stop: Arc<AtomicBool>,
    events: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
    stream: JoinHandle<()>,
    counts: JoinHandle<u64>,
}

impl Watcher {
    fn start(admin: SocketAddr) -> anyhow::Result<Watcher> {
        get(admin, "/calls").context("GET /calls")?;
        let stop = Arc::new(AtomicBool::new(false));
        let events = Arc::new(AtomicU64::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        let mut conn = TcpStream::connect(admin)?;
        conn.set_read_timeout(Some(Duration::from_millis(200)))?;
        // As the page asks for it (its STREAM_MAX_RATE): strata samples past that rate.
        conn.write_all(b"GET /calls/stream?max_rate=250 HTTP/1.1\r\nHost: strata\r\n\r\n")?;
        let stream = {
            let (stop, events, bytes) = (stop.clone(), events.clone(), bytes.clone());
            std::thread::spawn(move || follow(conn, &stop, &events, &bytes))
        };
        let counts = {
            let stop = stop.clone();
            std::thread::spawn(move || poll_counts(admin, &stop))
        };
        Ok(Watcher {
            stop,
            events,
            bytes,
            stream,
            counts,
        })
    }

    fn stop(self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.stream.join();
        let polls = self.counts.join().unwrap_or(0);
        Seen {
            events: self.events.load(Ordering::Relaxed),
            polls,
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }
}

/// Reads the stream until told to stop, counting `event: call` lines (one per call).
fn follow(mut conn: TcpStream, stop: &AtomicBool, events: &AtomicU64, bytes: &AtomicU64) {
    const EVENT: &[u8] = b"event: call";
    let mut buf = vec![0_u8; 64 * 1024];
    // The tail of the last read, so an event split across reads is still counted.
    let mut carry: Vec<u8> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let n = match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(_) => return,
        };
        bytes.fetch_add(n as u64, Ordering::Relaxed);
        carry.extend_from_slice(&buf[..n]);
        let found = carry.windows(EVENT.len()).filter(|w| *w == EVENT).count();
        events.fetch_add(found as u64, Ordering::Relaxed);
        let keep = carry.len().min(EVENT.len() - 1);
        carry.drain(..carry.len() - keep);
    }
}

/// `GET /calls/counts` every [`COUNTS_EVERY`] until told to stop; how many answered.
fn poll_counts(admin: SocketAddr, stop: &AtomicBool) -> u64 {
    let mut polls = 0;
    let step = Duration::from_millis(100);
    let mut waited = COUNTS_EVERY;
    while !stop.load(Ordering::Relaxed) {
        if waited >= COUNTS_EVERY {
            if get(admin, "/calls/counts").is_ok() {
                polls += 1;
            }
            waited = Duration::ZERO;
        }
        std::thread::sleep(step);
        waited += step;
    }
    polls
}

/// A GET on a connection of its own, read to its end (`Connection: close`).
fn get(admin: SocketAddr, path: &str) -> anyhow::Result<Vec<u8>> {
    let mut conn = TcpStream::connect(admin)?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: strata\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer)?;
    anyhow::ensure!(answer.starts_with(b"HTTP/1.1 200"), "GET {path}: not 200");
    Ok(answer)
}
