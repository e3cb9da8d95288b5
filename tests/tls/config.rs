//! The `tls` section: read relative to the config file, both halves of the pair required,
//! and files that hold no usable PEM refused when strata starts and by `check-config`.

use std::path::Path;
use std::process::ExitCode;

use strata::app::{self, StartError};
use strata::cli::{EXIT_CONFIG_INVALID, check_config};
use strata::config::{Config, ListenTls};

use crate::pki::{Ca, scratch_dir};

/// Writes `text` as `strata.yaml` in `dir` and loads it.
fn load(dir: &Path, text: &str) -> Result<Config, Vec<String>> {
    let path = dir.join("strata.yaml");
    std::fs::write(&path, text).unwrap();
    Config::load(&path).map_err(|errors| errors.iter().map(ToString::to_string).collect())
}

#[test]
fn files_are_relative_to_the_config_file() {
    let dir = scratch_dir("config_relative");
    let ca = Ca::new("config CA");
    ca.server(1).write(&dir, "server");
    std::fs::write(dir.join("clients.pem"), ca.pem()).unwrap();
    let text = "upstream: http://127.0.0.1:1\n\
                tls: {cert_file: server.crt, key_file: server.key, client_ca_file: clients.pem}\n";
    let config = load(&dir, text).unwrap();
    assert_eq!(
        config.tls,
        Some(ListenTls {
            cert_file: dir.join("server.crt"),
            key_file: dir.join("server.key"),
            client_ca_file: Some(dir.join("clients.pem")),
        })
    );
    // No section, an empty one, or nulls: plain TCP.
    for text in [
        "",
        "tls:\n",
        "tls: {}\n",
        "tls: {cert_file: null, key_file: null}\n",
    ] {
        let config = load(&dir, &format!("upstream: http://127.0.0.1:1\n{text}")).unwrap();
        assert_eq!(config.tls, None, "{text:?}");
    }
}

#[test]
fn half_a_pair_and_missing_files_are_errors() {
    let dir = scratch_dir("config_errors");
    Ca::new("config CA").server(1).write(&dir, "server");
    let file = dir.join("strata.yaml").display().to_string();
    let cases = [
        (
            "tls:\n  cert_file: server.crt\n",
            "3:14: tls.cert_file: tls.key_file is required with it",
        ),
        (
            "tls:\n  key_file: server.key\n",
            "3:13: tls.key_file: tls.cert_file is required with it",
        ),
        (
            "tls:\n  client_ca_file: server.crt\n",
            "3:19: tls.client_ca_file: needs tls.cert_file and tls.key_file",
        ),
        (
            "tls:\n  cert_file: nope.crt\n  key_file: server.key\n",
            "3:14: tls.cert_file: cannot read \"nope.crt\"",
        ),
        (
            "tls:\n  cert_file: server.crt\n  key_file: .\n",
            "4:13: tls.key_file: \".\" is not a file",
        ),
    ];
    for (text, want) in cases {
        let errors = load(&dir, &format!("upstream: http://127.0.0.1:1\n{text}")).unwrap_err();
        assert_eq!(errors.len(), 1, "{text:?}: {errors:?}");
        assert!(
            errors[0].starts_with(&format!("{file}:{want}")),
            "{text:?}: {errors:?}"
        );
    }
}

#[tokio::test]
async fn unusable_pem_stops_the_start_naming_the_key() {
    let dir = scratch_dir("config_bad_pem");
    let ca = Ca::new("config CA");
    let (cert, key) = ca.server(1).write(&dir, "server");
    let (_, other_key) = ca.server(2).write(&dir, "other");
    std::fs::write(dir.join("empty.pem"), "not a PEM file\n").unwrap();
    let cases = [
        (
            "empty.pem",
            "server.key",
            "tls.cert_file",
            "no PEM certificate",
        ),
        (
            "server.crt",
            "empty.pem",
            "tls.key_file",
            "no PEM private key",
        ),
        (
            "server.crt",
            "other.key",
            "tls.cert_file and tls.key_file",
            "",
        ),
    ];
    assert!(cert.exists() && key.exists() && other_key.exists());
    for (cert, key, names, reason) in cases {
        let text = format!(
            "upstream: http://127.0.0.1:1\nlisten: 127.0.0.1:0\nadmin: 127.0.0.1:0\n\
             tls: {{cert_file: {cert}, key_file: {key}}}\n"
        );
        let config = load(&dir, &text).unwrap();
        let Err(err) = app::start(&config).await else {
            panic!("{cert} + {key}: strata started");
        };
        assert!(matches!(err, StartError::Tls(_)), "{err:?}");
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("downstream TLS: {names}")) && message.contains(reason),
            "{message}"
        );
    }
}

#[test]
fn check_config_reads_the_certificate_files() {
    let dir = scratch_dir("config_check");
    let ca = Ca::new("config CA");
    ca.server(1).write(&dir, "server");
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("junk.pem"), "junk\n").unwrap();
    let path = dir.join("strata.yaml");
    let check = |text: &str| {
        std::fs::write(&path, text).unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = check_config(&path, &mut out, &mut err);
        let text = String::from_utf8(if code == ExitCode::SUCCESS { out } else { err });
        (code, text.unwrap())
    };
    let up = "upstream: https://127.0.0.1:1\n";
    let good = format!("{up}tls: {{cert_file: server.crt, key_file: server.key}}\n");
    assert_eq!(check(&good).0, ExitCode::SUCCESS);
    let good = format!("{up}upstream_tls: {{ca_file: ca.pem}}\n");
    assert_eq!(check(&good).0, ExitCode::SUCCESS);

    let file = path.display();
    let (code, text) = check(&format!(
        "{up}tls: {{cert_file: junk.pem, key_file: server.key}}\n"
    ));
    assert_eq!(code, ExitCode::from(EXIT_CONFIG_INVALID));
    assert!(
        text.starts_with(&format!("{file}: downstream TLS: tls.cert_file ")),
        "{text}"
    );
    let (code, text) = check(&format!("{up}upstream_tls: {{ca_file: junk.pem}}\n"));
    assert_eq!(code, ExitCode::from(EXIT_CONFIG_INVALID));
    assert!(
        text.starts_with(&format!("{file}: upstream_tls.ca_file ")),
        "{text}"
    );
}
