//! The Redis store in the deployments it supports, each against real `redis-server`s the test
//! starts on free loopback ports: an ACL user and `requirepass`, TLS with a private CA, a
//! Sentinel group through a failover, a three-master Cluster. Each with two strata replicas
//! sharing the keys. Without `redis-server` these tests print a note and pass, unless
//! `STRATA_REQUIRE_REDIS` is set.
#![cfg(test)]

use crate::idempotency::{strata, testbed};
use crate::idempotency_store::{fresh, key, kind, record};
use crate::support::{self, LIMIT};

use std::time::Duration;

use serde_json::json;
use strata::app::Running;
use strata::config::StoreKind;
use strata::config::{IdempotencyConfig, RedisConfig, RedisNode, RedisPassword, RedisTopology};
use strata::idempotency::{Completion, Fingerprint, Store};
use support::post::{Agent, series};
use support::redis_servers::Servers;
use tokio::time::{Instant, sleep};

/// A Sentinel failover takes a few seconds; the old master is demoted up to ~10 s later.
const FAILOVER_LIMIT: Duration = Duration::from_secs(40);

fn store_config(redis: RedisConfig) -> IdempotencyConfig {
    IdempotencyConfig {
        store: StoreKind::Redis(redis),
        ttl: Duration::from_secs(60),
        ..IdempotencyConfig::default()
    }
}

fn node(port: u16) -> RedisNode {
    RedisNode {
        host: "127.0.0.1".into(),
        port,
    }
}

/// A keyed call of `tool` through `s`: whether it was answered from a record. The first
/// call's record is written just after its answer reached the agent, so a repeat may find
/// the call still in flight (409, nothing executed): it is sent again, as an agent would.
async fn keyed(s: &Running, tool: &str, key: &str, id: i64) -> bool {
    let deadline = Instant::now() + LIMIT;
    loop {
        let answer = Agent::new(s.listen)
            .call(json!(id), tool, json!({}), &[("idempotency-key", key)])
            .await;
        if answer.status == 409 && Instant::now() < deadline {
            sleep(Duration::from_millis(20)).await;
            continue;
        }
        assert_eq!(answer.status, 200, "{tool} under {key}");
        return answer.header("idempotent-replayed") == Some("true");
    }
}

/// Waits until `s` has its store again: a probe key sent twice is answered from its record
/// the second time. Probes call `tool_error`, never the tool a test counts.
async fn until_store_answers(s: &Running, name: &str, within: Duration) {
    let deadline = Instant::now() + within;
    for n in 0.. {
        let key = format!("probe-{name}-{n}");
        keyed(s, "tool_error", &key, 1).await;
        if keyed(s, "tool_error", &key, 2).await {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: no store within {within:?}"
        );
        sleep(Duration::from_millis(100)).await;
    }
}

fn store_errors(s: &Running) -> f64 {
    let text = s.metrics.render();
    series(
        &text,
        "strata_idempotent_replays_total",
        &[("result", "store_error")],
    )
}

#[tokio::test]
async fn an_acl_user_and_requirepass() {
    let Some(mut servers) = Servers::new("acl") else {
        return;
    };
    let user = [
        "--user",
        "strata",
        "on",
        ">s3cret",
        "~strata:idem:*",
        "+@all",
    ];
    let port = servers
        .start(
            "redis",
            None,
            &[&["--requirepass", "adminpw"][..], &user].concat(),
        )
        .await;
    let with = |user: Option<&str>, password: Option<&str>| {
        let mut redis = RedisConfig::single("127.0.0.1", port, 0);
        redis.username = user.map(str::to_owned);
        redis.password = password.and_then(RedisPassword::from_text);
        Store::new(&store_config(redis))
    };
    // The ACL user, on two replicas.
    let (a, b) = (
        with(Some("strata"), Some("s3cret")),
        with(Some("strata"), Some("s3cret")),
    );
    let t = fresh(&a, "k", 1).await;
    assert_eq!(kind(&b, "k", 1).await, "in_flight");
    assert_eq!(t.complete(record("{}")).await.unwrap(), Completion::Stored);
    assert_eq!(kind(&b, "k", 1).await, "done");
    // `requirepass` is the default user's password.
    assert_eq!(
        kind(&with(None, Some("adminpw")), "other", 1).await,
        "fresh"
    );
    // A wrong password, or none: refused, and said so.
    for (user, password) in [(Some("strata"), Some("nope")), (None, None)] {
        let err = with(user, password)
            .claim(&key("k"), Fingerprint(1))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("authentication refused"), "{err}");
        assert!(!err.to_string().contains("nope"), "{err}");
    }
}

