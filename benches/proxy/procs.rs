//! The processes under test, each started as a child of the harness and ended by its own PID
//! (SIGTERM, then SIGKILL after a few seconds): the fixed upstream (this binary again, with
//! `--role upstream`), strata (the release binary with a generated YAML file), nginx (a
//! generated config, `-p TMP -c CONF -g 'daemon off;'`) and the testbed (`strata testbed`).
//! Also what /proc says about them: CPU time and resident memory.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

/// How long a started process may take to accept connections.
const START_LIMIT: Duration = Duration::from_secs(15);
/// How long a process may take to exit after SIGTERM before it is killed.
const STOP_LIMIT: Duration = Duration::from_secs(5);

/// A child process, ended when dropped.
pub(crate) struct Proc {
    name: String,
    child: Child,
    _stdout: Option<ChildStdout>,
}

/// Something the load generator can be pointed at: an address, and the processes to meter
/// (none for the direct connection).
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) name: &'static str,
    pub(crate) addr: SocketAddr,
    pub(crate) pids: Vec<u32>,
    /// strata's admin listener (`GET /metrics`); `None` for nginx and the direct connection.
    pub(crate) admin: Option<SocketAddr>,
}

impl Proc {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = std::time::SystemTime::now() + STOP_LIMIT;
        while std::time::SystemTime::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "{} (pid {}) ignored SIGTERM; killing it",
            self.name,
            self.child.id()
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A private scratch directory for generated configs and logs, removed when dropped.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new() -> anyhow::Result<Scratch> {
        Scratch::under(&std::env::temp_dir(), "")
    }

    /// A scratch directory on tmpfs (`/dev/shm`) where the machine has one, the temp directory
    /// otherwise: for files a proxy writes on every call, whose cost is then the proxy's own
    /// work and not the disk's.
    pub(crate) fn in_memory(tag: &str) -> anyhow::Result<Scratch> {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        Scratch::under(&base, &format!("-{tag}"))
    }

