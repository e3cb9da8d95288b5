//! The paths part (`--only paths`): every path an operator runs, each through strata, through
//! nginx configured to do the same job, and — where a layer-4 proxy can do it — through HAProxy
//! in TCP mode, the floor: what moving the bytes costs with no HTTP in between. At 1 and 64
//! agents, JSON tools/call to the fixed upstream unless said otherwise, interleaved round by
//! round as every load, beside the direct connection (plain HTTP/1.1 to the plain upstream) for
//! the added latency.
//!
//! The proxies' listeners ([`Front`]): strata runs four processes (plain TCP, serving HTTP/1.1
//! and h2 with prior knowledge on one port and recording keyed calls' answers on its memory
//! store; TLS, h2 or HTTP/1.1 by ALPN; plain TCP to an `https://` upstream; plain TCP
//! re-sending keyed calls the upstream answers 503), nginx one process with a server for each,
//! HAProxy one process with a frontend for each it can serve.
//! Every TLS connection, the agents' and the upstreams', is [`tls::SUITE`]. With `--baseline`,
//! that build runs beside strata on the plain front (`base`).

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;
use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::Plan;
use crate::keys;
use crate::load::TOOLS_CALL;
use crate::measure::{self, LoadSpec};
use crate::procs::{self, NGINX_PROXY, NginxCache, Proc, Target};
use crate::run::Part;
use crate::tls::{self, Cert};
use crate::upstream::TOOLS_LIST_BYTES;
use crate::wire::Wire;

/// Every proxy's name: the targets whose calls carry a key on the keyed paths (the baseline
/// build too, so that its figures there are of keyed calls).
const PROXIES: &[&str] = &["nginx", "haproxy", "strata", "base"];

/// The targets that record keyed calls' answers on [`Front::Keyed`] and replay a repeat
/// (HAProxy only forwards the field).
const RECORDING: &[&str] = &["nginx", "strata", "base"];

/// The request body of the `large body` path: past strata's replay buffer
/// (`retry.replay_buffer`, 64 KiB by default), so the body streams to the upstream.
const LARGE_BODY: usize = 256 << 10;
const TOOLS_LIST: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
/// The 2025-era form of a call: a session's id and an earlier protocol version (what
/// [`crate::load::request`] sends besides is the stateless 2026-07-28 form).
const SESSION_FORM: &[(&str, &str)] = &[
    ("mcp-protocol-version", "2025-11-25"),
    ("mcp-session-id", "bench-3f2a9c1e7b5d4e60"),
];

/// A proxy's listener a path goes through.
#[derive(Clone, Copy, PartialEq)]
enum Front {
    /// Plain TCP, HTTP/1.1, to the plain upstream.
    Plain,
    /// Plain TCP, h2 with prior knowledge, to the plain upstream (strata: the plain port).
    H2c,
    /// TLS, h2 or HTTP/1.1 by ALPN, to the plain upstream.
    Tls,
    /// Plain TCP, HTTP/1.1, to the TLS upstream (`https://`).
    ToTls,
    /// Plain TCP, HTTP/1.1, to the plain upstream, recording each keyed call's answer to replay
    /// a repeat (strata: the plain process, its memory store; nginx: [`KEYED_LOCATION`]).
    Keyed,
    /// Plain TCP, HTTP/1.1, to the plain upstream, re-sending a call the upstream answers 503
    /// (strata: keyed calls retried, `idempotency.upstream_honours_keys`; nginx:
    /// `proxy_next_upstream http_503`).
    Retry,
}

/// How the agents speak, on the proxies' side.
#[derive(Clone, Copy)]
enum Agent {
    H1,
    H2c,
    TlsH1,
    TlsH2,
}

/// One path: what the agents send, and how.
struct PathSpec {
    name: &'static str,
    url: &'static str,
    body: Bytes,
    extra: &'static [(&'static str, &'static str)],
    /// The targets whose calls carry a fresh `Idempotency-Key`.
    keyed: &'static [&'static str],
    front: Front,
    agent: Agent,
    /// Why HAProxy in TCP mode cannot do this path's job (`None`: it can).
    no_floor: Option<&'static str>,
}

