//! The whole-proxy benchmark: strata side by side with a direct connection and with nginx, in
//! one run, interleaved round by round, on loopback. `bash bench/proxy.sh` builds strata,
//! runs this, and prints the table; `bench/README.md` explains every figure.
//!
//! Roles of this one binary:
//! - `proxy --bench [options]` (what `cargo bench --bench proxy` runs): the harness. It starts
//!   the upstreams and proxies as child processes, drives them, prints the table and writes
//!   it as JSON (comparing with the last run's JSON when there is one);
//! - `proxy --role upstream`: the fast fixed-response upstream, started by the harness;
//! - `proxy --bench --train [options]`: the same loads through strata alone (no direct
//!   connection, no nginx, no table), to train a profile-instrumented build (`bench/pgo.sh`);
//!   one of the processes trained exports every call's spans to the harness's OTLP sink.
//!
//! Without `--bench` (as `cargo test --all-targets` runs bench targets) it does nothing.

mod hist;
mod inspector;
mod instructions;
mod keys;
mod limits;
mod load;
mod measure;
mod paired;
mod paths;
mod procs;
mod report;
mod report_paths;
mod report_wrk;
mod run;
mod sink;
mod targets;
mod targets_paths;
mod telemetry;
mod tls;
mod upstream;
mod wire;
mod wrk;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// What to run, and how long.
pub(crate) struct Plan {
    pub(crate) quick: bool,
    /// Interleaved rounds per scenario and target.
    pub(crate) rounds: usize,
    pub(crate) round: Duration,
    pub(crate) warmup: Duration,
    /// Calls started per round at most (the time bound usually ends a round first).
    pub(crate) max_calls: u64,
    pub(crate) agents: Vec<usize>,
    /// SSE delivery: events per stream (100 ms apart); one stream per round and target.
    pub(crate) tick_events: u64,
    pub(crate) big_bytes: u64,
    pub(crate) big_rounds: usize,
    pub(crate) streams: usize,
    /// The telemetry part's memory runs: calls through each process (collector down, export
    /// off).
    pub(crate) telemetry_calls: u64,
    /// Parts to run: load, testbed, sse, big, streams, telemetry, inspector, limits, keys, paths
    /// (all by default).
    pub(crate) only: Vec<String>,
    /// The paths part's paths to run, by name (all by default).
    pub(crate) paths: Vec<String>,
    pub(crate) strata: PathBuf,
    pub(crate) nginx: PathBuf,
    /// The paths part's layer-4 floor (`haproxy`, Debian's; its rows are left out when absent).
    pub(crate) haproxy: PathBuf,
    /// The wrk part's outside load generator (`wrk`, Debian's).
    pub(crate) wrk: PathBuf,
    /// The keys part's Redis (`redis-server`, started by the harness on a free port).
    pub(crate) redis: PathBuf,
    pub(crate) out: PathBuf,
    /// Where criterion left the classifier benchmark's results, to include them.
    pub(crate) scan: Option<PathBuf>,
    /// Another strata binary (an earlier build) run beside the current one as target `base`,
    /// for before/after figures from one interleaved run.
    pub(crate) baseline: Option<PathBuf>,
    /// Drive strata alone, to train a profile-instrumented build: nothing compared, nothing
    /// reported (`bench/pgo.sh`).
    pub(crate) train: bool,
    /// How the strata binary was built, for the report (`pgo` or `plain`; `bench/proxy.sh`).
    pub(crate) build: String,
}

impl Plan {
    fn parse(args: &[String]) -> anyhow::Result<Plan> {
        let quick = args.iter().any(|a| a == "--quick");
        let mut plan = Plan {
            quick,
            rounds: if quick { 1 } else { 5 },
            round: Duration::from_millis(if quick { 300 } else { 1500 }),
            warmup: Duration::from_millis(if quick { 100 } else { 500 }),
            max_calls: 2_000_000,
            agents: vec![1, 16, 64],
            tick_events: if quick { 5 } else { 10 },
            big_bytes: if quick { 20 << 20 } else { 200 << 20 },
            big_rounds: if quick { 1 } else { 3 },
            streams: if quick { 500 } else { 5000 },
            telemetry_calls: if quick { 10_000 } else { 100_000 },
            only: Vec::new(),
            paths: Vec::new(),
            strata: PathBuf::from("target/release/strata"),
            nginx: PathBuf::from("/usr/sbin/nginx"),
            haproxy: PathBuf::from("/usr/sbin/haproxy"),
            redis: PathBuf::from("redis-server"),
            wrk: PathBuf::from("/usr/bin/wrk"),
            out: PathBuf::from("target/bench"),
            scan: None,
            baseline: None,
            train: args.iter().any(|a| a == "--train"),
            build: "plain".into(),
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let mut value = || {
                it.next()
                    .cloned()
                    .ok_or_else(|| anyhow::anyhow!("{arg} needs a value"))
            };
            match arg.as_str() {
                "--rounds" => plan.rounds = value()?.parse()?,
                "--secs" => plan.round = Duration::from_secs_f64(value()?.parse()?),
                "--agents" => {
                    plan.agents = value()?
                        .split(',')
                        .map(str::parse)
                        .collect::<Result<_, _>>()?
                }
                "--streams" => plan.streams = value()?.parse()?,
                "--telemetry-calls" => plan.telemetry_calls = value()?.parse()?,
                "--big-mib" => plan.big_bytes = value()?.parse::<u64>()? << 20,
                "--only" => plan.only = value()?.split(',').map(str::to_owned).collect(),
                "--paths" => plan.paths = value()?.split(',').map(str::to_owned).collect(),
                "--strata" => plan.strata = value()?.into(),
                "--nginx" => plan.nginx = value()?.into(),
                "--haproxy" => plan.haproxy = value()?.into(),
                "--redis-server" => plan.redis = value()?.into(),
                "--wrk" => plan.wrk = value()?.into(),
                "--out" => plan.out = value()?.into(),
                "--scan" => plan.scan = Some(value()?.into()),
                "--baseline" => plan.baseline = Some(value()?.into()),
                "--build" => plan.build = value()?,
                "--quick" | "--bench" | "--train" => {}
                other => anyhow::bail!("unknown argument {other}"),
            }
        }
        Ok(plan)
    }

    pub(crate) fn runs(&self, part: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|p| p == part)
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args
        .windows(2)
        .any(|w| w[0] == "--role" && w[1] == "upstream")
    {
        return exit("upstream", upstream::run(args.iter().any(|a| a == "--tls")));
    }
    if let Some(w) = args.windows(2).find(|w| w[0] == "--report") {
        return exit("proxy bench", report::reprint(std::path::Path::new(&w[1])));
    }
    if !args.iter().any(|a| a == "--bench") {
        println!("proxy bench: skipped outside `cargo bench` (run `bash bench/proxy.sh`)");
        return ExitCode::SUCCESS;
    }
    exit(
        "proxy bench",
        Plan::parse(&args).and_then(|plan| run::run(&plan)),
    )
}

/// The process's exit: success, or the error's chain printed after `who`.
fn exit(who: &str, result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{who}: {err:#}");
            ExitCode::FAILURE
        }
    }
}
