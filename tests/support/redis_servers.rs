//! Several `redis-server`s for one test (TLS, ACL users, a Sentinel group, a Cluster), each on
//! a free loopback port, all killed and reaped when the test ends ([`Children`]). Their
//! config files, certificates and logs go to a scratch directory under the target dir.
//!
//! Without `redis-server` on the PATH, [`Servers::new`] gives `None` (the test passes with a
//! note) unless `STRATA_REQUIRE_REDIS` is set, as CI does.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::time::{Instant, sleep};

use super::children::Children;
use super::redis::{free_port, redis_server_installed};

/// How often a server's readiness is looked at.
const POLL: Duration = Duration::from_millis(25);

/// The longest one `redis-cli` may run (`--cluster create` waits for every node to join, for
/// ever if one died): past it, coreutils' `timeout` ends it and the test fails on its output.
const CLI_LIMIT: &str = "60";

/// The files `redis-server --tls-port` needs, and the CA that signed its certificate.
pub struct TlsFiles {
    pub ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

/// The servers of one test.
pub struct Servers {
    children: Children,
    pub dir: PathBuf,
    /// Servers started from now on listen with TLS only.
    pub tls: Option<TlsFiles>,
    /// What `redis-cli` logs in with (user, password), by port.
    logins: HashMap<u16, (String, String)>,
}

impl Servers {
    /// `None` (with a note) when `redis-server` is not installed.
    pub fn new(test: &str) -> Option<Servers> {
        if !redis_server_installed() {
            return None;
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("redis")
            .join(test);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Some(Servers {
            children: Children::default(),
            dir,
            tls: None,
            logins: HashMap::new(),
        })
    }

    /// Makes a CA and a server certificate for 127.0.0.1; servers started after this speak
    /// TLS only.
    pub fn use_tls(&mut self) -> &TlsFiles {
        let ca = crate::pki::Ca::new("strata test redis CA");
        let leaf = ca.server(1);
        let (cert, key) = leaf.write(&self.dir, "redis");
        let ca_path = self.dir.join("ca.crt");
        std::fs::write(&ca_path, ca.pem()).unwrap();
        self.tls.insert(TlsFiles {
            ca: ca_path,
            cert,
            key,
        })
    }

    /// Starts `redis-server` as `name` with `args` (and the config file `conf`, when given,
    /// e.g. for a sentinel), on a free port; returns the port once it answers.
    pub async fn start(&mut self, name: &str, conf: Option<&str>, args: &[&str]) -> u16 {
        // Redis cannot pick its own port: take a free one and hand it over. Another process
        // may grab it in between, so a few tries.
        for attempt in 0..5 {
            let port = free_port();
            let child = format!("{name}-{attempt}");
            let mut cmd = Command::new("redis-server");
            if let Some(conf) = conf {
                let path = self.dir.join(format!("{child}.conf"));
                std::fs::write(&path, conf).unwrap();
                cmd.arg(path);
            }
            cmd.args(args)
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&self.dir)
                .arg("--logfile")
                .arg(self.dir.join(format!("{child}.log")))
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            self.listen_args(&mut cmd, port);
            self.children.spawn(&child, &mut cmd);
            if self.ready(&child, port).await {
                return port;
            }
        }
        panic!("{name}: redis-server did not start on any free port");
    }

    fn listen_args(&self, cmd: &mut Command, port: u16) {
        let port = port.to_string();
        match &self.tls {
            None => cmd.args(["--port", &port]),
            Some(tls) => cmd
                .args([
                    "--port",
                    "0",
                    "--tls-port",
                    &port,
                    "--tls-auth-clients",
                    "no",
                ])
                .arg("--tls-cert-file")
                .arg(&tls.cert)
                .arg("--tls-key-file")
                .arg(&tls.key)
                .arg("--tls-ca-cert-file")
                .arg(&tls.ca),
        };
    }

    async fn ready(&mut self, child: &str, port: u16) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let answer = self.cli(port, &["PING"]);
            if answer.contains("PONG") || answer.contains("NOAUTH") {
                return true;
            }
            // Exited: most likely the port was taken in the meantime.
            if self.children.exited(child) {
                return false;
            }
            sleep(POLL).await;
        }
        false
    }

    /// `redis-cli` logs in to `port` as `user` from now on.
    pub fn login(&mut self, port: u16, user: &str, password: &str) {
        self.logins
            .insert(port, (user.to_owned(), password.to_owned()));
    }

    /// `redis-cli` against `port` (TLS and login as set), at most [`CLI_LIMIT`] seconds: its
    /// output, errors included.
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        let mut cmd = Command::new("timeout");
        cmd.args([
            CLI_LIMIT,
            "redis-cli",
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
        ]);
        if let Some(tls) = &self.tls {
            cmd.arg("--tls").arg("--cacert").arg(&tls.ca);
        }
        if let Some((user, password)) = self.logins.get(&port) {
            cmd.args(["--user", user, "--pass", password, "--no-auth-warning"]);
        }
        let out = cmd.args(args).stdin(Stdio::null()).output().unwrap();
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        text
    }

    /// Polls `redis-cli … args` until `done` holds for its output; panics at `within`.
    pub async fn cli_until(
        &self,
        port: u16,
        args: &[&str],
        within: Duration,
        done: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + within;
        loop {
            let out = self.cli(port, args);
            if done(&out) {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "redis-cli -p {port} {args:?}: still {out:?} after {within:?}"
            );
            sleep(Duration::from_millis(100)).await;
        }
    }
}
