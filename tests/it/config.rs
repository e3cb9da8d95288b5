//! Config loading end to end: YAML text in, typed `Config` or exact `FILE:LINE:COL: message`
//! lines out.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test helpers outside #[test] fns: a failure there should fail the test"
)]
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use strata::cli::{EXIT_CONFIG_INVALID, check_config};
use strata::config::{
    Config, ConfigErrors, HostHeader, LogFormat, OtelEnv, OtlpProtocol, Overrides, Position,
    Propagate, RedisConfig, RedisNode, RedisTopology, SamplerConfig, Scheme, SpanBatching,
    StoreKind, TelemetryConfig, TlsRoots, Upstream,
};

const MINIMAL: &str = "upstream: http://127.0.0.1:8000\n";

fn parse(text: &str) -> Result<Config, ConfigErrors> {
    Config::parse(text, "t.yaml", &Overrides::default())
}

/// The errors for `text`, one rendered line each.
fn errors(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(config) => panic!("expected errors, got {config:#?}"),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

fn upstream(text: &str) -> Upstream {
    Upstream::parse(text).unwrap()
}

/// A fresh directory for files this test writes.
fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn minimal_config_is_all_defaults() {
    let config = parse(MINIMAL).unwrap();
    assert_eq!(
        config,
        Config::default_with_upstream(upstream("http://127.0.0.1:8000"))
    );
    assert_eq!(config.listen, "127.0.0.1:7000".parse().unwrap());
    assert_eq!(config.admin, "127.0.0.1:9464".parse().unwrap());
    assert_eq!(config.upstream.scheme, Scheme::Http);
    assert_eq!(config.upstream.authority.as_str(), "127.0.0.1:8000");
    assert_eq!(config.host_header, HostHeader::Preserve);
    assert_eq!(config.upstream_tls.roots, TlsRoots::Webpki);
    assert_eq!(config.timeouts.connect, Duration::from_secs(5));
    assert_eq!(config.timeouts.response_head, Duration::from_secs(300));
    assert_eq!(config.timeouts.body_idle, None);
    assert_eq!(config.log.format, LogFormat::Json);
    assert_eq!(config.log.level, "info");
    assert_eq!(config.metrics.max_tools, 200);
    assert_eq!(config.limits.request_inspect_bytes, 1_048_576);
    assert_eq!(config.limits.max_header_bytes, 65_536);
}

/// The example file documents every setting at its default; if a default changes in code but
/// not in the example (or the other way round), this fails.
#[test]
fn example_file_lists_the_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/strata.yaml");
    let config = Config::load(&path).unwrap();
    assert_eq!(
        config,
        Config::default_with_upstream(upstream("http://127.0.0.1:8000"))
    );
}

#[test]
fn empty_sections_mean_defaults() {
    let text = "upstream: http://h:1\ntimeouts:\nlog:\nmetrics: {}\n";
    assert_eq!(
        parse(text).unwrap(),
        Config::default_with_upstream(upstream("http://h:1"))
    );
}

#[test]
fn every_setting_is_read() {
    let text = "\
listen: 0.0.0.0:7001
upstream: https://mcp.example.com
admin: '[::1]:9000'
host_header: upstream
upstream_tls: {roots: native, insecure_skip_verify: true}
timeouts:
  connect: 250ms
  response_head: 2m
  body_idle: 1h
  resume_window: 0s
  header_read: 1s
  drain: 0s
log: {format: pretty, level: 'strata=debug,hyper=warn', error_messages: true}
metrics: {max_tools: 1, max_methods: 1000}
limits: {request_inspect_bytes: 1048576, max_header_bytes: 8KiB}
";
    let c = parse(text).unwrap();
    assert_eq!(c.listen, "0.0.0.0:7001".parse().unwrap());
    assert_eq!(c.upstream.scheme, Scheme::Https);
    assert_eq!(c.upstream.port(), 443);
    assert_eq!(c.admin, "[::1]:9000".parse().unwrap());
    assert_eq!(c.host_header, HostHeader::Upstream);
    assert_eq!(c.upstream_tls.roots, TlsRoots::Native);
    assert!(c.upstream_tls.insecure_skip_verify);
    assert_eq!(c.upstream_tls.ca_file, None);
    assert_eq!(c.timeouts.connect, Duration::from_millis(250));
    assert_eq!(c.timeouts.response_head, Duration::from_secs(120));
    assert_eq!(c.timeouts.body_idle, Some(Duration::from_secs(3600)));
    assert_eq!(c.timeouts.resume_window, Duration::ZERO);
    assert_eq!(c.timeouts.header_read, Duration::from_secs(1));
    assert_eq!(c.timeouts.drain, Duration::ZERO);
    assert_eq!(c.log.format, LogFormat::Pretty);
    assert_eq!(c.log.level, "strata=debug,hyper=warn");
    assert!(c.log.error_messages);
    assert_eq!(c.metrics.max_tools, 1);
    assert_eq!(c.metrics.max_methods, 1000);
    assert_eq!(c.limits.request_inspect_bytes, 1_048_576);
    assert_eq!(c.limits.max_header_bytes, 8192);
}

#[test]
fn sizes() {
    let cases = [
        ("1MiB", 1_048_576),
        ("64KiB", 65_536),
        ("4096", 4096),
        ("'4096'", 4096),
        ("512B", 512),
        ("1GiB", 1 << 30),
    ];
    for (size, want) in cases {
        let text = format!("{MINIMAL}limits: {{request_inspect_bytes: {size}}}\n");
        let config = parse(&text).unwrap();
        assert_eq!(config.limits.request_inspect_bytes, want, "{size}");
    }
}

#[test]
fn durations() {
    let cases = [
        ("250ms", Some(Duration::from_millis(250))),
        ("5s", Some(Duration::from_secs(5))),
        ("2m", Some(Duration::from_secs(120))),
        ("1h", Some(Duration::from_secs(3600))),
        // YAML 1.1 would read a bare `off` as false; we read it as the word.
        ("off", None),
        ("'off'", None),
        ("0s", None),
        ("0ms", None),
    ];
    for (duration, want) in cases {
        let text = format!("{MINIMAL}timeouts: {{body_idle: {duration}}}\n");
        let config = parse(&text).unwrap();
        assert_eq!(config.timeouts.body_idle, want, "{duration}");
    }
}

