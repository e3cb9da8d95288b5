//! strata as its own process, run from a config file in a scratch directory (so `main`'s
//! signal handling and file watch are what is tested), its `/metrics` read over loopback.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::time::{Instant, sleep};

use super::LIMIT;
use super::children::Children;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");

/// A running strata process; dropped, it is killed.
pub struct StrataProcess {
    pub listen: SocketAddr,
    pub admin: SocketAddr,
    children: Children,
    client: Client<HttpConnector, Empty<Bytes>>,
}

/// An empty scratch directory for test `name`, under the target's tmp directory.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("process")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A loopback address whose port was free a moment ago.
pub fn free_addr() -> SocketAddr {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    listener.local_addr().unwrap()
}

impl StrataProcess {
    /// Runs `strata --config CONFIG ARGS…` (logs next to the file) and waits until it is
    /// ready. The file must name `listen` and `admin`.
    pub async fn start(
        config: &Path,
        listen: SocketAddr,
        admin: SocketAddr,
        args: &[&str],
    ) -> Self {
        let dir = config.parent().unwrap();
        let log = |name: &str| std::fs::File::create(dir.join(name)).unwrap();
        let mut children = Children::default();
        children.spawn(
            "strata",
            Command::new(STRATA)
                .arg("--config")
                .arg(config)
                .args(args)
                .env_remove("STRATA_CONFIG")
                .env_remove("STRATA_WATCH_CONFIG")
                .stdout(log("strata.log"))
                .stderr(log("strata.stderr")),
        );
        let client = Client::builder(TokioExecutor::new()).build_http();
        let mut strata = StrataProcess {
            listen,
            admin,
            children,
            client,
        };
        let deadline = Instant::now() + LIMIT;
        while strata.get("/readyz").await.map(|(status, _)| status) != Some(200) {
            assert!(Instant::now() < deadline, "strata is not ready on {admin}");
            strata.assert_running();
            sleep(std::time::Duration::from_millis(20)).await;
        }
        strata
    }

    /// `GET path` on the admin listener: status and body, `None` when it cannot connect.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        let uri = format!("http://{}{path}", self.admin).parse().ok()?;
        let response = tokio::time::timeout(LIMIT, self.client.get(uri))
            .await
            .ok()?
            .ok()?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.ok()?.to_bytes();
        Some((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// The value of the counter line `series` (name and labels) in `/metrics`; 0 when absent.
    pub async fn counter(&self, series: &str) -> u64 {
        let (status, text) = self.get("/metrics").await.unwrap();
        assert_eq!(status, 200, "{text}");
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .map_or(0, |value| value.trim().parse().unwrap())
    }

    /// Polls `series` until it reaches `at_least` (and returns it), or fails at [`LIMIT`].
    pub async fn wait_counter(&mut self, series: &str, at_least: u64) -> u64 {
        let deadline = Instant::now() + LIMIT;
        loop {
            let value = self.counter(series).await;
            if value >= at_least {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "{series} is {value}, not {at_least}"
            );
            self.assert_running();
            sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Sends SIGHUP.
    pub fn hangup(&mut self) {
        self.children.signal("strata", "HUP");
    }

    pub fn assert_running(&mut self) {
        self.children.assert_running("strata");
    }
}