#[tokio::test]
async fn a_wrong_password_is_named_at_start_and_calls_are_forwarded() {
    let Some(mut servers) = Servers::new("wrong-password") else {
        return;
    };
    let port = servers
        .start("redis", None, &["--requirepass", "right"])
        .await;
    let (_guard, logs) = support::capture();
    let bed = testbed().await;
    let mut redis = RedisConfig::single("127.0.0.1", port, 0);
    redis.password = RedisPassword::from_text("wrong-horse-battery");
    let s = strata(&bed, store_config(redis)).await;
    // Named at start, before any call: strata connects as it starts.
    let deadline = Instant::now() + LIMIT;
    while !logs.text().contains("authentication refused") {
        assert!(Instant::now() < deadline, "no authentication error logged");
        sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !logs.text().contains("wrong-horse-battery"),
        "the password was logged"
    );
    // Keyed calls go through without idempotency, each counted.
    assert!(!keyed(&s, "ok", "order-1", 1).await);
    assert!(!keyed(&s, "ok", "order-1", 2).await);
    assert_eq!(bed.testbed.calls_of("ok"), 2);
    assert_eq!(store_errors(&s), 2.0);
}

#[tokio::test]
async fn tls_with_a_private_ca() {
    let Some(mut servers) = Servers::new("tls") else {
        return;
    };
    let ca = servers.use_tls().ca.clone();
    let port = servers.start("redis", None, &[]).await;
    let mut redis = RedisConfig::single("127.0.0.1", port, 0);
    redis.tls = true;
    redis.ca_file = Some(ca);
    let bed = testbed().await;
    let one = strata(&bed, store_config(redis.clone())).await;
    let two = strata(&bed, store_config(redis.clone())).await;
    assert!(!keyed(&one, "ok", "order-1", 1).await);
    assert!(keyed(&two, "ok", "order-1", 2).await);
    assert_eq!(bed.testbed.calls_of("ok"), 1);
    // Without the CA, the server's certificate is not trusted: verification is on.
    redis.ca_file = None;
    let err = Store::new(&store_config(redis))
        .claim(&key("k"), Fingerprint(1))
        .await
        .unwrap_err();
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );
}

