//! Config reload (SIGHUP, or a change to a watched file, in `main`): a new config is swapped
//! in without dropping the listener; a bad one is refused and counted, and the old one stays
//! in force. The watch is tested on strata as its own process, by changing its files as an
//! editor, an atomic writer and Kubernetes do.
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use strata::app::start;
use strata::config::{Config, Overrides, Upstream};
use strata::testbed::Testbed;

use crate::support::process::{StrataProcess, free_addr, scratch};

async fn call_ok(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    at: std::net::SocketAddr,
) -> u16 {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ok","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let request = http::Request::post(format!("http://{at}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), client.request(request))
        .await
        .unwrap()
        .unwrap();
    let status = response.status().as_u16();
    let _ = response.into_body().collect().await;
    status
}

#[tokio::test]
async fn reload_swaps_the_upstream_and_refuses_bad_configs() {
    let (a, bed_a, _ha) = Testbed::spawn_local().await.unwrap();
    let (b, bed_b, _hb) = Testbed::spawn_local().await.unwrap();
    let mut config =
        Config::default_with_upstream(Upstream::parse(&format!("http://{a}")).unwrap());
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.admin = "127.0.0.1:0".parse().unwrap();
    let running = start(&config).await.unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http();

    assert_eq!(call_ok(&client, running.listen).await, 200);
    assert_eq!((bed_a.calls_of("ok"), bed_b.calls_of("ok")), (1, 0));

    config.upstream = Upstream::parse(&format!("http://{b}")).unwrap();
    running.reload(&config).unwrap();
    // On the same pooled agent connection, which keeps a copy of the proxy (`ProxyCache`):
    // the reload must reach it too.
    assert_eq!(call_ok(&client, running.listen).await, 200);
    assert_eq!(
        (bed_a.calls_of("ok"), bed_b.calls_of("ok")),
        (1, 1),
        "the new upstream answered"
    );

    // A bad file never reaches `reload`: it is refused where it is parsed, and counted.
    let bad = Config::parse("upstream: ftp://nope\n", "bad.yaml", &Overrides::default());
    assert!(bad.is_err());
    running.reload_refused();
    assert_eq!(call_ok(&client, running.listen).await, 200);
    assert_eq!(bed_b.calls_of("ok"), 2, "the old config stays in force");

    let text = running.metrics.render();
    assert!(
        text.contains("strata_config_reloads_total{result=\"ok\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("strata_config_reloads_total{result=\"error\"} 1"),
        "{text}"
    );
    running.stop().await;
}

// === the file watch ===

const RELOADED: &str = "strata_config_reloads_total{result=\"ok\"}";
const REFUSED: &str = "strata_config_reloads_total{result=\"error\"}";

/// Longer than the watch takes to see a change and act on it (a look every second, then
/// 250 ms of quiet): what a test waits before it says nothing happened.
const WATCH_QUIET: Duration = Duration::from_millis(2500);

/// Two testbeds, and strata from `dir/config.yaml` (as `write` puts it there) in front of
/// the first, with `args`.
struct Watched {
    strata: StrataProcess,
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    beds: [std::sync::Arc<Testbed>; 2],
    yaml: [String; 2],
    _handles: Vec<strata::testbed::TestbedHandle>,
}

impl Watched {
    async fn start(
        dir: &std::path::Path,
        extra: &str,
        args: &[&str],
        write: impl FnOnce(&str),
    ) -> Watched {
        let (a, bed_a, ha) = Testbed::spawn_local().await.unwrap();
        let (b, bed_b, hb) = Testbed::spawn_local().await.unwrap();
        let (listen, admin) = (free_addr(), free_addr());
        let yaml = [a, b].map(|up| {
            format!("listen: {listen}\nadmin: {admin}\nworkers: 1\nupstream: http://{up}\n{extra}")
        });
        write(&yaml[0]);
        let strata = StrataProcess::start(&dir.join("config.yaml"), listen, admin, args).await;
        let watched = Watched {
            strata,
            client: Client::builder(TokioExecutor::new()).build_http(),
            beds: [bed_a, bed_b],
            yaml,
            _handles: vec![ha, hb],
        };
        watched.assert_serves(0).await;
        watched
    }

    /// A call through strata reaches testbed `which` (0 or 1).
    async fn assert_serves(&self, which: usize) {
        let before = self.beds[which].calls_of("ok");
        assert_eq!(call_ok(&self.client, self.strata.listen).await, 200);
        assert_eq!(
            self.beds[which].calls_of("ok"),
            before + 1,
            "testbed {which}"
        );
    }

    /// Waits for the reload a change asked for, checks it was the only one, and that the
    /// second testbed serves now.
    async fn assert_one_reload_to_the_second(&mut self) {
        self.strata.wait_counter(RELOADED, 1).await;
        self.assert_serves(1).await;
        tokio::time::sleep(WATCH_QUIET).await;
        assert_eq!(
            self.strata.counter(RELOADED).await,
            1,
            "one change, one reload"
        );
        assert_eq!(self.strata.counter(REFUSED).await, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_in_place_reloads_once() {
    let dir = scratch("watch_edit");
    let file = dir.join("config.yaml");
    let mut w = Watched::start(&dir, "", &[], |yaml| std::fs::write(&file, yaml).unwrap()).await;
    // A burst longer than the watch's look interval: the file truncated, then written in
    // pieces, as a slow writer may. Whenever the watch looks, it must wait for the end.
    let new = w.yaml[1].clone();
    let pieces = new.as_bytes().chunks(new.len().div_ceil(25));
    let mut out = std::fs::File::create(&file).unwrap();
    for piece in pieces {
        std::io::Write::write_all(&mut out, piece).unwrap();
        out.sync_data().unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(out);
    w.assert_one_reload_to_the_second().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_renamed_over_the_config_reloads() {
    let dir = scratch("watch_rename");
    let file = dir.join("config.yaml");
    let mut w = Watched::start(&dir, "", &[], |yaml| std::fs::write(&file, yaml).unwrap()).await;
    let tmp = dir.join(".config.yaml.tmp");
    std::fs::write(&tmp, &w.yaml[1]).unwrap();
    std::fs::rename(&tmp, &file).unwrap();
    w.assert_one_reload_to_the_second().await;
}

/// A ConfigMap volume: `config.yaml -> ..data/config.yaml`, `..data -> ..<version>`; an
/// update writes a new version directory and renames a new `..data` link over the old one.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_symlink_swap_reloads() {
    use std::os::unix::fs::symlink;
    let dir = scratch("watch_configmap");
    let version = |name: &str, yaml: &str| {
        std::fs::create_dir(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("config.yaml"), yaml).unwrap();
    };
    let mut w = Watched::start(&dir, "", &[], |yaml| {
        version("..2026_01_01_00_00_00.1", yaml);
        symlink("..2026_01_01_00_00_00.1", dir.join("..data")).unwrap();
        symlink("..data/config.yaml", dir.join("config.yaml")).unwrap();
    })
    .await;
    version("..2026_01_01_00_01_00.2", &w.yaml[1]);
    symlink("..2026_01_01_00_01_00.2", dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(dir.join("..2026_01_01_00_00_00.1")).unwrap();
    w.assert_one_reload_to_the_second().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_edit_is_refused_and_counted_and_the_old_config_serves() {
    let dir = scratch("watch_bad");
    let file = dir.join("config.yaml");
    let mut w = Watched::start(&dir, "", &[], |yaml| std::fs::write(&file, yaml).unwrap()).await;
    let bad = w.yaml[1].replace("upstream: http://", "upstream: ftp://");
    std::fs::write(&file, bad).unwrap();
    w.strata.wait_counter(REFUSED, 1).await;
    assert_eq!(w.strata.counter(RELOADED).await, 0);
    w.assert_serves(0).await;
    // Fixed, it is picked up.
    std::fs::write(&file, &w.yaml[1]).unwrap();
    w.strata.wait_counter(RELOADED, 1).await;
    w.assert_serves(1).await;
    assert_eq!(w.strata.counter(REFUSED).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_certificate_file_reloads() {
    let dir = scratch("watch_tls");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let issue = || {
        let pair = rcgen::generate_simple_self_signed(["127.0.0.1".to_owned()]).unwrap();
        std::fs::write(&cert, pair.cert.pem()).unwrap();
        std::fs::write(&key, pair.signing_key.serialize_pem()).unwrap();
    };
    issue();
    let tls = "tls: {cert_file: cert.pem, key_file: key.pem}\n";
    let file = dir.join("config.yaml");
    let (listen, admin) = (free_addr(), free_addr());
    let yaml = format!("listen: {listen}\nadmin: {admin}\nupstream: http://127.0.0.1:9\n{tls}");
    std::fs::write(&file, yaml).unwrap();
    let mut strata = StrataProcess::start(&file, listen, admin, &[]).await;
    issue();
    strata.wait_counter(RELOADED, 1).await;
    tokio::time::sleep(WATCH_QUIET).await;
    assert_eq!(strata.counter(RELOADED).await, 1, "a new pair, one reload");
    assert_eq!(strata.counter(REFUSED).await, 0);
}

/// Off (by the flag or by the file), an edit is not picked up; SIGHUP still is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watching_off_leaves_reloads_to_sighup() {
    for (name, extra, args) in [
        ("watch_off_flag", "", &["--watch-config=false"][..]),
        ("watch_off_key", "watch_config: false\n", &[]),
    ] {
        let dir = scratch(name);
        let file = dir.join("config.yaml");
        let write = |yaml: &str| std::fs::write(&file, yaml).unwrap();
        let mut w = Watched::start(&dir, extra, args, write).await;
        std::fs::write(&file, &w.yaml[1]).unwrap();
        tokio::time::sleep(WATCH_QUIET).await;
        assert_eq!(w.strata.counter(RELOADED).await, 0, "{name}: not watched");
        w.assert_serves(0).await;
        w.strata.hangup();
        w.strata.wait_counter(RELOADED, 1).await;
        w.assert_serves(1).await;
    }
}