fn paths() -> Vec<PathSpec> {
    let call = Bytes::from_static(TOOLS_CALL);
    let path = |name, url, body: &Bytes, front, agent, no_floor| PathSpec {
        name,
        url,
        body: body.clone(),
        extra: &[],
        keyed: &[],
        front,
        agent,
        no_floor,
    };
    let h2_floor = Some("h2 agents, an HTTP/1.1 upstream: a layer-4 proxy cannot translate");
    let no_status = Some("a layer-4 proxy does not read the status: it cannot re-send");
    vec![
        path("json", "/json", &call, Front::Plain, Agent::H1, None),
        path("sse", "/sse", &call, Front::Plain, Agent::H1, None),
        PathSpec {
            extra: SESSION_FORM,
            ..path("json 2025", "/json", &call, Front::Plain, Agent::H1, None)
        },
        PathSpec {
            keyed: PROXIES,
            ..path("keyed json", "/json", &call, Front::Keyed, Agent::H1, None)
        },
        PathSpec {
            // Direct sends no key: the upstream answers it at once, the added latency is the
            // proxy's with its retry.
            keyed: PROXIES,
            ..path(
                "retry 503",
                "/flaky",
                &call,
                Front::Retry,
                Agent::H1,
                no_status,
            )
        },
        path("h2c json", "/json", &call, Front::H2c, Agent::H2c, h2_floor),
        path(
            "tls h1 json",
            "/json",
            &call,
            Front::Tls,
            Agent::TlsH1,
            None,
        ),
        path(
            "tls h2 json",
            "/json",
            &call,
            Front::Tls,
            Agent::TlsH2,
            h2_floor,
        ),
        path(
            "https-up json",
            "/json",
            &call,
            Front::ToTls,
            Agent::H1,
            None,
        ),
        path(
            "large body",
            "/json",
            &large_body(),
            Front::Plain,
            Agent::H1,
            None,
        ),
        path(
            "tools/list 4m",
            "/tools_list",
            &Bytes::from_static(TOOLS_LIST),
            Front::Plain,
            Agent::H1,
            None,
        ),
        path(
            "tools/list 4m changing",
            "/tools_list?changing=1",
            &Bytes::from_static(TOOLS_LIST),
            Front::Plain,
            Agent::H1,
            None,
        ),
        path(
            "tools/list 4m changing at start",
            "/tools_list?changing=start",
            &Bytes::from_static(TOOLS_LIST),
            Front::Plain,
            Agent::H1,
            None,
        ),
    ]
}

/// A tools/call whose argument makes the body [`LARGE_BODY`] bytes.
fn large_body() -> Bytes {
    let head = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ok","arguments":{"query":""#;
    let tail = r#""}}}"#;
    let fill = LARGE_BODY.saturating_sub(head.len() + tail.len());
    Bytes::from(format!("{head}{}{tail}", "q".repeat(fill)))
}

/// One proxy's listeners (those it has), each with the processes serving it: metered.
struct Fronts {
    name: &'static str,
    addrs: Vec<(Front, SocketAddr, Vec<u32>)>,
}

impl Fronts {
    fn target(&self, front: Front) -> Option<Target> {
        let (_, addr, pids) = self.addrs.iter().find(|(f, _, _)| *f == front)?;
        Some(Target {
            name: self.name,
            addr: *addr,
            pids: pids.clone(),
            admin: None,
        })
    }

    /// Every front served by the same processes.
    fn shared(name: &'static str, addrs: &[(Front, SocketAddr)], pids: &[u32]) -> Fronts {
        Fronts {
            name,
            addrs: addrs.iter().map(|(f, a)| (*f, *a, pids.to_vec())).collect(),
        }
    }
}

/// The part's upstreams, plain and TLS.
struct Ups {
    plain: SocketAddr,
    tls: SocketAddr,
}