/// One bad value per case, with the exact line the user sees.
#[test]
fn single_errors_with_positions() {
    let cases = [
        // Unknown keys, top level and nested (serde-saphyr's message, our key path).
        (
            "upstream: http://h:1\nlisen: 1\n",
            "t.yaml:2:1: unknown field `lisen`, expected one of listen, upstream, admin, \
             workers, host_header, upstream_tls, tls, timeouts, log, metrics, limits, circuit, retry, tools, \
             trust_annotations, idempotency, origins, telemetry, inspector, capture, \
             watch_config",
        ),
        (
            "upstream: http://h:1\ntimeouts:\n  connect: 5s\n  conect: 1s\n",
            "t.yaml:4:3: timeouts: unknown field `conect`, expected one of connect, \
             response_head, body_idle, resume_window, header_read, drain, sse_keepalive, request_body_idle",
        ),
        // Wrong types.
        (
            "upstream: http://h:1\nlog:\n  error_messages: maybe\n",
            "t.yaml:3:19: log.error_messages: invalid boolean",
        ),
        (
            "upstream: http://h:1\ntimeouts: 5s\n",
            "t.yaml:2:11: timeouts: expected a mapping of keys to values",
        ),
        (
            "upstream: [http://h:1]\n",
            "t.yaml:1:11: upstream: expected a single value, not a list or mapping",
        ),
        (
            "upstream: http://h:1\nmetrics: {max_tools: [1]}\n",
            "t.yaml:2:22: metrics.max_tools: expected a single value, not a list or mapping",
        ),
        (
            "- upstream\n",
            "t.yaml:1:1: expected a mapping of keys to values",
        ),
        // YAML that is not even a document, and duplicate keys.
        ("upstream: 'http://h:1\n", "t.yaml:1:11: unclosed quote"),
        (
            "upstream: http://h:1\nupstream: http://h:2\n",
            "t.yaml:2:1: duplicate mapping key `upstream` is not allowed here",
        ),
        // Semantic errors.
        (
            "upstream: http://h:1\ntimeouts:\n  connect: 5 parsecs\n",
            "t.yaml:3:12: timeouts.connect: invalid duration \"5 parsecs\"; \
             expected e.g. 250ms, 5s, 2m, 1h",
        ),
        (
            "upstream: http://h:1\ntimeouts: {connect: off}\n",
            "t.yaml:2:21: timeouts.connect: must be greater than zero, got \"off\"",
        ),
        (
            "upstream: http://h:1/mcp\n",
            "t.yaml:1:11: upstream: URL \"http://h:1/mcp\" has a path; request paths pass \
             through verbatim, so give only scheme://host:port",
        ),
        (
            "upstream: http://h:1?x=1\n",
            "t.yaml:1:11: upstream: URL \"http://h:1?x=1\" has a query; request paths pass \
             through verbatim, so give only scheme://host:port",
        ),
        (
            "upstream: ftp://h:1\n",
            "t.yaml:1:11: upstream: unsupported scheme \"ftp\" in \"ftp://h:1\"; \
             expected http or https",
        ),
        (
            "upstream: 127.0.0.1:8000\n",
            "t.yaml:1:11: upstream: URL \"127.0.0.1:8000\" has no scheme; \
             expected e.g. http://127.0.0.1:8000",
        ),
        (
            "listen: 127.0.0.1:7000\n",
            "t.yaml: upstream is required: set `upstream` in the config file or pass --upstream",
        ),
        (
            "upstream: http://h:1\nlisten: localhost:7000\n",
            "t.yaml:2:9: listen: invalid address \"localhost:7000\"; \
             expected IP:PORT, e.g. 127.0.0.1:7000 or [::1]:7000",
        ),
        (
            "upstream: http://h:1\nadmin: 127.0.0.1:7000\n",
            "t.yaml:2:8: admin: listen (127.0.0.1:7000) and admin (127.0.0.1:7000) \
             would bind the same port",
        ),
        (
            "upstream: http://h:1\nlimits:\n  max_header_bytes: 4KiB\n",
            "t.yaml:3:21: limits.max_header_bytes: \"4KiB\" is out of range; \
             expected 8KiB..=16MiB",
        ),
        (
            "upstream: http://h:1\ninspector:\n  recent: 0\n",
            "t.yaml:3:11: inspector.recent: expected a whole number in 1..=1000000, got \"0\"",
        ),
        (
            "upstream: http://h:1\nadmin: 0.0.0.0:9464\ninspector:\n  enabled: true\n",
            "t.yaml:4:12: inspector.enabled: the admin listener 0.0.0.0:9464 is not loopback, \
             so the inspector needs inspector.token_file (a file holding a bearer token); or \
             bind admin to 127.0.0.1",
        ),
        (
            "upstream: http://h:1\nupstream_tls:\n  ca_file: does-not-exist.pem\n",
            "t.yaml:3:12: upstream_tls.ca_file: cannot read \"does-not-exist.pem\": \
             No such file or directory (os error 2)",
        ),
    ];
    for (text, want) in cases {
        let got = errors(text);
        assert_eq!(got, [want], "{text:?}");
    }
}

