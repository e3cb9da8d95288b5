//! Starting and stopping strata in-process: binds the agent and admin listeners, builds the
//! runtime pieces from the validated config, and drains on shutdown. `main` and the
//! end-to-end tests both use this.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use crate::admin::{AdminState, Health, serve_admin_with};
use crate::capture::Capture;
use crate::config::{Config, ConfigErrors, IdempotencyConfig};
use crate::config_watch::ConfigWatch;
use crate::listen::accept::{ServerSettings, serve};
use crate::listen::tls::{self, AgentTls, TlsError};
use crate::metrics::{Metrics, MetricsError, ReloadResult};
use crate::observe::telemetry::{Telemetry, TelemetryError};
use crate::proxy::{ClientError, CurrentProxy, Proxy};
use crate::runtime::workers::Workers;

/// Why strata could not start. Always the operator's side: nothing was served yet.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot bind the agent listener {addr}: {source}")]
    BindListen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot bind the admin listener {addr}: {source}")]
    BindAdmin {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("cannot start the worker threads: {0}")]
    Workers(std::io::Error),
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
    #[error("cannot start the capture writer thread: {0}")]
    Capture(std::io::Error),
}

/// A running strata.
pub struct Running {
    /// Where agents connect (the bound address: port 0 resolved).
    pub listen: SocketAddr,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    pub admin: SocketAddr,
    pub metrics: Arc<Metrics>,
    pub health: Arc<Health>,
    /// The proxy in force (a reload swaps it).
    pub current: Arc<CurrentProxy>,
    /// The agent-facing TLS acceptor in force (a reload swaps it).
    tls: Arc<AgentTls>,
    /// The config in force, for reloads to compare against.
    config: std::sync::Mutex<Config>,
    stop: watch::Sender<bool>,
    /// The threads serving agent connections.
    workers: Workers,
    /// The admin listener.
    tasks: Vec<JoinHandle<std::io::Result<()>>>,
    /// OpenTelemetry export in force, when on (a reload may replace it).
    telemetry: std::sync::Mutex<Option<Arc<Telemetry>>>,
    /// Traffic capture, when on (set at start; a reload keeps it).
    capture: Option<Arc<Capture>>,
}

/// Binds both listeners and starts serving. Returns once strata is ready.
pub async fn start(config: &Config) -> Result<Running, StartError> {
    let metrics = Metrics::new(config.metrics.max_methods, config.metrics.max_tools)?;
    let telemetry = match &config.telemetry {
        Some(settings) => Some(Telemetry::start(settings, metrics.clone())?),
        None => None,
    };
    let capture = match &config.capture {
        Some(settings) => {
            Some(Capture::start(settings, metrics.clone()).map_err(StartError::Capture)?)
        }
        None => None,
    };
    let proxy = Proxy::capturing(config, metrics.clone(), telemetry.clone(), capture.clone())?;
    let current = CurrentProxy::new(proxy);
    let tls = AgentTls::new(config.tls.as_ref(), metrics.clone())?;
    let listen_error = |source| StartError::BindListen {
        addr: config.listen,
        source,
    };
    let admin_error = |source| StartError::BindAdmin {
        addr: config.admin,
        source,
    };
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(listen_error)?;
    let admin_listener = TcpListener::bind(config.admin).await.map_err(admin_error)?;
    let listen = listener.local_addr().map_err(listen_error)?;
    let admin = admin_listener.local_addr().map_err(admin_error)?;

    let health = Arc::new(Health::new());
    let (stop, stopped) = watch::channel(false);
    let settings = server_settings(config);
    let permits = Arc::new(Semaphore::new(settings.max_connections));
    // Each worker registers its own duplicate with its own runtime (`runtime/workers.rs`).
    let listener = listener.into_std().map_err(listen_error)?;
    let workers = {
        let (current, tls, stopped) = (current.clone(), tls.clone(), stopped.clone());
        Workers::spawn(config.workers.count(), listener, move |listener| {
            serve(
                listener,
                current.clone(),
                tls.clone(),
                settings.clone(),
                permits.clone(),
                wait_stop(stopped.clone()),
            )
        })
        .map_err(StartError::Workers)?
    };
    let admin_state = AdminState {
        metrics: metrics.clone(),
        health: health.clone(),
        // The proxy keeps the one inspector across reloads; `reload` applies its settings.
        inspector: Some(current.load().inspector().clone()),
    };
    let tasks = vec![tokio::spawn(serve_admin_with(
        admin_listener,
        admin_state,
        wait_stop(stopped),
    ))];
    // Ready once the agent listener is bound: `/readyz` answers 200 from here on.
    health.set_ready(true);
    tracing::info!(%listen, %admin, upstream = %config.upstream, "strata is serving");
    Ok(Running {
        listen,
        admin,
        metrics,
        health,
        current,
        tls,
        config: std::sync::Mutex::new(config.clone()),
        stop,
        workers,
        tasks,
        telemetry: std::sync::Mutex::new(telemetry),
        capture,
    })
}

