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
    Config, ConfigErrors, HostHeader, LogFormat, Overrides, Position, Scheme, TlsRoots, Upstream,
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
             workers, host_header, upstream_tls, tls, timeouts, log, metrics, limits, retry, tools, \
             trust_annotations, idempotency, origins",
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
