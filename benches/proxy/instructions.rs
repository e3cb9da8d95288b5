//! Instructions a call costs, counted by Cachegrind (`valgrind --tool=cachegrind`).
//!
//! CPU time per call moves by ±10% from run to run on a shared machine, so a cost of a few
//! percent of a call cannot be told from noise by it. An instruction count hardly moves: it
//! does not depend on the machine's load, only on the work done.
//!
//! Each row is a strata process under Cachegrind; an `idle` one of the first row's binary and
//! config runs beside them, started and ended with them, and gets no call. Every row gets the same number
//! of calls at a given number of agents (one set of processes per agent count), so a row's
//! count less `idle`'s, over its calls, is the user-space instructions of one call. The
//! kernel's part of a call (its syscalls, the same in every row) is not counted: the ratio of
//! whole CPU per call between two rows is nearer 1 than the ratio of these counts.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio::runtime::Runtime;

use crate::Plan;
use crate::load::{self, TOOLS_CALL};
use crate::procs::{Rows, Target};

/// The valgrind command line a row runs under, its output written to `out`: instructions only
/// (no cache or branch simulation, which count nothing more that is asked for here).
fn cachegrind(out: &Path) -> Vec<String> {
    vec![
        "valgrind".into(),
        "--tool=cachegrind".into(),
        "--cache-sim=no".into(),
        "--branch-sim=no".into(),
        format!("--cachegrind-out-file={}", out.display()),
    ]
}

/// Whether `valgrind` runs here.
fn available() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A row: its name, its binary, the YAML lines added to the default config, and whether its
/// calls carry a fresh `Idempotency-Key` each.
pub(crate) struct Row<'a> {
    pub(crate) name: &'static str,
    pub(crate) bin: &'a Path,
    pub(crate) extra: &'a str,
    pub(crate) keyed: bool,
}

/// Each row's instructions per call at 1 and 64 agents for the `part`, counted where valgrind
/// is installed (`null` where it is not, and a line saying so): 5,000 calls a row, 200 with
/// `--quick`.
pub(crate) fn count(
    rt: &Runtime,
    plan: &Plan,
    part: &'static str,
    upstream: &str,
    dir: &Path,
    rows: &[Row],
) -> anyhow::Result<Value> {
    if !available() {
        eprintln!("{part}: valgrind not found; instructions per call not counted");
        return Ok(json!(null));
    }
    let counting = Counting {
        part,
        upstream,
        dir,
        out: &plan.out,
        calls: if plan.quick { 200 } else { 5_000 },
    };
    counting
        .per_call(rt, rows, &[1, 64])
        .context("instruction counts")
}

/// What the counted processes share: the part they belong to, their upstream, the scratch
/// directory for their configs, where their counts are kept (the report's directory: the files
/// stay for `cg_annotate` and `cg_diff`, which say where two rows' instructions differ), and
/// how many calls each row is given.
struct Counting<'a> {
    part: &'static str,
    upstream: &'a str,
    dir: &'a Path,
    out: &'a Path,
    calls: u64,
}

impl Counting<'_> {
    /// Instructions per call of each row, at each of `agents`.
    fn per_call(&self, rt: &Runtime, rows: &[Row], agents: &[usize]) -> anyhow::Result<Value> {
        let mut out = Map::new();
        for &n in agents {
            let counts = self
                .counted(rt, rows, n)
                .with_context(|| format!("instruction counts at {n} agents"))?;
            out.insert(format!("c={n}"), counts);
        }
        Ok(json!({ "calls": self.calls, "agents": out }))
    }

    /// One set of processes, `idle` and `rows`, each row given the calls by `agents` agents.
    fn counted(&self, rt: &Runtime, rows: &[Row], agents: usize) -> anyhow::Result<Value> {
        let file = |name: &str| {
            let part = self.part;
            self.out
                .join(format!("cachegrind-{part}-c{agents}-{name}.out"))
        };
        std::fs::create_dir_all(self.out)?;
        let Some(first) = rows.first() else {
            bail!("no row to count");
        };
        let mut procs = Rows::new(self.part, self.upstream.to_owned(), self.dir);
        procs.start_under(&cachegrind(&file("idle")), "idle", first.bin, first.extra)?;
        let mut targets = Vec::with_capacity(rows.len());
        for row in rows {
            let under = cachegrind(&file(row.name));
            targets.push(procs.start_under(&under, row.name, row.bin, row.extra)?);
        }
        for (t, row) in targets.iter().zip(rows) {
            drive(rt, t, agents, self.calls, row.keyed)?;
        }
        // Ended by SIGTERM: each drains and exits, and Cachegrind writes its count on exit.
        drop(procs);
        let idle = total(&file("idle"))?;
        let mut out = Map::new();
        for row in rows {
            let n = total(&file(row.name))?;
            let per_call = n.saturating_sub(idle) as f64 / self.calls as f64;
            out.insert(
                row.name.into(),
                json!({ "instructions": n, "per_call": per_call }),
            );
        }
        out.insert("idle".into(), json!({ "instructions": idle }));
        Ok(Value::Object(out))
    }
}

/// `calls` JSON tools/calls through `t` by `agents` agents, each with a key of its own when
/// `keyed`; every one must succeed.
fn drive(rt: &Runtime, t: &Target, agents: usize, calls: u64, keyed: bool) -> anyhow::Result<()> {
    // Under Cachegrind a call takes some fifty times as long; the bound is the call count.
    const LIMIT: Duration = Duration::from_secs(600);
    let body = Bytes::from_static(TOOLS_CALL);
    let round = rt.block_on(load::round(t, "/json", &body, agents, LIMIT, calls, keyed))?;
    let done = round.hist.count();
    if round.errors > 0 || done != calls {
        bail!(
            "{}: {done} of {calls} calls done, {} errors",
            t.name,
            round.errors
        );
    }
    Ok(())
}

/// The total instruction count (`summary: N`) of a Cachegrind output file.
fn total(path: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{} (did valgrind exit cleanly?)", path.display()))?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("summary:"))
        .with_context(|| format!("{}: no summary line", path.display()))?;
    line.split_whitespace()
        .next()
        .context("an empty summary line")?
        .parse()
        .with_context(|| format!("{}: summary {line:?}", path.display()))
}