/// How long an export a reload replaced has to send what it holds.
const REPLACED_TELEMETRY_GRACE: Duration = Duration::from_secs(10);

/// The least time the last spans and captured exchanges get at shutdown, even with
/// `timeouts.drain: 0s`.
const MIN_FLUSH: Duration = Duration::from_secs(1);

/// Why a reload was refused. The running config stays in force.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
}

/// Runs until `shutdown` resolves, then drains (bounded by `timeouts.drain`). Each message on
/// `reloads` (SIGHUP, or `watch` seeing a file change, in `main`) reads the config again with
/// `load` and swaps it in; a bad new config is refused with its errors logged, and the old one
/// stays in force. `watch` follows the files each config read from the file names.
pub async fn run(
    config: &Config,
    shutdown: impl Future<Output = ()>,
    mut reloads: tokio::sync::mpsc::Receiver<()>,
    watch: Option<&ConfigWatch>,
    load: impl Fn() -> Result<Config, ConfigErrors>,
) -> Result<(), StartError> {
    let running = start(config).await?;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(()) = reloads.recv() => running.reload_with(watch, &load),
        }
    }
    running.stop().await;
    Ok(())
}

impl Running {
    /// The proxy in force now.
    pub fn proxy(&self) -> Arc<Proxy> {
        self.current.load()
    }

    /// Swaps in a new config without dropping connections: requests already in flight finish
    /// under the old one, and open TLS connections keep the certificate they negotiated.
    /// Listener addresses and metric label caps only change on restart (a warning says so).
    pub fn reload(&self, config: &Config) -> Result<(), ReloadError> {
        // Everything is built before anything is swapped in: a reload applies whole or not
        // at all.
        let telemetry = match self.telemetry_for(config) {
            Ok(telemetry) => telemetry,
            Err(err) => {
                self.metrics.config_reload(ReloadResult::Error);
                return Err(err.into());
            }
        };
        let built = match self.current.load().reload(config, telemetry.clone()) {
            Ok(proxy) => tls::acceptor(config.tls.as_ref())
                .map(|acceptor| (proxy, acceptor))
                .map_err(ReloadError::from),
            Err(err) => Err(err.into()),
        };
        let (proxy, acceptor) = match built {
            Ok(built) => built,
            Err(err) => {
                self.metrics.config_reload(ReloadResult::Error);
                return Err(err);
            }
        };
        let mut old = self.config.lock().unwrap_or_else(|e| e.into_inner());
        if old.listen != config.listen
            || old.admin != config.admin
            || old.metrics != config.metrics
            || old.workers != config.workers
            || old.capture != config.capture
        {
            tracing::warn!(
                "listen, admin, workers, metrics and capture settings change only on restart"
            );
        }
        // The idempotency store is carried over with its records and its Redis connection.
        if store_settings(&old) != store_settings(config) {
            tracing::warn!(
                "idempotency.store, ttl, max_entries, max_bytes, max_record_bytes and \
                 idempotency.redis (a new password included) change only on restart"
            );
        }
        // The listener's settings are fixed when it starts (hyper's builder, the connection cap).
        if server_settings(&old) != server_settings(config) {
            tracing::warn!(
                "timeouts.header_read, timeouts.drain and limits.max_header_bytes, max_headers, \
                 max_connections, max_h2_streams change only on restart"
            );
        }
        self.current.store(proxy);
        self.current.load().inspector().configure(&config.inspector);
        self.swap_telemetry(telemetry);
        // Certificate files are read again on every reload, so a renewed certificate is
        // served to the connections accepted from now on.
        self.tls.store(acceptor);
        *old = config.clone();
        self.metrics.config_reload(ReloadResult::Ok);
        Ok(())
    }