pub(crate) fn run(part: Part<'_>) -> anyhow::Result<Value> {
    let (rt, plan, scratch, ticks_per_s) = (part.rt, part.plan, part.scratch, part.ticks_per_s);
    let dir = scratch.path().join("paths");
    std::fs::create_dir_all(&dir)?;
    let cert = tls::cert(&dir)?;
    let (_up_proc, plain) = procs::upstream(false)?;
    let (_tls_up_proc, tls_up) = procs::upstream(true)?;
    let ups = Ups { plain, tls: tls_up };
    // nginx's recorded answers: removed after nginx has ended (declared before it).
    let nginx_keys = procs::Scratch::in_memory("nginx-keys")?;
    // Dropped before the upstreams (declared after them): the proxies first.
    let mut procs: Vec<Proc> = Vec::new();
    let fronts = start(plan, &dir, nginx_keys.path(), &cert, &ups, &mut procs)?;
    std::thread::sleep(std::time::Duration::from_millis(500));
    let wires = Wires::new(&cert)?;
    let mut loads = Map::new();
    let mut described = Map::new();
    let mut replayed = Map::new();
    let chosen = paths()
        .into_iter()
        .filter(|p| plan.paths.is_empty() || plan.paths.iter().any(|n| n == p.name));
    for path in chosen {
        described.insert(path.name.into(), describe(&path));
        let (targets, ws) = targets(plan, &fronts, &ups, &wires, &path);
        for agents in [1, 64] {
            let spec = LoadSpec {
                upstream: "paths",
                kind: path.name,
                agents,
                path: path.url,
                body: path.body.clone(),
                keyed: path.keyed,
            };
            let figures =
                measure::load_on(rt, plan, &targets, &ws, path.extra, &spec, ticks_per_s)?;
            loads.insert(spec.name(), figures);
        }
        if path.front == Front::Keyed {
            replayed.insert(path.name.into(), replays(rt, &targets)?);
        }
    }
    drop(procs);
    Ok(json!({
        "tls": tls::SUITE,
        "large_body_bytes": LARGE_BODY,
        "tools_list_bytes": TOOLS_LIST_BYTES,
        "haproxy": plan.haproxy.exists().then(|| haproxy_version(&plan.haproxy)),
        "paths": described,
        "replayed": replayed,
        "load": loads,
    }))
}

/// The front ends: nginx's and HAProxy's (none in training, nor HAProxy's when it is not
/// installed), then strata's.
fn start(
    plan: &Plan,
    dir: &Path,
    keys: &Path,
    cert: &Cert,
    ups: &Ups,
    procs: &mut Vec<Proc>,
) -> anyhow::Result<Vec<Fronts>> {
    let mut fronts = Vec::new();
    if !plan.train {
        fronts.push(nginx(plan, dir, keys, cert, ups, procs)?);
        if plan.haproxy.exists() {
            fronts.push(haproxy(plan, dir, cert, ups, procs)?);
        } else {
            eprintln!(
                "paths: {} not found: no HAProxy rows (apt-get install haproxy)",
                plan.haproxy.display()
            );
        }
    }
    fronts.push(strata(plan, dir, cert, ups, procs)?);
    if let (Some(bin), false) = (&plan.baseline, plan.train) {
        fronts.push(base(bin, dir, ups, procs)?);
    }
    Ok(fronts)
}

/// After a recording path's loads, a fresh key sent twice through each proxy that records
/// ([`keys::replays`]): the second answer must be replayed, so that the figures are of the job
/// and the store still takes keys once the load has filled it. HAProxy forwards the field and
/// direct sends none: neither is asked.
fn replays(rt: &tokio::runtime::Runtime, targets: &[Target]) -> anyhow::Result<Value> {
    let mut replayed = Map::new();
    for t in targets.iter().filter(|t| RECORDING.contains(&t.name)) {
        let again =
            keys::replays(rt, t).with_context(|| format!("{}: a key sent twice", t.name))?;
        anyhow::ensure!(again, "{}: a key sent twice was not replayed", t.name);
        replayed.insert(t.name.into(), again.into());
    }
    Ok(Value::Object(replayed))
}

/// The baseline build (`--baseline`) on the plain front only (HTTP/1.1 and h2 with prior
/// knowledge to the plain upstream), strata's plain config: beside strata on those paths.
fn base(bin: &Path, dir: &Path, ups: &Ups, procs: &mut Vec<Proc>) -> anyhow::Result<Fronts> {
    let url = format!("http://{}", ups.plain);
    let (p, t) = procs::strata("base", bin, &url, dir, "paths-base", "")?;
    procs.push(p);
    Ok(Fronts::shared(
        "base",
        &[
            (Front::Plain, t.addr),
            (Front::H2c, t.addr),
            (Front::Keyed, t.addr),
        ],
        &t.pids,
    ))
}