#[test]
fn every_semantic_error_is_reported() {
    let text = "\
listen: 127.0.0.1:7000
upstream: http://127.0.0.1:8000/mcp
admin: localhost:9464
host_header: rewrite
upstream_tls:
  roots: system
timeouts:
  connect: 5 parsecs
  response_head: 0s
  body_idle: off
  resume_window: off
  drain: 1d
log:
  format: xml
  level: ''
metrics:
  max_tools: 0
  max_methods: many
limits:
  request_inspect_bytes: 1MB
  max_header_bytes: 1KiB
";
    let want = [
        "t.yaml:2:11: upstream: URL \"http://127.0.0.1:8000/mcp\" has a path; \
         request paths pass through verbatim, so give only scheme://host:port",
        "t.yaml:3:8: admin: invalid address \"localhost:9464\"; \
         expected IP:PORT, e.g. 127.0.0.1:7000 or [::1]:7000",
        "t.yaml:4:14: host_header: invalid value \"rewrite\"; expected one of: preserve, upstream",
        "t.yaml:6:10: upstream_tls.roots: invalid value \"system\"; \
         expected one of: webpki, native",
        "t.yaml:8:12: timeouts.connect: invalid duration \"5 parsecs\"; \
         expected e.g. 250ms, 5s, 2m, 1h",
        "t.yaml:9:18: timeouts.response_head: must be greater than zero, got \"0s\"",
        "t.yaml:11:18: timeouts.resume_window: cannot be \"off\"; use \"0s\" for no wait",
        "t.yaml:12:10: timeouts.drain: invalid duration \"1d\"; expected e.g. 250ms, 5s, 2m, 1h",
        "t.yaml:14:11: log.format: invalid value \"xml\"; expected one of: json, pretty",
        "t.yaml:15:10: log.level: must not be empty; e.g. info or strata=debug,hyper=warn",
        "t.yaml:17:14: metrics.max_tools: expected a whole number in 1..=10000, got \"0\"",
        "t.yaml:18:16: metrics.max_methods: expected a whole number in 1..=1000, got \"many\"",
        "t.yaml:20:26: limits.request_inspect_bytes: invalid size \"1MB\"; \
         expected integer bytes or e.g. 64KiB, 1MiB, 1GiB",
        "t.yaml:21:21: limits.max_header_bytes: \"1KiB\" is out of range; expected 8KiB..=16MiB",
    ];
    let got = errors(text);
    assert_eq!(got, want);
    assert_eq!(got.len(), 14);
    // Display is the same lines, one per line, for check-config to print as is.
    assert_eq!(parse(text).unwrap_err().to_string(), want.join("\n"));
}

#[test]
fn error_fields() {
    let errors = parse("upstream: http://h:1\ntimeouts: {drain: soon}\n").unwrap_err();
    let error = errors.iter().next().unwrap();
    assert_eq!(error.file.as_deref(), Some("t.yaml"));
    assert_eq!(
        error.position,
        Some(Position {
            line: 2,
            column: 19
        })
    );
    assert!(
        error
            .message
            .starts_with("timeouts.drain: invalid duration \"soon\"")
    );
}

#[test]
fn overrides_take_precedence() {
    let text = "\
listen: 127.0.0.1:1
upstream: http://file:1
admin: 127.0.0.1:2
log: {format: pretty}
";
    let overrides = Overrides {
        listen: Some("127.0.0.1:10".parse().unwrap()),
        upstream: Some("https://flag:20".to_owned()),
        admin: Some("127.0.0.1:30".parse().unwrap()),
        log_format: Some(LogFormat::Json),
        ..Overrides::default()
    };
    let config = Config::parse(text, "t.yaml", &overrides).unwrap();
    assert_eq!(config.listen, "127.0.0.1:10".parse().unwrap());
    assert_eq!(config.upstream, upstream("https://flag:20"));
    assert_eq!(config.admin, "127.0.0.1:30".parse().unwrap());
    assert_eq!(config.log.format, LogFormat::Json);

    // A flag hides the file's value entirely, even an invalid one.
    let text = "upstream: ftp://nope\nlisten: nowhere\nlog: {format: xml}\n";
    let config = Config::parse(text, "t.yaml", &overrides).unwrap();
    assert_eq!(config.upstream, upstream("https://flag:20"));

    // A flag fills in what the file lacks.
    let only_upstream = Overrides {
        upstream: Some("http://flag:1".to_owned()),
        ..Overrides::default()
    };
    let config = Config::parse("listen: 127.0.0.1:5\n", "t.yaml", &only_upstream).unwrap();
    assert_eq!(config.upstream, upstream("http://flag:1"));
    assert_eq!(config.listen, "127.0.0.1:5".parse().unwrap());
}

#[test]
fn watch_config_is_on_unless_the_file_or_the_flag_turns_it_off() {
    let base = "upstream: http://h:1\n";
    assert!(parse(base).unwrap().watch_config);
    assert!(
        !parse(&format!("{base}watch_config: false\n"))
            .unwrap()
            .watch_config
    );
    let flag = |on| Overrides {
        watch_config: Some(on),
        ..Overrides::default()
    };
    let off = format!("{base}watch_config: false\n");
    assert!(
        Config::parse(&off, "t.yaml", &flag(true))
            .unwrap()
            .watch_config
    );
    assert!(
        !Config::parse(base, "t.yaml", &flag(false))
            .unwrap()
            .watch_config
    );
    assert_eq!(
        errors(&format!("{base}watch_config: sometimes\n")).len(),
        1,
        "not a boolean"
    );
}

#[test]
fn bad_flags_name_the_flag() {
    let bad_upstream = Overrides {
        upstream: Some("http://h/mcp".to_owned()),
        ..Overrides::default()
    };
    let got: Vec<String> = Config::parse("admin: nowhere\n", "t.yaml", &bad_upstream)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        [
            "--upstream: URL \"http://h/mcp\" has a path; request paths pass through verbatim, \
             so give only scheme://host:port",
            "t.yaml:1:8: admin: invalid address \"nowhere\"; \
             expected IP:PORT, e.g. 127.0.0.1:7000 or [::1]:7000",
        ]
    );

    let clash = Overrides {
        upstream: Some("http://h:1".to_owned()),
        listen: Some("127.0.0.1:9464".parse().unwrap()),
        ..Overrides::default()
    };
    assert_eq!(
        Config::from_overrides(&clash).unwrap_err().to_string(),
        "--listen: listen (127.0.0.1:9464) and admin (127.0.0.1:9464) would bind the same port"
    );
}

#[test]
fn without_a_file() {
    let flags = Overrides {
        upstream: Some("http://127.0.0.1:8000".to_owned()),
        ..Overrides::default()
    };
    assert_eq!(
        Config::from_overrides(&flags).unwrap(),
        Config::default_with_upstream(upstream("http://127.0.0.1:8000"))
    );
    assert_eq!(
        Config::from_overrides(&Overrides::default())
            .unwrap_err()
            .to_string(),
        "upstream is required: set `upstream` in the config file or pass --upstream"
    );
}

