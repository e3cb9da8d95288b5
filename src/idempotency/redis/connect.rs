//! One new connection to the store's Redis, per topology, with the `redis` crate: a
//! multiplexed connection to a single node or to the master the sentinels name, or a cluster
//! connection. Clients are built for every attempt, so a renewed `ca_file` or a new master is
//! what the next attempt uses.

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionAddr, ConnectionInfo, IntoConnectionInfo,
    Pipeline, RedisConnectionInfo, RedisFuture, RedisResult, TlsCertificates, TlsMode, Value,
};
use tokio::time::Duration;

use crate::config::{RedisConfig, RedisNode, RedisTopology};

/// A live connection; clones share it (commands are pipelined on one socket per node).
#[derive(Clone)]
pub(super) enum Conn {
    Node(MultiplexedConnection),
    Cluster(ClusterConnection),
}

/// Opens a connection for `config`; `connect` bounds each TCP and TLS handshake.
pub(super) async fn connect(config: &RedisConfig, connect: Duration) -> RedisResult<Conn> {
    let async_config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(connect))
        // The store bounds every operation itself (`Link`), with the remaining time.
        .set_response_timeout(None);
    let certs = certificates(config)?;
    match &config.topology {
        RedisTopology::Single(node) => {
            let info = info(config, node)?;
            let client = match certs {
                Some(certs) => Client::build_with_tls(info, certs)?,
                None => Client::open(info)?,
            };
            let conn = client
                .get_multiplexed_async_connection_with_config(&async_config)
                .await?;
            Ok(Conn::Node(conn))
        }
        RedisTopology::Sentinel { master, sentinels } => {
            let conn = sentinel(config, master, sentinels, certs)?
                .get_async_connection_with_config(&async_config)
                .await?;
            Ok(Conn::Node(conn))
        }
        RedisTopology::Cluster(nodes) => {
            let conn = cluster(config, nodes, certs, connect)?
                .get_async_connection()
                .await?;
            Ok(Conn::Cluster(conn))
        }
    }
}

/// A client that asks `sentinels` for `master`'s address, then connects there with the
/// store's credentials and database. The sentinels are asked without credentials, over TLS
/// when the store is `rediss://`.
fn sentinel(
    config: &RedisConfig,
    master: &str,
    sentinels: &[RedisNode],
    certs: Option<TlsCertificates>,
) -> RedisResult<SentinelClient> {
    let addrs = sentinels.iter().map(|n| addr(config.tls, n));
    let mut builder = SentinelClientBuilder::new(addrs, master, SentinelServerType::Master)?
        .set_client_to_redis_db(i64::from(config.db));
    if let Some(user) = &config.username {
        builder = builder.set_client_to_redis_username(user);
    }
    if let Some(password) = &config.password {
        builder = builder.set_client_to_redis_password(password.expose());
    }
    if config.tls {
        builder = builder
            .set_client_to_redis_tls_mode(TlsMode::Secure)
            .set_client_to_sentinel_tls_mode(TlsMode::Secure);
    }
    if let Some(certs) = certs {
        builder = builder
            .set_client_to_redis_certificates(certs.clone())
            .set_client_to_sentinel_certificates(certs);
    }
    builder.build()
}

/// A client for the cluster that `nodes` belong to (any of them answers with the slots).
fn cluster(
    config: &RedisConfig,
    nodes: &[RedisNode],
    certs: Option<TlsCertificates>,
    connect: Duration,
) -> RedisResult<ClusterClient> {
    let infos = nodes
        .iter()
        .map(|n| info(config, n))
        .collect::<RedisResult<Vec<_>>>()?;
    let mut builder = ClusterClientBuilder::new(infos).connection_timeout(connect);
    if let Some(user) = &config.username {
        builder = builder.username(user);
    }
    if let Some(password) = &config.password {
        builder = builder.password(password.expose());
    }
    if config.tls {
        builder = builder.tls(TlsMode::Secure);
    }
    if let Some(certs) = certs {
        builder = builder.certs(certs);
    }
    builder.build()
}

fn addr(tls: bool, node: &RedisNode) -> ConnectionAddr {
    let host = node.host.clone();
    if tls {
        ConnectionAddr::TcpTls {
            host,
            port: node.port,
            insecure: false,
            tls_params: None,
        }
    } else {
        ConnectionAddr::Tcp(host, node.port)
    }
}

/// `node` with the credentials and database of `config`.
fn info(config: &RedisConfig, node: &RedisNode) -> RedisResult<ConnectionInfo> {
    let mut redis = RedisConnectionInfo::default().set_db(i64::from(config.db));
    if let Some(user) = &config.username {
        redis = redis.set_username(user);
    }
    if let Some(password) = &config.password {
        redis = redis.set_password(password.expose());
    }
    Ok(addr(config.tls, node)
        .into_connection_info()?
        .set_redis_settings(redis))
}

/// The roots of `ca_file`, read now; `None` without one (the system's roots are used).
fn certificates(config: &RedisConfig) -> RedisResult<Option<TlsCertificates>> {
    let Some(path) = config.ca_file.as_ref().filter(|_| config.tls) else {
        return Ok(None);
    };
    let root_cert = std::fs::read(path)?;
    Ok(Some(TlsCertificates {
        client_tls: None,
        root_cert: Some(root_cert),
    }))
}

// === impl Conn ===

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Node(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Node(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Node(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}
