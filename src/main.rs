//! The `strata` binary: parse the CLI, set up logging, run. Exit codes: 0 done, 1 failed to
//! start or run, 2 invalid configuration (`strata classify`: see `offline/mod.rs`).

use std::process::ExitCode;

use clap::Parser;

use strata::cli::{self, Cli, Command, EXIT_CONFIG_INVALID};

/// jemalloc, with its background thread and the decay `.cargo/config.toml` bakes in: what a
/// burst of connections freed goes back to the system within about a second of the free, on
/// a busy or an idle process alike. glibc's malloc keeps freed chunks below live ones in its
/// per-thread arenas: after 5,000 SSE streams closed it held ~80 MiB until `malloc_trim`
/// (`bench/README.md`, "Memory after many streams").
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::CheckConfig { file }) = &cli.command {
        return cli::check_config(file, &mut std::io::stdout(), &mut std::io::stderr());
    }
    if let Some(Command::Classify {
        files,
        json,
        fail_on,
    }) = cli.command.clone()
    {
        let options = strata::offline::Options {
            files,
            json,
            fail_on,
        };
        return strata::offline::run(&options, &mut std::io::stdout(), &mut std::io::stderr());
    }
    // `strata` itself serves agents on worker threads of its own (`runtime/workers.rs`); the
    // main thread only runs the admin listener, signals and reloads. The demo and the
    // testbed serve on a multi-threaded runtime.
    let runtime = match &cli.command {
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Some(_) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("strata: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Some(Command::Tap(args)) => runtime.block_on(strata::tap::run(args)),
        #[cfg(feature = "testbed")]
        Some(Command::Demo) => runtime.block_on(strata::demo::run()),
        #[cfg(feature = "testbed")]
        Some(Command::Testbed { listen }) => runtime.block_on(strata::demo::testbed(listen)),
        Some(Command::CheckConfig { .. } | Command::Classify { .. }) | None => {
            let config = match cli.run.load_config() {
                Ok(config) => config,
                Err(errors) => {
                    eprintln!("{errors}");
                    return ExitCode::from(EXIT_CONFIG_INVALID);
                }
            };
            if let Err(err) = strata::log::init(config.log.format, &config.log.level) {
                eprintln!("strata: {err}");
                return ExitCode::FAILURE;
            }
            let run = async {
                // SIGHUP and the file watch ask on one channel: a burst of both is one reload.
                let (ask, reloads) = tokio::sync::mpsc::channel(1);
                reload_on_hangup(ask.clone());
                let watch = (cli.run.config.clone())
                    .map(|file| strata::config_watch::ConfigWatch::spawn(file, &config, ask));
                strata::app::run(&config, shutdown_signal(), reloads, watch.as_ref(), || {
                    cli.run.load_config()
                })
                .await
            };
            match runtime.block_on(run) {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("strata: {err}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// SIGHUP asks for a config reload on `ask` (full: one is already asked for). The handler is
/// installed here, synchronously: SIGHUP's default action would kill the process.
fn reload_on_hangup(ask: tokio::sync::mpsc::Sender<()>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut hup) = signal(SignalKind::hangup()) {
            tokio::spawn(async move {
                while hup.recv().await.is_some() {
                    let _ = ask.try_send(());
                }
            });
        }
    }
    #[cfg(not(unix))]
    drop(ask);
}

/// SIGTERM (Kubernetes) or Ctrl-C. The handlers are installed when this is called, before
/// strata reports ready: a SIGTERM right after readiness must drain, not kill.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate()).ok();
        let int = signal(SignalKind::interrupt()).ok();
        async move {
            let term = async {
                match term {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending().await,
                }
            };
            let int = async {
                match int {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = term => {}
                () = int => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