#[test]
fn relative_ca_file_is_next_to_the_config() {
    let dir = scratch_dir("relative_ca_file");
    std::fs::write(dir.join("ca.pem"), "not checked here").unwrap();
    let path = dir.join("strata.yaml");
    std::fs::write(
        &path,
        "upstream: https://h\nupstream_tls: {ca_file: ca.pem}\n",
    )
    .unwrap();
    let config = Config::load(&path).unwrap();
    assert_eq!(config.upstream_tls.ca_file, Some(dir.join("ca.pem")));

    // A directory is not a CA file.
    std::fs::write(&path, "upstream: https://h\nupstream_tls: {ca_file: .}\n").unwrap();
    let error = Config::load(&path).unwrap_err().to_string();
    assert!(
        error.ends_with(":2:25: upstream_tls.ca_file: \".\" is not a file"),
        "{error}"
    );
}

#[test]
fn check_config_command() {
    let run = |path: &Path| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = check_config(path, &mut out, &mut err);
        let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
        (code, text(out), text(err))
    };

    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/strata.yaml");
    let (code, out, err) = run(&example);
    assert_eq!(code, ExitCode::SUCCESS);
    assert_eq!(out, format!("{}: ok\n", example.display()));
    assert_eq!(err, "");

    let dir = scratch_dir("check_config_command");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "upstream: http://h:1\ntimeouts: {connect: 1d, drain: x}\n",
    )
    .unwrap();
    let (code, out, err) = run(&bad);
    assert_eq!(code, ExitCode::from(EXIT_CONFIG_INVALID));
    assert_eq!(out, "");
    let b = bad.display();
    assert_eq!(
        err,
        format!(
            "{b}:2:21: timeouts.connect: invalid duration \"1d\"; expected e.g. 250ms, 5s, 2m, 1h\n\
             {b}:2:32: timeouts.drain: invalid duration \"x\"; expected e.g. 250ms, 5s, 2m, 1h\n"
        )
    );

    let missing = dir.join("missing.yaml");
    let (code, _, err) = run(&missing);
    assert_eq!(code, ExitCode::from(EXIT_CONFIG_INVALID));
    assert_eq!(
        err,
        format!(
            "{}: cannot read config file: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
}

#[test]
fn origins_are_normalised_and_bad_ones_reported_where_they_are() {
    let c = parse(
        "upstream: http://h:1\norigins: [HTTPS://App.Example.com:443, 'http://localhost:6274']\n",
    )
    .unwrap();
    let entries: Vec<&str> = c.origins.entries().collect();
    assert_eq!(
        entries,
        ["https://app.example.com", "http://localhost:6274"]
    );
    assert_eq!(
        errors(
            "upstream: http://h:1\norigins:\n  - https://ok.example\n  - ok.example\n  - https://a.example/path\n"
        ),
        [
            "t.yaml:4:5: origins[1]: invalid origin \"ok.example\": no scheme; expected scheme://host[:port], e.g. https://app.example.com",
            "t.yaml:5:5: origins[2]: invalid origin \"https://a.example/path\": an origin has a host and nothing after it (no path, no user); expected scheme://host[:port], e.g. https://app.example.com",
        ]
    );
}

#[test]
fn connection_limits_are_read_and_checked() {
    let c = parse(
        "upstream: http://h:1\nlimits: {max_connections: 10, max_h2_streams: 8, max_headers: 20}\n",
    )
    .unwrap();
    assert_eq!(
        (
            c.limits.max_connections,
            c.limits.max_h2_streams,
            c.limits.max_headers
        ),
        (10, 8, 20)
    );
    assert_eq!(
        errors("upstream: http://h:1\nlimits:\n  max_connections: 0\n  max_h2_streams: 70000\n"),
        [
            "t.yaml:3:20: limits.max_connections: expected a whole number in 1..=1000000, got \"0\"",
            "t.yaml:4:19: limits.max_h2_streams: expected a whole number in 1..=65536, got \"70000\"",
        ]
    );
}

#[test]
fn workers_are_a_count_or_auto() {
    use strata::config::Workers;
    assert_eq!(
        parse("upstream: http://h:1\n").unwrap().workers,
        Workers::Auto
    );
    assert_eq!(
        parse("upstream: http://h:1\nworkers: 3\n").unwrap().workers,
        Workers::Count(3)
    );
    assert_eq!(
        parse("upstream: http://h:1\nworkers: auto\n")
            .unwrap()
            .workers,
        Workers::Auto
    );
    assert!(Workers::Auto.count() >= 1);
    assert_eq!(Workers::Count(3).count(), 3);
    assert_eq!(
        errors("upstream: http://h:1\nworkers: 0\n"),
        ["t.yaml:2:10: workers: expected a whole number in 1..=1024, got \"0\" (or \"auto\")"]
    );
    assert_eq!(
        errors("upstream: http://h:1\nworkers: all\n"),
        ["t.yaml:2:10: workers: expected a whole number in 1..=1024, got \"all\" (or \"auto\")"]
    );
}

// === telemetry ===

/// Overrides carrying only these `OTEL_*` variables.
fn otel(vars: &[(&str, &str)]) -> Overrides {
    let vars = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
    Overrides {
        otel_env: OtelEnv(vars.collect()),
        ..Overrides::default()
    }
}

fn parse_with_env(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigErrors> {
    Config::parse(text, "t.yaml", &otel(vars))
}

/// The resolved telemetry for `text` under `vars`; the config must be valid.
fn telemetry(text: &str, vars: &[(&str, &str)]) -> Option<TelemetryConfig> {
    match parse_with_env(text, vars) {
        Ok(config) => config.telemetry,
        Err(errors) => panic!("expected a valid config, got:\n{errors}"),
    }
}

/// Like [`telemetry`], for a config where export must be on.
fn exporting(text: &str, vars: &[(&str, &str)]) -> TelemetryConfig {
    telemetry(text, vars).unwrap()
}

fn errors_with_env(text: &str, vars: &[(&str, &str)]) -> Vec<String> {
    match parse_with_env(text, vars) {
        Ok(config) => panic!("expected errors, got {config:#?}"),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn telemetry_defaults_with_only_an_endpoint() {
    let text = format!("{MINIMAL}telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n");
    assert_eq!(
        exporting(&text, &[]),
        TelemetryConfig {
            protocol: OtlpProtocol::HttpProtobuf,
            traces_endpoint: Some("http://127.0.0.1:4318/v1/traces".to_owned()),
            metrics_endpoint: Some("http://127.0.0.1:4318/v1/metrics".to_owned()),
            headers: Vec::new(),
            timeout: Duration::from_secs(10),
            ca_file: None,
            sampler: SamplerConfig::ParentBasedAlwaysOn,
            batching: SpanBatching {
                schedule_delay: Duration::from_secs(5),
                max_queue_size: 2048,
                max_export_batch_size: 512,
            },
            metrics_interval: Duration::from_secs(60),
            propagate: Propagate::None,
            resource: pairs(&[("service.name", "strata")]),
        }
    );

    // A base with a path keeps it, and a trailing slash makes no double slash.
    let text = format!("{MINIMAL}telemetry: {{otlp: {{endpoint: 'https://c.example/otlp/'}}}}\n");
    let t = exporting(&text, &[]);
    assert_eq!(
        t.traces_endpoint.as_deref(),
        Some("https://c.example/otlp/v1/traces")
    );
    assert_eq!(
        t.metrics_endpoint.as_deref(),
        Some("https://c.example/otlp/v1/metrics")
    );

    // gRPC: the address as is, for both signals.
    let text = format!(
        "{MINIMAL}telemetry: {{otlp: {{endpoint: 'http://127.0.0.1:4317', protocol: grpc}}}}\n"
    );
    let t = exporting(&text, &[]);
    assert_eq!(t.protocol, OtlpProtocol::Grpc);
    assert_eq!(t.traces_endpoint.as_deref(), Some("http://127.0.0.1:4317"));
    assert_eq!(t.metrics_endpoint.as_deref(), Some("http://127.0.0.1:4317"));
}

#[test]
fn telemetry_is_off_without_an_endpoint() {
    assert_eq!(telemetry(MINIMAL, &[]), None);
    let text = format!(
        "{MINIMAL}telemetry:\n  otlp: {{protocol: grpc, timeout: 1s}}\n  traces: {{sampler: always_on}}\n"
    );
    assert_eq!(telemetry(&text, &[]), None);
    // Variables nothing would read are not checked.
    assert_eq!(
        telemetry(
            MINIMAL,
            &[
                ("OTEL_TRACES_SAMPLER", "xray"),
                ("OTEL_SDK_DISABLED", "1"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
            ]
        ),
        None
    );
    // The file still is.
    assert_eq!(
        errors(&format!(
            "{MINIMAL}telemetry:\n  traces: {{sampler: sometimes}}\n"
        )),
        [
            "t.yaml:3:21: telemetry.traces.sampler: invalid value \"sometimes\"; expected one of: \
          always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, \
          parentbased_traceidratio"
        ]
    );
}

#[test]
fn otel_sdk_disabled_turns_export_off() {
    let text = format!("{MINIMAL}telemetry: {{otlp: {{endpoint: 'http://c:4318'}}}}\n");
    assert!(telemetry(&text, &[]).is_some());
    assert_eq!(telemetry(&text, &[("OTEL_SDK_DISABLED", "true")]), None);
    assert_eq!(telemetry(&text, &[("OTEL_SDK_DISABLED", "TRUE")]), None);
    assert!(telemetry(&text, &[("OTEL_SDK_DISABLED", "false")]).is_some());
    let env_endpoint = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
        ("OTEL_SDK_DISABLED", "True"),
    ];
    assert_eq!(telemetry(MINIMAL, &env_endpoint), None);
    assert!(telemetry(MINIMAL, &env_endpoint[..1]).is_some());

    // The file is validated all the same.
    let bad = format!("{MINIMAL}telemetry:\n  otlp: {{endpoint: 'http://c:4318', timeout: 0s}}\n");
    assert_eq!(
        errors_with_env(&bad, &[("OTEL_SDK_DISABLED", "true")]),
        ["t.yaml:3:46: telemetry.otlp.timeout: must be greater than zero, got \"0s\""]
    );
    // Neither true nor false: an error, not a guess.
    assert_eq!(
        errors_with_env(&text, &[("OTEL_SDK_DISABLED", "1")]),
        ["t.yaml: OTEL_SDK_DISABLED: expected true or false, got \"1\""]
    );
}

#[test]
fn telemetry_file_wins_over_env_which_wins_over_defaults() {
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4317"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_TRACES_SAMPLER", "always_off"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ("OTEL_SERVICE_NAME", "from-env"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "15000"),
    ];
    // Only the environment.
    let t = exporting(MINIMAL, &env);
    assert_eq!(t.protocol, OtlpProtocol::Grpc);
    assert_eq!(t.traces_endpoint.as_deref(), Some("http://env:4317"));
    assert_eq!(t.metrics_endpoint.as_deref(), Some("http://env:4317"));
    assert_eq!(t.sampler, SamplerConfig::AlwaysOff);
    assert_eq!(t.timeout, Duration::from_millis(2500));
    assert_eq!(t.metrics_interval, Duration::from_secs(15));
    assert_eq!(t.resource, pairs(&[("service.name", "from-env")]));

    // The file over the environment, key by key.
    let text = format!(
        "{MINIMAL}telemetry:
  otlp: {{endpoint: 'http://file:4318', protocol: http/protobuf, timeout: 3s}}
  traces: {{sampler: always_on}}
  metrics: {{interval: 5s}}
  resource: {{service.name: from-file}}
"
    );
    let t = exporting(&text, &env);
    assert_eq!(t.protocol, OtlpProtocol::HttpProtobuf);
    assert_eq!(
        t.traces_endpoint.as_deref(),
        Some("http://file:4318/v1/traces")
    );
    assert_eq!(
        t.metrics_endpoint.as_deref(),
        Some("http://file:4318/v1/metrics")
    );
    assert_eq!(t.sampler, SamplerConfig::AlwaysOn);
    assert_eq!(t.timeout, Duration::from_secs(3));
    assert_eq!(t.metrics_interval, Duration::from_secs(5));
    assert_eq!(t.resource, pairs(&[("service.name", "from-file")]));

    // A bad variable the file hides is moot.
    let hidden = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://nope"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_TRACES_SAMPLER", "xray"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon"),
    ];
    assert_eq!(exporting(&text, &hidden).timeout, Duration::from_secs(3));
}

#[test]
fn per_signal_env_endpoints_are_used_as_is() {
    let t = exporting(
        MINIMAL,
        &[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:4318/custom"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318/"),
        ],
    );
    assert_eq!(t.traces_endpoint.as_deref(), Some("http://t:4318/custom"));
    assert_eq!(
        t.metrics_endpoint.as_deref(),
        Some("http://base:4318/v1/metrics")
    );

    // One signal alone: the other is not exported.
    let t = exporting(
        MINIMAL,
        &[(
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
            "https://m.example/ingest",
        )],
    );
    assert_eq!(t.traces_endpoint, None);
    assert_eq!(
        t.metrics_endpoint.as_deref(),
        Some("https://m.example/ingest")
    );

    // The file's endpoint is a base for both, over the per-signal variables.
    let text = format!("{MINIMAL}telemetry: {{otlp: {{endpoint: 'http://file:4318'}}}}\n");
    let t = exporting(
        &text,
        &[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:4318/custom")],
    );
    assert_eq!(
        t.traces_endpoint.as_deref(),
        Some("http://file:4318/v1/traces")
    );

    // An empty variable counts as unset.
    assert_eq!(
        telemetry(MINIMAL, &[("OTEL_EXPORTER_OTLP_ENDPOINT", "")]),
        None
    );
}

#[test]
fn telemetry_headers_merge_env_and_file() {
    let text = format!(
        "{MINIMAL}telemetry:
  otlp:
    endpoint: http://c:4318
    headers:
      Authorization: Bearer file-token
      x-file: one
"
    );
    let env = [(
        "OTEL_EXPORTER_OTLP_HEADERS",
        " authorization = Bearer%20env-token , x-tenant=a%2Cb%3Dc,,X-Env=plain ",
    )];
    assert_eq!(
        exporting(&text, &env).headers,
        pairs(&[
            ("authorization", "Bearer file-token"),
            ("x-env", "plain"),
            ("x-file", "one"),
            ("x-tenant", "a,b=c"),
        ])
    );
    let only_env = "upstream: http://h:1\ntelemetry: {otlp: {endpoint: 'http://c:4318'}}\n";
    assert_eq!(
        exporting(only_env, &env).headers,
        pairs(&[
            ("authorization", "Bearer env-token"),
            ("x-env", "plain"),
            ("x-tenant", "a,b=c"),
        ])
    );
}

#[test]
fn telemetry_sampler_batching_and_resource_from_env() {
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318");
    let t = exporting(
        MINIMAL,
        &[
            endpoint,
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
            ("OTEL_BSP_SCHEDULE_DELAY", "1000"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=prod,service.name=attr,team=a%20b",
            ),
        ],
    );
    assert_eq!(t.sampler, SamplerConfig::ParentBasedTraceIdRatio(0.25));
    assert_eq!(
        t.batching,
        SpanBatching {
            schedule_delay: Duration::from_secs(1),
            max_queue_size: 100,
            // The default batch shrinks to fit the queue.
            max_export_batch_size: 100,
        }
    );
    assert_eq!(
        t.resource,
        pairs(&[
            ("deployment.environment", "prod"),
            ("service.name", "attr"),
            ("team", "a b"),
        ])
    );

    // A ratio sampler without a ratio samples everything; the file's ratio beats the variable.
    let t = exporting(
        MINIMAL,
        &[endpoint, ("OTEL_TRACES_SAMPLER", "traceidratio")],
    );
    assert_eq!(t.sampler, SamplerConfig::TraceIdRatio(1.0));
    let text = format!("{MINIMAL}telemetry: {{traces: {{sampler: traceidratio, ratio: 0.1}}}}\n");
    let t = exporting(&text, &[endpoint, ("OTEL_TRACES_SAMPLER_ARG", "0.5")]);
    assert_eq!(t.sampler, SamplerConfig::TraceIdRatio(0.1));
    // The variable's ratio with the file's sampler.
    let text = format!("{MINIMAL}telemetry: {{traces: {{sampler: traceidratio}}}}\n");
    let t = exporting(&text, &[endpoint, ("OTEL_TRACES_SAMPLER_ARG", "0.5")]);
    assert_eq!(t.sampler, SamplerConfig::TraceIdRatio(0.5));
    // A sampler argument beside a sampler without a ratio is ignored, as the SDKs do.
    let t = exporting(MINIMAL, &[endpoint, ("OTEL_TRACES_SAMPLER_ARG", "7")]);
    assert_eq!(t.sampler, SamplerConfig::ParentBasedAlwaysOn);

    // The file's resource over OTEL_SERVICE_NAME over OTEL_RESOURCE_ATTRIBUTES.
    let text = format!("{MINIMAL}telemetry: {{resource: {{team: file}}}}\n");
    let t = exporting(
        &text,
        &[
            endpoint,
            ("OTEL_RESOURCE_ATTRIBUTES", "service.name=attr,team=env"),
            ("OTEL_SERVICE_NAME", "svc"),
        ],
    );
    assert_eq!(
        t.resource,
        pairs(&[("service.name", "svc"), ("team", "file")])
    );
}

#[test]
fn telemetry_ca_file_is_next_to_the_config_or_from_env() {
    let dir = scratch_dir("telemetry_ca_file");
    std::fs::write(dir.join("collector-ca.pem"), "not checked here").unwrap();
    let path = dir.join("strata.yaml");
    std::fs::write(
        &path,
        "upstream: http://h:1\ntelemetry:\n  otlp: {endpoint: 'https://c', ca_file: collector-ca.pem}\n",
    )
    .unwrap();
    let config = Config::load(&path).unwrap();
    assert_eq!(
        config.telemetry.unwrap().ca_file,
        Some(dir.join("collector-ca.pem"))
    );

    let env_ca = dir.join("collector-ca.pem").display().to_string();
    let t = exporting(
        MINIMAL,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", &env_ca),
        ],
    );
    assert_eq!(t.ca_file, Some(PathBuf::from(&env_ca)));
}

/// Every bad value in the section, each where it is, all at once.
#[test]
fn every_telemetry_error_is_reported_with_its_position() {
    let text = "\
upstream: http://h:1
telemetry:
  otlp:
    endpoint: ftp://x
    protocol: http/xml
    headers:
      bad name: x
      x-ok: \"a\\u0001b\"
    timeout: soon
    ca_file: missing-ca.pem
  traces:
    sampler: sometimes
  metrics:
    interval: 0s
  propagate: always
  resource:
    '': nameless
";
    assert_eq!(
        errors(text),
        [
            "t.yaml:4:15: telemetry.otlp.endpoint: unsupported scheme \"ftp\" in \"ftp://x\"; \
             expected http or https",
            "t.yaml:5:15: telemetry.otlp.protocol: invalid value \"http/xml\"; \
             expected one of: http/protobuf, grpc",
            "t.yaml:7:7: telemetry.otlp.headers: invalid header name \"bad name\"",
            "t.yaml:8:13: telemetry.otlp.headers.x-ok: invalid header value; only visible ASCII \
             characters, spaces and tabs are allowed",
            "t.yaml:9:14: telemetry.otlp.timeout: invalid duration \"soon\"; \
             expected e.g. 250ms, 5s, 2m, 1h",
            "t.yaml:10:14: telemetry.otlp.ca_file: cannot read \"missing-ca.pem\": \
             No such file or directory (os error 2)",
            "t.yaml:12:14: telemetry.traces.sampler: invalid value \"sometimes\"; expected one \
             of: always_on, always_off, traceidratio, parentbased_always_on, \
             parentbased_always_off, parentbased_traceidratio",
            "t.yaml:14:15: telemetry.metrics.interval: must be greater than zero, got \"0s\"",
            "t.yaml:15:14: telemetry.propagate: invalid value \"always\"; \
             expected one of: none, header",
            "t.yaml:17:5: telemetry.resource: an attribute key must not be empty",
        ]
    );
}

#[test]
fn telemetry_single_errors() {
    let cases = [
        (
            "traces: {sampler: traceidratio, ratio: 1.5}",
            "t.yaml:2:52: telemetry.traces.ratio: expected a number from 0 to 1, got \"1.5\"",
        ),
        (
            "traces: {sampler: always_on, ratio: 0.5}",
            "t.yaml:2:49: telemetry.traces.ratio: only used by traceidratio and \
             parentbased_traceidratio",
        ),
        (
            "otlp: {endpoint: 'http://c:4318', protocol: http/json}",
            "t.yaml:2:57: telemetry.otlp.protocol: http/json is not supported; \
             use http/protobuf or grpc",
        ),
        (
            "otlp: {endpoint: 'c:4318'}",
            "t.yaml:2:30: telemetry.otlp.endpoint: URL \"c:4318\" has no scheme; \
             expected e.g. http://127.0.0.1:4318",
        ),
        (
            "otlp: {endpoint: 'http://c:4318/?x=1'}",
            "t.yaml:2:30: telemetry.otlp.endpoint: URL \"http://c:4318/?x=1\" has a query; \
             /v1/traces and /v1/metrics are appended to this URL",
        ),
    ];
    for (section, want) in cases {
        let text = format!("{MINIMAL}telemetry: {{{section}}}\n");
        assert_eq!(errors(&text), [want], "{section}");
    }
}

#[test]
fn telemetry_env_errors_name_the_variable() {
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://x"),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer secret-token,bad name=1,x=%zz",
        ),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s"),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent/ca.pem"),
        ("OTEL_TRACES_SAMPLER", "traceidratio"),
        ("OTEL_TRACES_SAMPLER_ARG", "2"),
        ("OTEL_BSP_SCHEDULE_DELAY", "-1"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "100"),
        ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "200"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "0"),
        ("OTEL_RESOURCE_ATTRIBUTES", "a=1,=2"),
    ];
    let got = errors_with_env(MINIMAL, &env);
    assert_eq!(
        got,
        [
            "t.yaml: OTEL_EXPORTER_OTLP_PROTOCOL: http/json is not supported; \
             use http/protobuf or grpc",
            "t.yaml: OTEL_EXPORTER_OTLP_ENDPOINT: unsupported scheme \"ftp\" in \"ftp://x\"; \
             expected http or https",
            "t.yaml: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: URL \"collector:4318\" has no scheme; \
             expected e.g. http://127.0.0.1:4318",
            "t.yaml: OTEL_EXPORTER_OTLP_HEADERS: entry 3 has an invalid percent-encoded value",
            "t.yaml: OTEL_EXPORTER_OTLP_TIMEOUT: expected whole milliseconds from 1 to \
             31536000000, got \"10s\"",
            "t.yaml: OTEL_EXPORTER_OTLP_CERTIFICATE: cannot read \"/nonexistent/ca.pem\": \
             No such file or directory (os error 2)",
            "t.yaml: OTEL_TRACES_SAMPLER_ARG: expected a number from 0 to 1, got \"2\"",
            "t.yaml: OTEL_BSP_SCHEDULE_DELAY: expected whole milliseconds from 1 to \
             31536000000, got \"-1\"",
            "t.yaml: OTEL_BSP_MAX_EXPORT_BATCH_SIZE: expected a whole number in 1..=100, \
             got \"200\"",
            "t.yaml: OTEL_METRIC_EXPORT_INTERVAL: expected whole milliseconds from 1 to \
             31536000000, got \"0\"",
            "t.yaml: OTEL_RESOURCE_ATTRIBUTES: entry 2 has an empty key",
        ]
    );
    // Header values are credentials: never echoed.
    assert!(got.iter().all(|line| !line.contains("secret-token")));

    // A bad header name, and the same errors without a file.
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "bad name=1"),
        ("OTEL_TRACES_SAMPLER", "xray"),
    ];
    let flags = Overrides {
        upstream: Some("http://h:1".to_owned()),
        ..otel(&env)
    };
    let got: Vec<String> = Config::from_overrides(&flags)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        [
            "OTEL_EXPORTER_OTLP_HEADERS: invalid header name \"bad name\"",
            "OTEL_TRACES_SAMPLER: invalid value \"xray\"; expected one of: always_on, \
             always_off, traceidratio, parentbased_always_on, parentbased_always_off, \
             parentbased_traceidratio",
        ]
    );
}