    /// The export for `config`: the one in force when its settings did not change, else a
    /// new one (started, so a bad setting refuses the reload).
    fn telemetry_for(&self, config: &Config) -> Result<Option<Arc<Telemetry>>, TelemetryError> {
        let old = self.config.lock().unwrap_or_else(|e| e.into_inner());
        if old.telemetry == config.telemetry {
            return Ok(self
                .telemetry
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone());
        }
        match &config.telemetry {
            Some(settings) => Telemetry::start(settings, self.metrics.clone()).map(Some),
            None => Ok(None),
        }
    }

    /// Puts `telemetry` in force; one it replaces sends what it holds, then ends.
    fn swap_telemetry(&self, telemetry: Option<Arc<Telemetry>>) {
        let mut current = self.telemetry.lock().unwrap_or_else(|e| e.into_inner());
        let same = match (&*current, &telemetry) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if let Some(old) = std::mem::replace(&mut *current, telemetry).filter(|_| !same) {
            tokio::spawn(async move { old.shutdown(REPLACED_TELEMETRY_GRACE).await });
        }
    }

    /// One reload asked for by `run`: reads the config with `load`, has `watch` follow the
    /// files it names, and swaps it in; or refuses it, logged and counted.
    fn reload_with(
        &self,
        watch: Option<&ConfigWatch>,
        load: &impl Fn() -> Result<Config, ConfigErrors>,
    ) {
        let config = match load() {
            Ok(config) => config,
            Err(errors) => {
                self.reload_refused();
                tracing::error!(errors = %errors, "config reload refused; the old config stays in force");
                return;
            }
        };
        // Followed even when the reload is refused: fixing a file it names asks for the next.
        if let Some(watch) = watch {
            watch.follow(&config);
        }
        match self.reload(&config) {
            Ok(()) => tracing::info!("config reloaded"),
            Err(err) => {
                tracing::error!(error = %err, "config reload refused; the old config stays in force");
            }
        }
    }

    /// Counts a reload refused before it reached [`Running::reload`] (an invalid file).
    pub fn reload_refused(&self) {
        self.metrics.config_reload(ReloadResult::Error);
    }

    /// How long what capture and telemetry hold may take to go out at the end: the drain
    /// time, at least [`MIN_FLUSH`].
    fn flush_time(&self) -> Duration {
        let config = self.config.lock().unwrap_or_else(|e| e.into_inner());
        config.timeouts.drain.max(MIN_FLUSH)
    }

    /// Stops accepting, lets in-flight exchanges finish up to the drain deadline, and returns
    /// when both listeners are done.
    pub async fn stop(self) {
        let drain = self.flush_time();
        self.health.set_draining(true);
        let _ = self.stop.send(true);
        if let Err(err) = self.workers.join().await {
            tracing::warn!(error = %err, "agent listener ended with an error");
        }
        // The calls are done: what capture holds is written within the drain time.
        if let Some(capture) = &self.capture {
            capture.flush(drain).await;
        }
        // The calls are done: their spans and points go out within the drain time.
        let telemetry = self
            .telemetry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(telemetry) = telemetry {
            telemetry.shutdown(drain).await;
        }
        for task in self.tasks {
            match task.await {
                Ok(Err(err)) => tracing::warn!(error = %err, "listener ended with an error"),
                Err(err) => tracing::warn!(error = %err, "listener task failed"),
                Ok(Ok(())) => {}
            }
        }
    }
}

/// What the idempotency store is built from: everything in `idempotency` but
/// `upstream_honours_keys` (a policy setting, applied on reload).
fn store_settings(config: &Config) -> IdempotencyConfig {
    IdempotencyConfig {
        upstream_honours_keys: false,
        ..config.policy.idempotency.clone()
    }
}

fn server_settings(config: &Config) -> ServerSettings {
    ServerSettings {
        header_read: config.timeouts.header_read,
        max_header_bytes: config.limits.max_header_bytes,
        max_headers: config.limits.max_headers,
        max_connections: config.limits.max_connections,
        max_h2_streams: config.limits.max_h2_streams,
        drain: config.timeouts.drain,
    }
}

async fn wait_stop(mut stopped: watch::Receiver<bool>) {
    // Either a stop was sent, or every sender is gone: both mean stop.
    let _ = stopped.wait_for(|stop| *stop).await;
}