/// A path's targets and the wire each one's agents speak: direct (not in training), then
/// every front end serving the path's front — HAProxy's only where it can do the job.
fn targets(
    plan: &Plan,
    fronts: &[Fronts],
    ups: &Ups,
    wires: &Wires,
    path: &PathSpec,
) -> (Vec<Target>, Vec<Wire>) {
    let mut targets = Vec::new();
    let mut ws = Vec::new();
    if !plan.train {
        targets.push(Target {
            name: "direct",
            addr: ups.plain,
            pids: Vec::new(),
            admin: None,
        });
        ws.push(Wire::H1);
    }
    let floors = path.no_floor.is_none();
    let serving = fronts.iter().filter(|f| floors || f.name != "haproxy");
    for t in serving.filter_map(|f| f.target(path.front)) {
        targets.push(t);
        ws.push(wires.get(path.agent));
    }
    (targets, ws)
}

/// What a path sends and through which listener, for the report.
fn describe(p: &PathSpec) -> Value {
    let agent = match p.agent {
        Agent::H1 => "HTTP/1.1",
        Agent::H2c => "h2 (prior knowledge)",
        Agent::TlsH1 => "TLS, HTTP/1.1 by ALPN",
        Agent::TlsH2 => "TLS, h2 by ALPN",
    };
    let upstream = if p.front == Front::ToTls {
        "https://"
    } else {
        "http://"
    };
    json!({
        "agent": agent,
        "upstream": upstream,
        "url": p.url,
        "request_bytes": p.body.len(),
        "fields": p.extra.iter().map(|(n, v)| format!("{n}: {v}")).collect::<Vec<_>>(),
        "keyed": p.keyed,
        "no_floor": p.no_floor,
    })
}

/// The agents' four ways to speak.
struct Wires {
    tls_h1: Wire,
    tls_h2: Wire,
}

impl Wires {
    fn new(cert: &Cert) -> anyhow::Result<Wires> {
        Ok(Wires {
            tls_h1: Wire::Tls {
                config: cert.client(b"http/1.1")?,
                h2: false,
            },
            tls_h2: Wire::Tls {
                config: cert.client(b"h2")?,
                h2: true,
            },
        })
    }

    fn get(&self, agent: Agent) -> Wire {
        match agent {
            Agent::H1 => Wire::H1,
            Agent::H2c => Wire::H2c,
            Agent::TlsH1 => self.tls_h1.clone(),
            Agent::TlsH2 => self.tls_h2.clone(),
        }
    }
}

fn port() -> anyhow::Result<SocketAddr> {
    Ok(([127, 0, 0, 1], procs::free_port()?).into())
}

/// strata's three processes: plain (HTTP/1.1 and h2 prior knowledge on one port), TLS, and
/// plain in front of the TLS upstream; the default config otherwise.
fn strata(
    plan: &Plan,
    dir: &Path,
    cert: &Cert,
    ups: &Ups,
    procs: &mut Vec<Proc>,
) -> anyhow::Result<Fronts> {
    let plain_url = format!("http://{}", ups.plain);
    let tls_yaml = format!(
        "tls: {{ cert_file: \"{}\", key_file: \"{}\" }}\n",
        cert.cert.display(),
        cert.key.display()
    );
    let to_tls = format!("https://{}", ups.tls);
    let mut addrs = Vec::new();
    for (fronts, url, tag, extra) in [
        (
            &[Front::Plain, Front::H2c, Front::Keyed][..],
            &plain_url,
            "paths-plain",
            String::new(),
        ),
        (&[Front::Tls][..], &plain_url, "paths-tls", tls_yaml),
        (
            &[Front::ToTls][..],
            &to_tls,
            "paths-to-tls",
            "upstream_tls: { insecure_skip_verify: true }\n".to_owned(),
        ),
        (
            &[Front::Retry][..],
            &plain_url,
            "paths-retry",
            // Every call is retried once: a budget that admits that.
            "idempotency: { upstream_honours_keys: true }\n\
             retry: { budget: { ratio: 2 } }\n"
                .to_owned(),
        ),
    ] {
        let (p, t) = procs::strata("strata", &plan.strata, url, dir, tag, &extra)?;
        addrs.extend(fronts.iter().map(|f| (*f, t.addr, t.pids.clone())));
        procs.push(p);
    }
    // Each path's rows meter only the process serving it: the others sit idle.
    Ok(Fronts {
        name: "strata",
        addrs,
    })
}

