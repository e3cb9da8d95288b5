//! The keys part (`--only keys`): what an `Idempotency-Key` costs a call, on the memory store
//! and on the Redis store, and (with `--baseline`) each store against the baseline build's.
//!
//! Against the fixed upstream, JSON tools/call, interleaved round by round as every load. Every
//! keyed call carries a key of its own ([`load::fresh_key`]), so each one is claimed, forwarded
//! and completed (none is a replay):
//!
//! - `none`: strata as the other parts run it, calls without a key;
//! - `memory`: the same config (the memory store, the default), every call keyed;
//! - `redis`: `idempotency.store: redis://USER:PASSWORD@127.0.0.1:PORT/0`, every call keyed;
//! - with `--baseline`, the other binary beside them, every call keyed: `base-memory` on its
//!   memory store, and `base-redis` on the same Redis and database as `redis`. A build before
//!   the current client accepts no credentials in the URL, so `base-redis` goes as Redis's
//!   `default` user, which has no password ([`procs::redis`]); a password is sent once per
//!   connection and costs a call nothing;
//! - `direct`, for the added latency.
//!
//! The harness starts its own `redis-server` on a free loopback port and ends it by its PID.
//! That the keys were stored is checked, not assumed: after the load, a key sent twice through
//! each keyed process must be replayed the second time (`idempotent-replayed: true`), no
//! process may have counted a store error, and Redis must hold at least a key per keyed call
//! measured through it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{Map, Value, json};
use tokio::runtime::Runtime;

use crate::Plan;
use crate::instructions::{self, Row};
use crate::load::{self, IDEMPOTENCY_KEY, TOOLS_CALL};
use crate::measure;
use crate::procs::{self, Target};
use crate::run::Part;
use crate::telemetry::metric_sum;

/// The targets whose calls carry a key.
const KEYED: &[&str] = &["base-memory", "base-redis", "memory", "redis"];
/// The targets whose keys are stored in the harness's Redis.
const IN_REDIS: [&str; 2] = ["base-redis", "redis"];
/// The Redis ACL user the current build's store logs in as.
const REDIS_USER: &str = "strata";

pub(crate) fn run(part: Part<'_>) -> anyhow::Result<Value> {
    let (rt, plan, scratch, ticks_per_s) = (part.rt, part.plan, part.scratch, part.ticks_per_s);
    let dir = scratch.path();
    let password = format!(
        "bench{:x}{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    );
    let redis_dir = dir.join("redis");
    std::fs::create_dir_all(&redis_dir)?;
    let (redis_proc, redis) = procs::redis(&plan.redis, &redis_dir, REDIS_USER, &password)
        .context("redis-server (apt-get install redis-server, or --redis-server PATH)")?;
    let (up_proc, up) = procs::upstream(false)?;
    let up_url = format!("http://{up}");
    let mut rows = procs::Rows::new("keys", up_url.clone(), dir);
    let port = redis.port();
    let mut base = Vec::new();
    if let Some(bin) = &plan.baseline {
        base.push(rows.start("base-memory", bin, "")?);
        base.push(rows.start(
            "base-redis",
            bin,
            &format!("idempotency: {{ store: \"redis://127.0.0.1:{port}/0\" }}\n"),
        )?);
    }
    let none = rows.start("none", &plan.strata, "")?;
    let memory = rows.start("memory", &plan.strata, "")?;
    let with_redis = rows.start(
        "redis",
        &plan.strata,
        &format!(
            "idempotency: {{ store: \"redis://{REDIS_USER}:{password}@127.0.0.1:{port}/0\" }}\n"
        ),
    )?;
    // The baseline's rows go in as rows of their own (`part_loads` takes one `base`).
    let measured: Vec<&Target> = base.iter().chain([&none, &memory, &with_redis]).collect();
    let loads = measure::part_loads(rt, plan, up, None, &measured, KEYED, ticks_per_s)?;
    // Keyed calls measured through Redis (the warm-ups' are stored too, and not counted here).
    let through_redis: u64 = loads
        .values()
        .flat_map(|s| {
            IN_REDIS
                .into_iter()
                .filter_map(move |t| s.pointer(&format!("/targets/{t}/calls"))?.as_u64())
        })
        .sum();
    let mut checked = Map::new();
    for t in base.iter().chain([&memory, &with_redis]) {
        let replayed = replays(rt, t).with_context(|| format!("{}: a key sent twice", t.name))?;
        let text = rt
            .block_on(load::get(t.admin.context("no admin address")?, "/metrics"))
            .with_context(|| format!("{}: admin /metrics", t.name))?;
        checked.insert(
            t.name.into(),
            json!({
                "replayed": replayed,
                "store_errors": metric_sum(&text, "strata_idempotent_replays_total", "result=\"store_error\""),
            }),
        );
    }
    let redis_keys = redis_dbsize(redis, &password).context("Redis DBSIZE")?;
    drop(rows);
    let counted = instructions::count(rt, plan, "keys", &up_url, dir, &counted_rows(plan))?;
    eprintln!(
        "keys: Redis holds {redis_keys} keys for {through_redis} keyed calls measured through it; {checked:?}"
    );
    drop(up_proc);
    drop(redis_proc);
    Ok(json!({
        "redis": {
            "version": redis_version(&plan.redis),
            "keys": redis_keys,
            "keyed_calls_measured": through_redis,
        },
        "checked": checked,
        "load": loads,
        "instructions": counted,
    }))
}

/// The rows whose instructions per call are counted, on the memory store: `none` (no key),
/// `memory` (a fresh key per call), and `base` (the baseline build, keyed) with `--baseline` —
/// what a key costs and what a change to the keyed path saves, below what CPU time per call
/// resolves.
fn counted_rows(plan: &Plan) -> Vec<Row<'_>> {
    let row = |name, bin, keyed| Row {
        name,
        bin,
        extra: "",
        keyed,
    };
    let mut rows = vec![
        row("none", &plan.strata, false),
        row("memory", &plan.strata, true),
    ];
    if let Some(base) = &plan.baseline {
        rows.push(row("base", base, true));
    }
    rows
}

