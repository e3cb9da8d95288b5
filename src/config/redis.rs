//! The Redis idempotency store's settings, typed: `idempotency.store: redis://…` or
//! `rediss://…`, and the `idempotency.redis` section.

use std::fmt;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Allowed `idempotency.redis.timeout`.
pub const REDIS_TIMEOUT_RANGE: RangeInclusive<Duration> =
    Duration::from_millis(1)..=Duration::from_secs(60);

/// Where the Redis store's servers are and how to talk to them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisConfig {
    pub topology: RedisTopology,
    /// `rediss://`: TLS, the server's certificate verified (against `ca_file`, else the
    /// system's roots).
    pub tls: bool,
    /// The ACL user (the URL's user part); `None` is Redis's `default` user.
    pub username: Option<String>,
    /// From the URL or `password_file`.
    pub password: Option<RedisPassword>,
    /// The database (`/db` in the URL); always 0 with a cluster.
    pub db: u32,
    /// PEM roots that replace the system's for `rediss://`.
    pub ca_file: Option<PathBuf>,
    /// How long one store operation (claim, complete, release) may take, every command and
    /// any wait for a connection included; past it the operation is a store error.
    pub timeout: Duration,
}

/// Which servers hold the keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisTopology {
    /// The URL's `host:port`.
    Single(RedisNode),
    /// The master of `master`, as the sentinels name it (the URL's host is not used).
    Sentinel {
        master: String,
        sentinels: Vec<RedisNode>,
    },
    /// A Redis Cluster: these nodes (the URL's `host:port` first) are asked for the slots.
    Cluster(Vec<RedisNode>),
}

/// `host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisNode {
    pub host: String,
    pub port: u16,
}

/// A Redis password: never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisPassword(Arc<str>);

// === impl RedisConfig ===

impl RedisConfig {
    /// The default `timeout`: a Redis next to the proxy answers in well under a millisecond;
    /// this only bounds how long a keyed call waits when it does not.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);

    /// A plain `redis://host:port/db` with every other setting at its default.
    pub fn single(host: &str, port: u16, db: u32) -> RedisConfig {
        RedisConfig {
            topology: RedisTopology::Single(RedisNode {
                host: host.to_owned(),
                port,
            }),
            tls: false,
            username: None,
            password: None,
            db,
            ca_file: None,
            timeout: RedisConfig::DEFAULT_TIMEOUT,
        }
    }

    /// What errors and logs name the store by: no credentials.
    pub fn describe(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        match &self.topology {
            RedisTopology::Single(node) => format!("{scheme}://{node}/{}", self.db),
            RedisTopology::Sentinel { master, .. } => {
                format!("{scheme} sentinel master {master}/{}", self.db)
            }
            RedisTopology::Cluster(nodes) => match nodes.first() {
                Some(first) => format!("{scheme} cluster {first}+{}", nodes.len() - 1),
                None => format!("{scheme} cluster"),
            },
        }
    }
}

// === impl RedisNode ===

impl fmt::Display for RedisNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

// === impl RedisPassword ===

impl RedisPassword {
    /// The password in `text` with surrounding whitespace trimmed (a Kubernetes Secret file
    /// often ends with a newline); `None` when that is empty.
    pub fn from_text(text: &str) -> Option<RedisPassword> {
        let password = text.trim();
        (!password.is_empty()).then(|| RedisPassword(Arc::from(password)))
    }

    /// The password's text, to send to Redis.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for RedisPassword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RedisPassword(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_never_shown() {
        let mut config = RedisConfig::single("cache", 6380, 2);
        config.password = RedisPassword::from_text("hunter2\n");
        assert_eq!(
            config.password.as_ref().map(|p| p.expose()),
            Some("hunter2")
        );
        assert!(!format!("{config:?}").contains("hunter2"));
        assert_eq!(config.describe(), "redis://cache:6380/2");
        assert_eq!(RedisPassword::from_text(" \n"), None);
    }
}