/// The example file's `telemetry` keys are the defaults: with only an endpoint added, it
/// resolves to what an endpoint alone gives.
#[test]
fn example_telemetry_section_lists_the_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/strata.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let line = "    endpoint: null\n";
    assert_eq!(text.matches(line).count(), 1);
    let with_endpoint = text.replace(line, "    endpoint: http://127.0.0.1:4318\n");
    let minimal = format!("{MINIMAL}telemetry: {{otlp: {{endpoint: 'http://127.0.0.1:4318'}}}}\n");
    assert_eq!(exporting(&with_endpoint, &[]), exporting(&minimal, &[]));
}

#[test]
fn redis_store_settings() {
    let dir = scratch_dir("redis_store_settings");
    std::fs::write(dir.join("password"), "hunter2\n").unwrap();
    std::fs::write(dir.join("ca.pem"), "roots").unwrap();
    let path = dir.join("s.yaml");
    std::fs::write(
        &path,
        "upstream: http://h:1
idempotency:
  store: rediss://strata@redis.example:6380/0
  redis:
    password_file: password
    ca_file: ca.pem
    sentinel: { master: mymaster, addresses: ['10.0.0.1:26379', '10.0.0.2:26379'] }
    timeout: 50ms
",
    )
    .unwrap();
    let config = Config::load(&path).unwrap();
    let StoreKind::Redis(redis) = &config.policy.idempotency.store else {
        panic!("not a Redis store: {config:?}");
    };
    let node = |host: &str, port| RedisNode {
        host: host.into(),
        port,
    };
    assert_eq!(
        redis.topology,
        RedisTopology::Sentinel {
            master: "mymaster".into(),
            sentinels: vec![node("10.0.0.1", 26379), node("10.0.0.2", 26379)],
        }
    );
    assert!(redis.tls);
    assert_eq!(redis.username.as_deref(), Some("strata"));
    assert_eq!(redis.password.as_ref().map(|p| p.expose()), Some("hunter2"));
    assert_eq!(redis.ca_file, Some(dir.join("ca.pem")));
    assert_eq!(redis.timeout, Duration::from_millis(50));
    assert!(
        !format!("{config:?}").contains("hunter2"),
        "Debug shows the password"
    );

    let cluster = "idempotency:\n  store: redis://:pw@10.0.0.1:7000\n  redis: {cluster: ['10.0.0.2:7000', '[::1]:7001']}\n";
    let config = parse(&format!("{MINIMAL}{cluster}")).unwrap();
    let StoreKind::Redis(redis) = &config.policy.idempotency.store else {
        panic!("not a Redis store");
    };
    assert_eq!(
        redis.topology,
        RedisTopology::Cluster(vec![
            node("10.0.0.1", 7000),
            node("10.0.0.2", 7000),
            node("::1", 7001)
        ])
    );
    assert_eq!(redis.password.as_ref().map(|p| p.expose()), Some("pw"));
    assert_eq!(redis.username, None);

    let plain = parse(&format!("{MINIMAL}idempotency: {{store: redis://cache}}\n")).unwrap();
    assert_eq!(
        plain.policy.idempotency.store,
        StoreKind::Redis(RedisConfig::single("cache", 6379, 0))
    );
    assert_eq!(RedisConfig::DEFAULT_TIMEOUT, Duration::from_millis(500));
}