/// nginx's retrying location: the plain upstream listed twice, since nginx re-sends a request
/// only to the next server of a group (`max_fails=0`: a 503 never takes one out); a POST only
/// with `non_idempotent`; the request body read before it goes upstream
/// (`proxy_request_buffering on`), as strata reads a body into its replay buffer.
const RETRY_LOCATION: &str = "location / { proxy_pass http://up_twice; \
     proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_buffering off; \
     proxy_request_buffering on; proxy_read_timeout 300s; \
     proxy_next_upstream error timeout http_503 non_idempotent; proxy_next_upstream_tries 3; }";

/// nginx's recording location, its job as near strata's memory store as nginx comes: a cache
/// of POST answers (`keys`, [`keys_cache`]) keyed on the `Idempotency-Key` field and the body
/// (nginx hashes the two with MD5: a repeat with another body is not replayed — strata answers
/// it 422), calls without the field neither looked up nor stored, a repeat arriving while the
/// first is in flight held until its answer is stored (`proxy_cache_lock`), and a replayed
/// answer marked `idempotent-replayed: true`, as strata marks it, for the harness's check. The
/// answer is buffered to be stored (`proxy_buffering on`), as strata holds a keyed answer's
/// bytes for its record.
const KEYED_LOCATION: &str = "location / { proxy_pass http://up; \
     proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_read_timeout 300s; \
     proxy_buffering on; proxy_request_buffering on; \
     proxy_cache keys; proxy_cache_methods POST; \
     proxy_cache_key $http_idempotency_key$request_body; \
     proxy_cache_bypass $no_key; proxy_no_cache $no_key; proxy_cache_valid any 60m; \
     proxy_cache_lock on; \
     proxy_ignore_headers Cache-Control Expires Set-Cookie Vary X-Accel-Expires; \
     add_header Idempotent-Replayed $replayed; }";

/// The `http` block's part of [`KEYED_LOCATION`]: the cache's files under `dir` (on tmpfs
/// where the machine has one, [`procs::Scratch::in_memory`]), bounded as strata's memory store
/// is by default — 64 MiB of answers, an hour's life — and the two variables it reads. nginx's
/// cache manager trims the files to `max_size` when it wakes, seconds apart, so between two
/// trims a busy run stores far more keys than the bound: the key zone (64 MiB, ~500,000 keys)
/// holds them all, as a full zone fails calls with 500.
fn keys_cache(dir: &Path) -> String {
    format!(
        "\x20 proxy_cache_path {} levels=1:2 keys_zone=keys:64m max_size=64m inactive=60m \
         use_temp_path=off;\n\
         \x20 map $http_idempotency_key $no_key {{ \"\" 1; default 0; }}\n\
         \x20 map $upstream_cache_status $replayed {{ HIT true; default \"\"; }}\n",
        dir.display()
    )
}