    fn under(base: &Path, suffix: &str) -> anyhow::Result<Scratch> {
        let dir = base.join(format!("strata-bench-{}{suffix}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loopback port nothing listens on right now.
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn wait_listening(addr: SocketAddr, proc: &mut Proc) -> anyhow::Result<()> {
    let until = std::time::SystemTime::now() + START_LIMIT;
    while std::time::SystemTime::now() < until {
        if TcpStream::connect(addr).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = proc.child.try_wait() {
            bail!("{} exited before listening: {status}", proc.name);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bail!(
        "{} not listening on {addr} after {START_LIMIT:?}",
        proc.name
    )
}

/// The fixed-response upstream: this same binary in its upstream role.
/// `tls`: over TLS (self-signed; for training only).
pub(crate) fn upstream(tls: bool) -> anyhow::Result<(Proc, SocketAddr)> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .args(["--role", "upstream"])
        .args(if tls { &["--tls"][..] } else { &[] })
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the fixed upstream")?;
    let stdout = child.stdout.take().context("upstream stdout")?;
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let addr: SocketAddr = line.trim().parse().context("upstream address")?;
    let proc = Proc {
        name: "fixed upstream".into(),
        child,
        _stdout: Some(reader.into_inner()),
    };
    Ok((proc, addr))
}

/// `strata testbed` on a free port.
pub(crate) fn testbed(strata: &Path) -> anyhow::Result<(Proc, SocketAddr)> {
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
    let child = Command::new(strata)
        .args(["testbed", "--listen", &addr.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .context("starting strata testbed")?;
    let mut proc = Proc {
        name: "testbed".into(),
        child,
        _stdout: None,
    };
    wait_listening(addr, &mut proc)?;
    Ok((proc, addr))
}

/// A part's strata processes, each a row of its table, started against one upstream and
/// ended together when this drops.
pub(crate) struct Rows<'a> {
    part: &'static str,
    upstream: String,
    dir: &'a Path,
    procs: Vec<Proc>,
}

impl<'a> Rows<'a> {
    pub(crate) fn new(part: &'static str, upstream: String, dir: &'a Path) -> Rows<'a> {
        Rows {
            part,
            upstream,
            dir,
            procs: Vec::new(),
        }
    }

    /// Starts `bin` as row `name`, the default config plus `extra`.
    pub(crate) fn start(
        &mut self,
        name: &'static str,
        bin: &Path,
        extra: &str,
    ) -> anyhow::Result<Target> {
        self.start_under(&[], name, bin, extra)
    }

    /// As [`Rows::start`], with `bin` run by the command `under` (a tool and its options).
    pub(crate) fn start_under(
        &mut self,
        under: &[String],
        name: &'static str,
        bin: &Path,
        extra: &str,
    ) -> anyhow::Result<Target> {
        let tag = format!("{}-{name}", self.part);
        let (p, t) = strata_under(under, name, bin, &self.upstream, self.dir, &tag, extra)
            .with_context(|| format!("{} row {name}", self.part))?;
        self.procs.push(p);
        Ok(t)
    }
}

/// strata in front of `upstream`, with the default config except what the bench needs.
///
/// The per-call log stays on (`log.level: info`, JSON): it is a feature every deployment
/// runs with. Its lines go to stdout, which is /dev/null here, as nginx's access log is.
///
/// `upstream`: its URL. `extra`: more YAML lines, appended (training a profile: other
/// settings' paths; the telemetry rows: [`telemetry_yaml`]). An `extra` with a `limits:`
/// section of its own replaces the default one, and keeps [`MAX_CONNECTIONS`] in it (the limits
/// part: [`limits_yaml`]). No `OTEL_*` variable of the harness's environment reaches strata:
/// they could turn export on where a row has it off.
pub(crate) fn strata(
    name: &'static str,
    bin: &Path,
    upstream: &str,
    dir: &Path,
    tag: &str,
    extra: &str,
) -> anyhow::Result<(Proc, Target)> {
    strata_under(&[], name, bin, upstream, dir, tag, extra)
}

/// [`strata`], run by the command `under` when it is not empty (`valgrind` and its options:
/// the instruction counts of the limits part).
fn strata_under(
    under: &[String],
    name: &'static str,
    bin: &Path,
    upstream: &str,
    dir: &Path,
    tag: &str,
    extra: &str,
) -> anyhow::Result<(Proc, Target)> {
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
    // Each port is free when asked for, and the kernel may hand the same one out twice in a
    // row; strata refuses a config whose listen and admin ports are one (exit 2).
    let mut admin: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
    while admin.port() == addr.port() {
        admin.set_port(free_port()?);
    }
    let config = dir.join(format!("strata-{tag}.yaml"));
    let limits = if extra.lines().any(|l| l.starts_with("limits:")) {
        String::new()
    } else {
        limits_yaml("")
    };
    std::fs::write(
        &config,
        format!(
            "# Generated by benches/proxy.rs: defaults, except the connection cap (the\n\
             # 5,000-stream test) and a short drain so the bench ends quickly.\n\
             listen: {addr}\nadmin: {admin}\nupstream: {upstream}\n\
             log: {{ format: json, level: info }}\n\
             {limits}\
             timeouts: {{ drain: 1s }}\n{extra}"
        ),
    )?;
    let stderr_path = dir.join(format!("strata-{tag}.stderr"));
    let stderr = std::fs::File::create(&stderr_path)?;
    let mut command = match under.split_first() {
        Some((tool, options)) => {
            let mut c = Command::new(tool);
            c.args(options).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("OTEL_") {
            command.env_remove(name);
        }
    }
    let child = command
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let mut proc = Proc {
        name: name.into(),
        child,
        _stdout: None,
    };
    // The scratch directory goes with the run: a strata that did not start says why here.
    wait_listening(addr, &mut proc).with_context(|| {
        let said = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let tail: Vec<&str> = said.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!("its stderr: {}", tail.join(" | "))
    })?;
    let pids = vec![proc.pid()];
    Ok((
        proc,
        Target {
            name,
            addr,
            pids,
            admin: Some(admin),
        },
    ))
}

/// `limits.max_connections` of every strata the harness starts: room for the 5,000-stream test.
pub(crate) const MAX_CONNECTIONS: u32 = 12_000;

/// The `limits` section for [`strata`]: [`MAX_CONNECTIONS`], and `more` keys (`calls: [...]`)
/// when not empty.
pub(crate) fn limits_yaml(more: &str) -> String {
    let sep = if more.is_empty() { "" } else { ", " };
    format!("limits: {{ max_connections: {MAX_CONNECTIONS}{sep}{more} }}\n")
}

/// The `telemetry` section for [`strata`]'s `extra`: OTLP/HTTP export to `endpoint` (a base
/// URL), `traceidratio` sampling at `ratio`, metrics every 60 s; the span queue and its
/// batches at their defaults (2,048 spans, 512 a request, 5 s).
pub(crate) fn telemetry_yaml(endpoint: &str, ratio: f64) -> String {
    format!(
        "telemetry:\n\
         \x20 otlp: {{ endpoint: \"{endpoint}\", protocol: http/protobuf }}\n\
         \x20 traces: {{ sampler: traceidratio, ratio: {ratio:?} }}\n\
         \x20 metrics: {{ interval: 60s }}\n"
    )
}

/// Whether an nginx's `http` block has a `proxy_cache_path`: nginx then starts a cache
/// manager and a cache loader beside its workers, and their work is nginx's too.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum NginxCache {
    None,
    Recording,
}

/// nginx in front of `upstream`: one worker per core, no response or request buffering,
/// HTTP/1.1 keep-alive to the upstream. `extra`: more of the `http` block (the paths part's
/// servers: [`NGINX_PROXY`] in their locations); `cache`: whether `extra` declares a cache.
pub(crate) fn nginx(
    bin: &Path,
    upstream: SocketAddr,
    dir: &Path,
    tag: &str,
    workers: usize,
    extra: &str,
    cache: NginxCache,
) -> anyhow::Result<(Proc, Target)> {
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
    let prefix = dir.join(format!("nginx-{tag}"));
    std::fs::create_dir_all(&prefix)?;
    let p = prefix.display();
    let conf = prefix.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "# Generated by benches/proxy.rs.\n\
             worker_processes {workers};\n\
             worker_rlimit_nofile 40000;\n\
             user root;\n\
             pid {p}/nginx.pid;\n\
             error_log {p}/error.log warn;\n\
             events {{ worker_connections 20000; }}\n\
             http {{\n\
             \x20 # One write per request, as strata's per-call log line: both go to /dev/null.\n\
             \x20 access_log /dev/null;\n\
             \x20 client_body_temp_path {p}/body;\n\
             \x20 proxy_temp_path {p}/proxy;\n\
             \x20 keepalive_requests 100000000;\n\
             \x20 keepalive_timeout 75s;\n\
             \x20 upstream up {{\n\
             \x20   server {upstream};\n\
             \x20   keepalive 64;\n\
             \x20   keepalive_requests 100000000;\n\
             \x20 }}\n\
             \x20 server {{\n\
             \x20   listen {addr} backlog=8192;\n\
             \x20   location / {{ proxy_pass http://up; {NGINX_PROXY} }}\n\
             \x20 }}\n\
             {extra}\
             }}\n"
        ),
    )?;
    let child = Command::new(bin)
        .arg("-p")
        .arg(&prefix)
        .arg("-c")
        .arg(&conf)
        .args(["-g", "daemon off;"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let mut proc = Proc {
        name: "nginx".into(),
        child,
        _stdout: None,
    };
    wait_listening(addr, &mut proc)?;
    let master = proc.pid();
    let until = std::time::SystemTime::now() + START_LIMIT;
    let mut pids = vec![master];
    while std::time::SystemTime::now() < until {
        let kids = children(master);
        if kids.len() >= workers {
            pids.extend(kids);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if pids.len() < workers + 1 {
        bail!("nginx started fewer than {workers} workers");
    }
    // A cache's manager and loader start beside the workers, a moment after them.
    if cache == NginxCache::Recording {
        std::thread::sleep(Duration::from_millis(200));
        for kid in children(master) {
            if !pids.contains(&kid) {
                pids.push(kid);
            }
        }
    }
    Ok((
        proc,
        Target {
            name: "nginx",
            addr,
            pids,
            admin: None,
        },
    ))
}

/// What every location of the harness's nginx does besides its `proxy_pass`: HTTP/1.1 with
/// keep-alive to the upstream, nothing buffered either way.
pub(crate) const NGINX_PROXY: &str = "proxy_http_version 1.1; proxy_set_header Connection \"\"; \
     proxy_buffering off; proxy_request_buffering off; proxy_read_timeout 300s;";

/// HAProxy in TCP mode (`haproxy -db -f CONF`: in the foreground, one process), its
/// `frontend`s and `backend`s given as `sections`: two threads (`nbthread 2`, as nginx's
/// workers and strata's on 2 cores), no log (it would log connections, not calls).
pub(crate) fn haproxy(
    bin: &Path,
    dir: &Path,
    sections: &str,
    probe: SocketAddr,
) -> anyhow::Result<Proc> {
    haproxy_tuned(bin, dir, "", sections, probe)
}

/// [`haproxy`] with `tune` lines added to its `global` section.
fn haproxy_tuned(
    bin: &Path,
    dir: &Path,
    tune: &str,
    sections: &str,
    probe: SocketAddr,
) -> anyhow::Result<Proc> {
    let conf = dir.join("haproxy.cfg");
    let stderr_path = dir.join("haproxy.stderr");
    std::fs::write(
        &conf,
        format!(
            "# Generated by benches/proxy.rs.\n\
             global\n  nbthread 2\n  maxconn 4096\n{tune}\
             defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 300s\n  timeout server 300s\n\
             {sections}"
        ),
    )?;
    let child = Command::new(bin)
        .args(["-db", "-f"])
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path)?)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let mut proc = Proc {
        name: "haproxy".into(),
        child,
        _stdout: None,
    };
    wait_listening(probe, &mut proc).with_context(|| {
        let said = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        format!("its stderr: {}", said.trim().replace('\n', " | "))
    })?;
    Ok(proc)
}

/// How a layer-4 relay moves the bytes.
#[derive(Clone, Copy)]
pub(crate) enum Relay {
    /// `recv` into its buffers and `send` from them, as HAProxy does by default: the layer-4
    /// floor beside nginx and strata in the fixed upstream's loads.
    Copying,
    /// `splice(2)` from socket to pipe to socket through 1 MiB pipes (`option splice-request`,
    /// `option splice-response`, `tune.pipesize`): a relay whose bytes never reach user space,
    /// the floor for a large response beside which any proxy that reads the bytes (strata
    /// must) is judged.
    Splicing,
}

/// [`haproxy`] with one frontend, plain TCP, relaying to `upstream` as `relay` says.
pub(crate) fn haproxy_relay(
    bin: &Path,
    dir: &Path,
    upstream: SocketAddr,
    relay: Relay,
) -> anyhow::Result<(Proc, Target)> {
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
    let (name, sub, tune, options) = match relay {
        Relay::Copying => ("haproxy", "haproxy-fixed", "", ""),
        Relay::Splicing => (
            "haproxy-splice",
            "haproxy-splice",
            "  tune.pipesize 1048576\n",
            "  option splice-request\n  option splice-response\n",
        ),
    };
    let dir = dir.join(sub);
    std::fs::create_dir_all(&dir)?;
    let sections = format!(
        "frontend plain\n  bind {addr}\n{options}  default_backend up\n\
         backend up\n  server up {upstream}\n"
    );
    let proc = haproxy_tuned(bin, &dir, tune, &sections, addr)?;
    let pids = vec![proc.pid()];
    Ok((
        proc,
        Target {
            name,
            addr,
            pids,
            admin: None,
        },
    ))
}

/// The fields of /proc/PID/stat after the command name.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            stat_fields(p)
                .and_then(|f| f.get(1)?.parse::<u32>().ok())
                .is_some_and(|ppid| ppid == pid)
        })
        .collect()
}

/// User + system CPU time of the processes, in clock ticks.
pub(crate) fn cpu_ticks(pids: &[u32]) -> u64 {
    let (user, system) = user_system_ticks(pids);
    user + system
}

/// User and system CPU time of the processes apart, in clock ticks.
pub(crate) fn user_system_ticks(pids: &[u32]) -> (u64, u64) {
    pids.iter()
        .filter_map(|&pid| {
            let f = stat_fields(pid)?;
            // Fields 14 and 15 of stat(5); the list starts at field 3 (state).
            Some((
                f.get(11)?.parse::<u64>().ok()?,
                f.get(12)?.parse::<u64>().ok()?,
            ))
        })
        .fold((0, 0), |(u, s), (a, b)| (u + a, s + b))
}

/// Context switches, voluntary and not, of every thread of the processes (proc(5):
/// `/proc/PID/task/TID/status`; a process's own `status` counts its first thread only).
pub(crate) fn context_switches(pids: &[u32]) -> u64 {
    let thread = |status: String| -> u64 {
        status
            .lines()
            .filter(|l| {
                l.starts_with("voluntary_ctxt_switches:")
                    || l.starts_with("nonvoluntary_ctxt_switches:")
            })
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum()
    };
    pids.iter()
        .filter_map(|pid| std::fs::read_dir(format!("/proc/{pid}/task")).ok())
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("status")).ok())
        .map(thread)
        .sum()
}

fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Sum of VmRSS, in KiB.
pub(crate) fn rss_kib(pids: &[u32]) -> u64 {
    pids.iter().map(|&p| status_kib(p, "VmRSS:")).sum()
}

/// Sum of VmHWM (peak RSS since start or since [`reset_peak`]), in KiB.
pub(crate) fn peak_kib(pids: &[u32]) -> u64 {
    pids.iter().map(|&p| status_kib(p, "VmHWM:")).sum()
}

/// Resets each process's peak RSS to its current RSS (`clear_refs` 5, Linux 4.0+).
pub(crate) fn reset_peak(pids: &[u32]) -> bool {
    pids.iter()
        .all(|&p| std::fs::write(format!("/proc/{p}/clear_refs"), "5").is_ok())
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on every Linux we run on).
pub(crate) fn clock_ticks() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100)
}

/// A `redis-server` of the harness's own (the keys part's store), on a free loopback port:
/// nothing saved (`--save ''`, `--appendonly no`), its files in `dir`. Its `default` user has
/// no password — the baseline build's store sends none — and the ACL user `user` has
/// `password` and every right, for the current build's store (its URL carries them).
pub(crate) fn redis(
    bin: &Path,
    dir: &Path,
    user: &str,
    password: &str,
) -> anyhow::Result<(Proc, SocketAddr)> {
    let addr: SocketAddr = ([127, 0, 0, 1], free_port()?).into();
    let child = Command::new(bin)
        .args(["--port", &addr.port().to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"))
        .args([
            "--user",
            user,
            "on",
            &format!(">{password}"),
            "~*",
            "&*",
            "+@all",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let mut proc = Proc {
        name: "redis-server".into(),
        child,
        _stdout: None,
    };
    wait_listening(addr, &mut proc)?;
    Ok((proc, addr))
}
