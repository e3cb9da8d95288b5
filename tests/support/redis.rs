//! A `redis-server` per test, on a free port, killed by its PID on drop (the Redis
//! idempotency store's tests). Without `redis-server` on the PATH, `start` gives `None` (the
//! test passes with a note) unless `STRATA_REQUIRE_REDIS` is set, as CI does.

use std::io::ErrorKind;
use std::net::TcpListener as StdListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use strata::config::{IdempotencyConfig, RedisConfig, StoreKind};
use strata::idempotency::Store;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep};

/// A `redis-server` child process, killed on drop.
pub struct Redis {
    child: Child,
    pub port: u16,
}

impl Redis {
    /// Starts one, or `None` (with a note) when `redis-server` is not installed.
    pub async fn start() -> Option<Redis> {
        if !redis_server_installed() {
            return None;
        }
        // Redis cannot pick its own port: take a free one and hand it over. Another process
        // may grab it in between, so a few tries.
        for _ in 0..5 {
            let port = free_port();
            if let Some(redis) = Redis::start_on(port).await {
                return Some(redis);
            }
        }
        panic!("redis-server did not start on any free port");
    }

    pub async fn start_on(port: u16) -> Option<Redis> {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut redis = Redis { child, port };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(mut conn) = TcpStream::connect(("127.0.0.1", port)).await
                && raw(&mut conn, &[b"PING"]).await.starts_with(b"+PONG")
            {
                return Some(redis);
            }
            // Exited: most likely the port was taken in the meantime.
            if let Ok(Some(_)) = redis.child.try_wait() {
                return None;
            }
            sleep(Duration::from_millis(20)).await;
        }
        None
    }

    pub fn config(&self, db: u32, ttl: Duration) -> IdempotencyConfig {
        IdempotencyConfig {
            store: StoreKind::Redis(RedisConfig::single("127.0.0.1", self.port, db)),
            ttl,
            ..IdempotencyConfig::default()
        }
    }

    pub fn store(&self) -> Store {
        Store::new(&self.config(0, Duration::from_secs(60)))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `redis-server` is on the PATH; with `STRATA_REQUIRE_REDIS` set, it must be.
pub fn redis_server_installed() -> bool {
    match Command::new("redis-server").arg("--version").output() {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            assert!(
                std::env::var_os("STRATA_REQUIRE_REDIS").is_none(),
                "STRATA_REQUIRE_REDIS is set but redis-server is not installed"
            );
            eprintln!("note: redis-server not installed; skipping this Redis store test");
            false
        }
        Err(e) => panic!("redis-server --version: {e}"),
    }
}

pub fn free_port() -> u16 {
    let listener = StdListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// One command on a raw connection; the reply's first read.
pub async fn raw(conn: &mut TcpStream, args: &[&[u8]]) -> Vec<u8> {
    let mut wire = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        wire.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        wire.extend_from_slice(a);
        wire.extend_from_slice(b"\r\n");
    }
    if conn.write_all(&wire).await.is_err() {
        return Vec::new();
    }
    let mut buf = vec![0; 4096];
    let n = conn.read(&mut buf).await.unwrap_or(0);
    buf.truncate(n);
    buf
}