/// nginx, one process: the plain server [`procs::nginx`] makes, and a server for each other
/// front — `listen … http2` (prior knowledge), `listen … ssl http2` (ALPN), a plain one whose
/// `proxy_pass https://` keeps TLS connections alive (`keepalive 64`,
/// `proxy_ssl_session_reuse on`, the certificate not verified, as strata's
/// `insecure_skip_verify`), a plain one that re-sends on 503 ([`RETRY_LOCATION`]), and a plain
/// one that records keyed calls' answers ([`KEYED_LOCATION`], its files under `keys`).
fn nginx(
    plan: &Plan,
    dir: &Path,
    keys: &Path,
    cert: &Cert,
    ups: &Ups,
    procs: &mut Vec<Proc>,
) -> anyhow::Result<Fronts> {
    let (h2c, tls, to_tls, retry) = (port()?, port()?, port()?, port()?);
    let keyed = port()?;
    let loc = |up: &str| format!("location / {{ proxy_pass {up}; {NGINX_PROXY} }}");
    let extra = format!(
        "\x20 upstream up_tls {{ server {tls_up}; keepalive 64; keepalive_requests 100000000; }}\n\
         \x20 upstream up_twice {{\n\
         \x20   server {up} max_fails=0; server {up} max_fails=0;\n\
         \x20   keepalive 64; keepalive_requests 100000000;\n\
         \x20 }}\n\
         \x20 server {{ listen {retry} backlog=8192; {retry_loc} }}\n\
         {keys_cache}\
         \x20 server {{ listen {keyed} backlog=8192; {keyed_loc} }}\n\
         \x20 server {{ listen {h2c} http2 backlog=8192; {plain} }}\n\
         \x20 server {{\n\
         \x20   listen {tls} ssl http2 backlog=8192;\n\
         \x20   ssl_certificate {crt}; ssl_certificate_key {key}; ssl_protocols TLSv1.3;\n\
         \x20   {plain}\n\
         \x20 }}\n\
         \x20 server {{\n\
         \x20   listen {to_tls} backlog=8192;\n\
         \x20   proxy_ssl_session_reuse on; proxy_ssl_protocols TLSv1.3; proxy_ssl_verify off;\n\
         \x20   {tls_loc}\n\
         \x20 }}\n",
        tls_up = ups.tls,
        plain = loc("http://up"),
        tls_loc = loc("https://up_tls"),
        up = ups.plain,
        retry_loc = RETRY_LOCATION,
        keys_cache = keys_cache(keys),
        keyed_loc = KEYED_LOCATION,
        crt = cert.cert.display(),
        key = cert.key.display(),
    );
    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let (p, t) = procs::nginx(
        &plan.nginx,
        ups.plain,
        dir,
        "paths",
        cores,
        &extra,
        NginxCache::Recording,
    )?;
    procs.push(p);
    let addrs = [
        (Front::Plain, t.addr),
        (Front::H2c, h2c),
        (Front::Tls, tls),
        (Front::ToTls, to_tls),
        (Front::Retry, retry),
        (Front::Keyed, keyed),
    ];
    Ok(Fronts::shared("nginx", &addrs, &t.pids))
}

/// HAProxy in TCP mode, one process: a frontend for each front a layer-4 proxy can serve —
/// plain, TLS terminated (the same certificate, ALPN `http/1.1` only: behind it is an HTTP/1.1
/// upstream), and TLS to the upstream (`ssl verify none`). One upstream connection per agent
/// connection, as long as it lives.
fn haproxy(
    plan: &Plan,
    dir: &Path,
    cert: &Cert,
    ups: &Ups,
    procs: &mut Vec<Proc>,
) -> anyhow::Result<Fronts> {
    let (plain, tls, to_tls) = (port()?, port()?, port()?);
    let sections = format!(
        "frontend plain\n  bind {plain}\n  default_backend up\n\
         frontend tls\n  bind {tls} ssl crt {bundle} alpn http/1.1 ssl-min-ver TLSv1.3\n  default_backend up\n\
         frontend to_tls\n  bind {to_tls}\n  default_backend up_tls\n\
         backend up\n  server up {up}\n\
         backend up_tls\n  server up {tls_up} ssl verify none alpn http/1.1 ssl-min-ver TLSv1.3\n",
        bundle = cert.bundle.display(),
        up = ups.plain,
        tls_up = ups.tls,
    );
    let p = procs::haproxy(&plan.haproxy, dir, &sections, plain)?;
    let pids = [p.pid()];
    procs.push(p);
    let addrs = [
        (Front::Plain, plain),
        (Front::Keyed, plain),
        (Front::Tls, tls),
        (Front::ToTls, to_tls),
    ];
    Ok(Fronts::shared("haproxy", &addrs, &pids))
}

fn haproxy_version(bin: &Path) -> String {
    std::process::Command::new(bin)
        .arg("-v")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_default()
}
