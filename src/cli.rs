//! The command line: flags for running the proxy, and the subcommands.
//!
//! ```text
//! strata [--config FILE] [--listen ADDR] [--upstream URL] [--admin ADDR] [--log-format json|pretty]
//!        [--capture FILE] [--watch-config[=false]]
//! strata check-config FILE
//! strata classify [--json] [--fail-on LAYERS] FILE…
//! strata demo
//! strata testbed [--listen ADDR]
//! strata tap [--admin ADDR] [--outcome O] [--layer L] [--tool T] [--method M] [--client C]
//!            [--json] [--token-file FILE]
//! ```
//!
//! Run flags override the config file and may also come from `STRATA_*` environment variables
//! (handy in a pod spec). `main.rs` parses [`Cli`], then either runs a [`Command`] or loads the
//! config with [`RunArgs::load_config`].
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};

use crate::config::{Config, ConfigErrors, LogFormat, OtelEnv, Overrides, StoreKind};

/// Exit status for an invalid config, from `check-config` and from a run that cannot start.
/// Distinct from 1 (a runtime failure) so scripts can tell "fix your file" apart.
pub const EXIT_CONFIG_INVALID: u8 = 2;

/// Where `strata testbed` listens unless told otherwise: the default `upstream` of a local
/// strata, so the two work together with no flags.
pub const DEFAULT_TESTBED_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8000));

/// A layer-aware MCP gateway sidecar: proxies Streamable HTTP and classifies every JSON-RPC
/// call by the layer it failed at.
#[derive(Clone, Debug, PartialEq, Eq, Parser)]
#[command(
    name = "strata",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(flatten)]
    pub run: RunArgs,
    /// No subcommand: run the proxy.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Flags for running the proxy. Each one overrides the config file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Args)]
pub struct RunArgs {
    /// YAML config file; see config/strata.yaml for every setting.
    #[arg(long, value_name = "FILE", env = "STRATA_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address the agent connects to [config: listen; default 127.0.0.1:7000].
    #[arg(long, value_name = "ADDR", env = "STRATA_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// MCP server base URL, scheme and authority only, e.g. http://127.0.0.1:8000
    /// [config: upstream].
    #[arg(long, value_name = "URL", env = "STRATA_UPSTREAM")]
    pub upstream: Option<String>,
    /// Admin listener for /metrics, /healthz, /readyz [config: admin; default 127.0.0.1:9464].
    #[arg(long, value_name = "ADDR", env = "STRATA_ADMIN")]
    pub admin: Option<SocketAddr>,
    /// Log line format [config: log.format; default json].
    #[arg(
        long,
        value_name = "FORMAT",
        env = "STRATA_LOG_FORMAT",
        value_parser = PossibleValuesParser::new(["json", "pretty"])
            .try_map(|s| s.parse::<LogFormat>()),
    )]
    pub log_format: Option<LogFormat>,
    /// Record the MCP traffic to this HAR file, for `strata classify` [config: capture.path;
    /// default off].
    #[arg(long, value_name = "FILE", env = "STRATA_CAPTURE")]
    pub capture: Option<PathBuf>,
    /// Reload when the config file, or a certificate, key or token file it names, changes
    /// on disk: --watch-config=false turns it off [config: watch_config; default true].
    #[arg(
        long,
        value_name = "BOOL",
        env = "STRATA_WATCH_CONFIG",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub watch_config: Option<bool>,
}

/// What to do instead of running the proxy.
#[derive(Clone, Debug, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Validate a config file: print every error as FILE:LINE:COL: message, exit 2 if any.
    CheckConfig {
        /// The YAML config file to check.
        file: PathBuf,
    },
    /// Classify recorded MCP traffic offline (HAR 1.2 files: browser devtools, mitmproxy's
    /// hardump, Charles) with strata's classifier: one row per call, or one JSON record per
    /// line. Exit 2 if a file is unreadable, 1 if --fail-on matched a call, else 0.
    Classify {
        /// HAR files to classify.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// One JSON object per call (the per-call log record's fields) instead of the table.
        #[arg(long)]
        json: bool,
        /// Exit 1 when a call failed at one of these layers (comma-separated: transport,
        /// protocol, interaction, application).
        #[arg(long, value_name = "LAYERS", value_delimiter = ',', value_parser = crate::offline::parse_layer)]
        fail_on: Vec<crate::classify::Layer>,
    },
    /// Print each call as it finishes, from a running strata's inspector (its admin
    /// listener's /calls/stream; needs inspector.enabled). Ctrl-C stops.
    Tap(crate::tap::TapArgs),
    /// Run the built-in testbed upstream and strata in front of it, make one call per
    /// scenario, and print what each was classified as.
    #[cfg(feature = "testbed")]
    Demo,
    /// Run the fault-injection MCP upstream alone, to point a real agent (or strata) at.
    #[cfg(feature = "testbed")]
    Testbed {
        /// Address to listen on.
        #[arg(long, value_name = "ADDR", default_value_t = DEFAULT_TESTBED_LISTEN)]
        listen: SocketAddr,
    },
}

// === impl RunArgs ===