/// One fresh key sent twice through `t`: whether the second answer was the first's, replayed
/// from the store (marked `idempotent-replayed`; the paths part's nginx marks a cache hit so).
pub(crate) fn replays(rt: &Runtime, t: &Target) -> anyhow::Result<bool> {
    rt.block_on(async {
        let mut conn = load::connect(t.addr).await?;
        let key = load::fresh_key();
        let mut replayed = Vec::new();
        for _ in 0..2 {
            let mut req = load::request(t.addr, "/json", &Bytes::from_static(TOOLS_CALL));
            req.headers_mut().insert(IDEMPOTENCY_KEY, key.clone());
            conn.ready().await?;
            let resp =
                tokio::time::timeout(Duration::from_secs(10), conn.send_request(req)).await??;
            anyhow::ensure!(resp.status().is_success(), "status {}", resp.status());
            replayed.push(resp.headers().get("idempotent-replayed").is_some());
            // The record is completed once the body has been sent: read it all first.
            resp.into_body().collect().await?;
        }
        Ok(replayed == [false, true])
    })
}

/// `DBSIZE` of the harness's Redis, as its ACL user.
fn redis_dbsize(addr: SocketAddr, password: &str) -> anyhow::Result<u64> {
    let mut conn = TcpStream::connect(addr)?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let arg = |a: &str| format!("${}\r\n{a}\r\n", a.len());
    write!(
        conn,
        "*3\r\n{}{}{}*1\r\n{}",
        arg("AUTH"),
        arg(REDIS_USER),
        arg(password),
        arg("DBSIZE")
    )?;
    let mut answer = Vec::new();
    let mut buf = [0_u8; 256];
    // Two replies: `+OK` and `:N`, each ending in CRLF.
    while answer.windows(2).filter(|w| w == b"\r\n").count() < 2 {
        let n = conn.read(&mut buf)?;
        anyhow::ensure!(n > 0, "Redis closed the connection");
        answer.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&answer);
    let mut lines = text.lines();
    anyhow::ensure!(lines.next() == Some("+OK"), "AUTH: {text}");
    lines
        .next()
        .and_then(|l| l.strip_prefix(':')?.parse().ok())
        .with_context(|| format!("DBSIZE: {text}"))
}

/// `redis-server --version`'s `v=` field.
fn redis_version(bin: &std::path::Path) -> String {
    std::process::Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            let v = text.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
            Some(v.to_owned())
        })
        .unwrap_or_default()
}