#[tokio::test]
async fn sentinel_failover_keeps_the_keys() {
    let Some(mut servers) = Servers::new("sentinel") else {
        return;
    };
    // The master and its replica want a password; the sentinel does not.
    let auth = ["--requirepass", "pw", "--masterauth", "pw"];
    let master = servers.start("master", None, &auth).await;
    let replica_of = ["--replicaof", "127.0.0.1", &master.to_string()];
    let replica = servers
        .start("replica", None, &[&auth[..], &replica_of].concat())
        .await;
    servers.login(master, "default", "pw");
    servers.login(replica, "default", "pw");
    servers
        .cli_until(replica, &["INFO", "replication"], LIMIT, |o| {
            o.contains("master_link_status:up")
        })
        .await;
    let conf = format!(
        "sentinel monitor mymaster 127.0.0.1 {master} 1\n\
         sentinel auth-pass mymaster pw\n\
         sentinel down-after-milliseconds mymaster 1000\n\
         sentinel failover-timeout mymaster 10000\n"
    );
    let sentinel = servers
        .start("sentinel", Some(&conf), &["--sentinel"])
        .await;
    let replica_port = replica.to_string();
    servers
        .cli_until(
            sentinel,
            &["SENTINEL", "REPLICAS", "mymaster"],
            LIMIT,
            |o| o.contains(&replica_port),
        )
        .await;

    let mut redis = RedisConfig::single("127.0.0.1", 0, 0);
    redis.password = RedisPassword::from_text("pw");
    redis.topology = RedisTopology::Sentinel {
        master: "mymaster".into(),
        sentinels: vec![node(sentinel)],
    };
    let bed = testbed().await;
    let one = strata(&bed, store_config(redis.clone())).await;
    let two = strata(&bed, store_config(redis)).await;
    assert!(!keyed(&one, "ok", "before", 1).await);
    assert!(keyed(&two, "ok", "before", 2).await);
    // Replication is asynchronous: the record must be on the replica before it is promoted.
    servers
        .cli_until(master, &["WAIT", "1", "1000"], LIMIT, |o| o.trim() == "1")
        .await;

    servers
        .cli_until(
            sentinel,
            &["SENTINEL", "FAILOVER", "mymaster"],
            LIMIT,
            |o| o.contains("OK"),
        )
        .await;
    servers
        .cli_until(
            sentinel,
            &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"],
            FAILOVER_LIMIT,
            |o| o.contains(&replica_port),
        )
        .await;
    // The old master is demoted (and its clients disconnected) once the sentinel sees it.
    servers
        .cli_until(master, &["ROLE"], FAILOVER_LIMIT, |o| {
            o.starts_with("slave")
        })
        .await;
    until_store_answers(&one, "one", LIMIT).await;
    until_store_answers(&two, "two", LIMIT).await;

    // The key claimed before the failover is honoured after it, on both replicas.
    assert!(keyed(&one, "ok", "before", 3).await);
    assert!(keyed(&two, "ok", "before", 4).await);
    assert_eq!(bed.testbed.calls_of("ok"), 1, "no second execution");
    // And the new master takes new keys.
    assert!(!keyed(&two, "ok", "after", 5).await);
    assert!(keyed(&one, "ok", "after", 6).await);
    assert_eq!(bed.testbed.calls_of("ok"), 2);
}

#[tokio::test]
async fn cluster_spreads_keys_over_its_masters() {
    let Some(mut servers) = Servers::new("cluster") else {
        return;
    };
    let mut ports = Vec::new();
    for i in 0..3 {
        let bus = support::redis::free_port().to_string();
        let nodes_file = format!("nodes-{i}.conf");
        let args = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            &nodes_file,
            "--cluster-port",
            &bus,
        ];
        ports.push(servers.start(&format!("node{i}"), None, &args).await);
    }
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let mut create = vec!["--cluster", "create"];
    create.extend(addrs.iter().map(String::as_str));
    create.push("--cluster-yes");
    let out = servers.cli(ports[0], &create);
    assert!(out.contains("All 16384 slots covered"), "{out}");
    for port in &ports {
        servers
            .cli_until(*port, &["CLUSTER", "INFO"], LIMIT, |o| {
                o.contains("cluster_state:ok")
            })
            .await;
    }

    let mut redis = RedisConfig::single("127.0.0.1", ports[0], 0);
    redis.topology = RedisTopology::Cluster(ports.iter().map(|p| node(*p)).collect());
    let bed = testbed().await;
    let one = strata(&bed, store_config(redis.clone())).await;
    let two = strata(&bed, store_config(redis)).await;
    until_store_answers(&one, "one", LIMIT).await;
    for n in 0..12 {
        let key = format!("order-{n}");
        assert!(!keyed(&one, "ok", &key, 1).await, "{key}");
        assert!(keyed(&two, "ok", &key, 2).await, "{key}");
    }
    assert_eq!(bed.testbed.calls_of("ok"), 12);
    // One key per record: the records landed on every master.
    for port in &ports {
        let keys = servers.cli(*port, &["DBSIZE"]);
        let keys: u64 = keys.trim().parse().unwrap();
        assert!(keys > 0, "no keys on the master at {port}");
    }
}