#[test]
fn redis_store_errors_name_the_key_and_never_the_password() {
    let cases = [
        (
            "store: redis://u:hunter2@h:x/0",
            "t.yaml:3:10: idempotency.store: bad host or port; expected `memory` or \
             redis[s]://[user:password@]host:port/db, got \"redis://u:***@h:x/0\"",
        ),
        (
            "store: memory\n  redis: {timeout: 1s}",
            "t.yaml:4:10: idempotency.redis: only with a redis:// or rediss:// idempotency.store",
        ),
        (
            "store: redis://h\n  redis: {ca_file: Cargo.toml}",
            "t.yaml:4:20: idempotency.redis.ca_file: only with a rediss:// store (TLS)",
        ),
        (
            "store: redis://h\n  redis: {timeout: 0ms}",
            "t.yaml:4:20: idempotency.redis.timeout: must be between 1ms and 60s, got \"0ms\"",
        ),
        (
            "store: redis://h/1\n  redis: {cluster: ['h2:7000']}",
            "t.yaml:3:10: idempotency.store: a Redis Cluster has only database 0, got /1",
        ),
        (
            "store: redis://h\n  redis: {cluster: ['h2'], sentinel: {master: m, addresses: ['s:1']}}",
            "t.yaml:4:38: idempotency.redis: give `sentinel` or `cluster`, not both",
        ),
        (
            "store: redis://h\n  redis: {sentinel: {addresses: ['s:1']}}",
            "t.yaml:4:21: idempotency.redis.sentinel.master: the master's name is required",
        ),
        (
            "store: redis://h\n  redis: {sentinel: {master: m, addresses: ['s']}}",
            "t.yaml:4:45: idempotency.redis.sentinel.addresses[0]: expected host:port, got \"s\"",
        ),
        (
            "store: redis://:hunter2@h\n  redis: {password_file: Cargo.toml}",
            "t.yaml:4:26: idempotency.redis.password_file: the store URL has a password too; \
             give it in one place",
        ),
    ];
    // `password_file` and `ca_file` are relative to the config file's directory, here the
    // working directory: the package's, which has a `Cargo.toml`.
    for (idempotency, want) in cases {
        let got = errors(&format!("{MINIMAL}idempotency:\n  {idempotency}\n"));
        assert_eq!(got, [want], "{idempotency}");
        assert!(!got.concat().contains("hunter2"), "{got:?}");
    }
}

/// `check-config` says `ok` and nothing more for a file with a Redis password, and reads the
/// Redis CA file as a start would.
#[test]
fn check_config_never_shows_the_redis_password() {
    let dir = scratch_dir("check_config_redis");
    let run = |path: &Path| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = check_config(path, &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap() + &String::from_utf8(err).unwrap(),
        )
    };
    let good = dir.join("good.yaml");
    std::fs::write(
        &good,
        "upstream: http://h:1\nidempotency: {store: 'redis://strata:hunter2@cache:6379/0'}\n",
    )
    .unwrap();
    let (code, text) = run(&good);
    assert_eq!(code, ExitCode::SUCCESS);
    assert_eq!(text, format!("{}: ok\n", good.display()));

    std::fs::write(dir.join("ca.pem"), "no certificate here\n").unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "upstream: http://h:1\nidempotency:\n  store: 'rediss://strata:hunter2@cache:6379/0'\n  \
         redis: {ca_file: ca.pem}\n",
    )
    .unwrap();
    let (code, text) = run(&bad);
    assert_eq!(code, ExitCode::from(EXIT_CONFIG_INVALID));
    assert!(text.contains("idempotency.redis.ca_file"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}