impl RunArgs {
    /// The flags that replace config-file values.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            listen: self.listen,
            upstream: self.upstream.clone(),
            admin: self.admin,
            log_format: self.log_format,
            otel_env: OtelEnv::from_process(),
            capture: self.capture.clone(),
            watch_config: self.watch_config,
        }
    }

    /// The config to run with: the file (when given) with flags applied, or flags alone.
    pub fn load_config(&self) -> Result<Config, ConfigErrors> {
        let overrides = self.overrides();
        match &self.config {
            Some(path) => Config::load_with(path, &overrides),
            None => Config::from_overrides(&overrides),
        }
    }
}

/// `strata check-config FILE`: validates the file on its own (no flags applied, since the
/// question is whether the file can be deployed).
///
/// On success writes `FILE: ok` to `out` and returns success; otherwise writes each error as a
/// line to `err` and returns [`EXIT_CONFIG_INVALID`]. Write failures are ignored: a closed
/// stdout or stderr has nowhere to be reported, and the exit status still tells the result.
pub fn check_config(path: &Path, out: &mut dyn Write, err: &mut dyn Write) -> ExitCode {
    match Config::load(path) {
        Ok(config) => match certificate_files(&config) {
            Ok(()) => {
                let _ = writeln!(out, "{}: ok", path.display());
                ExitCode::SUCCESS
            }
            Err(error) => {
                let _ = writeln!(err, "{}: {error}", path.display());
                ExitCode::from(EXIT_CONFIG_INVALID)
            }
        },
        Err(errors) => {
            let _ = writeln!(err, "{errors}");
            ExitCode::from(EXIT_CONFIG_INVALID)
        }
    }
}

/// Reads the PEM files the config names, as start does: validation only checks that they
/// exist, and a file that exists but holds no usable certificate or key would stop the start.
fn certificate_files(config: &Config) -> anyhow::Result<()> {
    crate::listen::tls::acceptor(config.tls.as_ref())?;
    if let Some(ca_file) = &config.upstream_tls.ca_file {
        crate::proxy::pooled_client::read_certs(ca_file, "upstream_tls.ca_file")?;
    }
    if let StoreKind::Redis(redis) = &config.policy.idempotency.store
        && let Some(ca_file) = &redis.ca_file
    {
        crate::proxy::pooled_client::read_certs(ca_file, "idempotency.redis.ca_file")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_flags() {
        let cli = Cli::try_parse_from([
            "strata",
            "--config",
            "c.yaml",
            "--listen",
            "127.0.0.1:1",
            "--upstream",
            "http://u:2",
            "--admin",
            "[::1]:3",
            "--log-format",
            "pretty",
        ])
        .unwrap();
        assert_eq!(cli.command, None);
        assert_eq!(cli.run.config, Some(PathBuf::from("c.yaml")));
        let overrides = cli.run.overrides();
        assert_eq!(overrides.listen, Some("127.0.0.1:1".parse().unwrap()));
        assert_eq!(overrides.upstream.as_deref(), Some("http://u:2"));
        assert_eq!(overrides.admin, Some("[::1]:3".parse().unwrap()));
        assert_eq!(overrides.log_format, Some(LogFormat::Pretty));
    }

    #[test]
    fn capture_flag_overrides_the_path() {
        let cli = Cli::try_parse_from(["strata", "--capture", "c.har"]).unwrap();
        assert_eq!(cli.run.overrides().capture, Some(PathBuf::from("c.har")));
        let none = Cli::try_parse_from(["strata"]).unwrap();
        assert_eq!(none.run.overrides().capture, None);
    }

    #[test]
    fn watch_config_flag() {
        let watch = |args: &[&str]| Cli::try_parse_from(args).map(|cli| cli.run.watch_config);
        assert_eq!(watch(&["strata"]).unwrap(), None);
        assert_eq!(watch(&["strata", "--watch-config"]).unwrap(), Some(true));
        assert_eq!(
            watch(&["strata", "--watch-config=false"]).unwrap(),
            Some(false)
        );
        assert_eq!(
            watch(&["strata", "--watch-config=true"]).unwrap(),
            Some(true)
        );
        assert!(watch(&["strata", "--watch-config=off"]).is_err());
        let cli = Cli::try_parse_from(["strata", "--watch-config=false"]).unwrap();
        assert_eq!(cli.run.overrides().watch_config, Some(false));
    }

    #[test]
    fn subcommands() {
        let parse = |args: &[&str]| Cli::try_parse_from(args).map(|cli| cli.command);
        assert_eq!(
            parse(&["strata", "check-config", "f.yaml"]).unwrap(),
            Some(Command::CheckConfig {
                file: "f.yaml".into()
            })
        );
        assert_eq!(parse(&["strata", "demo"]).unwrap(), Some(Command::Demo));
        assert_eq!(
            parse(&["strata", "testbed"]).unwrap(),
            Some(Command::Testbed {
                listen: DEFAULT_TESTBED_LISTEN
            })
        );
        assert_eq!(
            parse(&["strata", "testbed", "--listen", "127.0.0.1:0"]).unwrap(),
            Some(Command::Testbed {
                listen: "127.0.0.1:0".parse().unwrap()
            })
        );
    }

    #[test]
    fn rejects_bad_flags() {
        for args in [
            &["strata", "--log-format", "xml"][..],
            &["strata", "--listen", "localhost:7000"],
            &["strata", "check-config"],
            &["strata", "--listen", "127.0.0.1:1", "demo"],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
        }
    }
}
