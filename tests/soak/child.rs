//! The real `strata` binary as a child process, so that its memory (from `/proc`) and its log
//! are those of the process an operator runs: listener and admin on ephemeral loopback ports,
//! stdout (the JSON log) and stderr read to the end by two threads into a [`LogBook`].

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;
use tokio::time::{Instant, sleep};

use crate::calllog::LogBook;

/// How long strata may take to say where it serves.
const START_LIMIT: Duration = Duration::from_secs(30);
/// How long strata may take to exit after SIGTERM (its drain is set to 2 s below).
const STOP_LIMIT: Duration = Duration::from_secs(15);

/// Where Debian's heaptrack package puts its preload library.
const HEAPTRACK_PRELOAD: &str = "/usr/lib/heaptrack/libheaptrack_preload.so";

/// strata's config for the soak. The retry policy is strata's default: no soak call is
/// retryable under it (tools/call is never idempotent by default, and the idempotent methods
/// in the mix never fail), so every call is one attempt, which the soak checks. Resumable
/// streams wait 250 ms for a resume that never comes, so parking is exercised too.
fn config_text(upstream: SocketAddr) -> String {
    format!(
        "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nupstream: http://{upstream}\n\
         timeouts:\n  resume_window: 250ms\n  drain: 2s\n\
         log:\n  format: json\n  level: info\n"
    )
}

/// Resident memory and open descriptors of a process, from `/proc/PID`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Memory {
    /// `VmRSS`: resident now.
    pub rss_kib: u64,
    /// `VmHWM`: the most that was ever resident.
    pub hwm_kib: u64,
    /// Entries of `/proc/PID/fd`: sockets (agents, upstream, listeners) and the rest.
    pub fds: u64,
}

pub struct StrataProc {
    child: Child,
    pub listen: SocketAddr,
    pub admin: SocketAddr,
    pub log: Arc<Mutex<LogBook>>,
    readers: Vec<JoinHandle<()>>,
    config: PathBuf,
}

impl StrataProc {
    /// Starts `strata --config FILE` in front of `upstream`; returns once it logs its addresses.
    pub async fn start(upstream: SocketAddr) -> StrataProc {
        let config = std::env::temp_dir().join(format!("strata-soak-{}.yaml", std::process::id()));
        std::fs::write(&config, config_text(upstream)).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_strata"));
        // `STRATA_SOAK_HEAPTRACK=FILE`: strata runs under heaptrack's allocation tracer, which
        // writes its raw trace to FILE (`heaptrack_interpret < FILE | gzip > F.gz`, then
        // `heaptrack_print F.gz`). For finding where memory goes; the figures are then not
        // comparable.
        if let Some(out) = std::env::var_os("STRATA_SOAK_HEAPTRACK") {
            command
                .env("LD_PRELOAD", HEAPTRACK_PRELOAD)
                .env("DUMP_HEAPTRACK_OUTPUT", out);
        }
        let mut child = command
            .arg("--config")
            .arg(&config)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(LogBook::default()));
        let (tx, serving) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let readers = vec![
            read_lines(stdout, Arc::clone(&log), Some(tx), false),
            read_lines(stderr, Arc::clone(&log), None, true),
        ];
        let mut proc = StrataProc {
            child,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
            readers,
            config,
        };
        let deadline = Instant::now() + START_LIMIT;
        loop {
            if let Ok((listen, admin)) = serving.try_recv() {
                proc.listen = listen;
                proc.admin = admin;
                return proc;
            }
            if let Some(status) = proc.child.try_wait().unwrap() {
                panic!("strata exited at start: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "strata did not log its addresses"
            );
            sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn memory(&self) -> Memory {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let kib = |field: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or_else(|| panic!("no {field} in /proc/PID/status"))
        };
        let fds = std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .unwrap()
            .count() as u64;
        Memory {
            rss_kib: kib("VmRSS:"),
            hwm_kib: kib("VmHWM:"),
            fds,
        }
    }

    /// SIGTERM (a graceful drain), then the exit status once strata is gone and both of its
    /// pipes are read to the end.
    pub async fn stop(mut self) -> ExitStatus {
        let term = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(term.success(), "kill -TERM failed");
        let deadline = Instant::now() + STOP_LIMIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "strata still running after SIGTERM"
            );
            sleep(Duration::from_millis(20)).await;
        };
        for reader in self.readers.drain(..) {
            reader.join().unwrap();
        }
        status
    }
}

impl Drop for StrataProc {
    /// On every path, a test failure included: the child is killed (by its handle) and reaped.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.config);
    }
}

/// Reads `pipe` to EOF on a thread (so strata never blocks on a full pipe), feeding the log
/// book; on stdout, sends the listener and admin addresses from strata's "serving" line.
fn read_lines(
    pipe: impl Read + Send + 'static,
    log: Arc<Mutex<LogBook>>,
    serving: Option<mpsc::Sender<(SocketAddr, SocketAddr)>>,
    is_stderr: bool,
) -> JoinHandle<()> {
    // `STRATA_SOAK_LOG=FILE` keeps strata's log (stdout and stderr) for a look afterwards.
    let mut keep = std::env::var_os("STRATA_SOAK_LOG").map(|path| {
        let suffix = if is_stderr { ".stderr" } else { "" };
        let mut path = path;
        path.push(suffix);
        std::io::BufWriter::new(std::fs::File::create(path).unwrap())
    });
    std::thread::spawn(move || {
        let mut serving = serving;
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if let Some(file) = keep.as_mut() {
                writeln!(file, "{line}").unwrap();
            }
            if let Some(addrs) = serving.as_ref().and_then(|_| addresses(&line)) {
                let _ = serving.take().map(|tx| tx.send(addrs));
            }
            let mut book = log.lock().unwrap();
            if is_stderr {
                book.stderr_line(&line);
            } else {
                book.line(&line);
            }
        }
    })
}

/// `listen` and `admin` from the line strata logs once it serves.
fn addresses(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let v: Value = serde_json::from_str(line).ok()?;
    let addr = |k: &str| v.get(k)?.as_str()?.parse::<SocketAddr>().ok();
    Some((addr("listen")?, addr("admin")?))
}
