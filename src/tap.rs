//! `strata tap`: prints each call as it finishes, read from the inspector's live stream
//! (`GET /calls/stream` on the admin listener), one line per call as `linkerd viz tap` does,
//! or the record's JSON unchanged (`--json`).
//!
//! Exit status: 0 after Ctrl-C; 1 when strata cannot be reached, refuses the stream, or
//! closes it (it stopped, or dropped this reader for falling behind).

mod events;
mod line;

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::config::{BearerToken, DEFAULT_ADMIN};
use events::Events;

/// What to tap, from the command line.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct TapArgs {
    /// strata's admin listener.
    #[arg(long, value_name = "ADDR", default_value_t = DEFAULT_ADMIN)]
    pub admin: SocketAddr,
    /// Only calls with this outcome, e.g. TOOL_ERROR.
    #[arg(long)]
    pub outcome: Option<String>,
    /// Only calls failed at this layer: transport, protocol, interaction or application.
    #[arg(long)]
    pub layer: Option<String>,
    /// Only calls of this tool.
    #[arg(long)]
    pub tool: Option<String>,
    /// Only calls of this method, e.g. tools/call.
    #[arg(long)]
    pub method: Option<String>,
    /// Only calls of this client (`name@version`).
    #[arg(long)]
    pub client: Option<String>,
    /// Print each record's JSON line as strata sends it.
    #[arg(long)]
    pub json: bool,
    /// A file holding the inspector's bearer token (`inspector.token_file`).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// Runs until Ctrl-C (success) or until the stream ends or fails (failure).
pub async fn run(args: TapArgs) -> ExitCode {
    let tapped = tokio::select! {
        result = tap(&args) => result,
        _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
    };
    if let Err(message) = tapped {
        eprintln!("strata tap: {message}");
    }
    ExitCode::FAILURE
}

/// Streams calls to stdout; returns why it stopped.
async fn tap(args: &TapArgs) -> Result<(), String> {
    let token = match &args.token_file {
        Some(path) => Some(read_token(path)?),
        None => None,
    };
    let mut request = Request::get(stream_uri(args)).header(header::ACCEPT, "text/event-stream");
    if let Some(token) = &token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {}", token.as_str()));
    }
    let request = request
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("cannot build the request: {e}"))?;
    let client = Client::builder(TokioExecutor::new()).build_http();
    let unreachable =
        |e: &dyn std::fmt::Display| format!("cannot reach strata at {}: {e}", args.admin);
    let response = client.request(request).await.map_err(|e| unreachable(&e))?;
    refused(response.status(), args.admin)?;
    let style = line::Style::for_stdout(std::io::stdout().is_terminal());
    let mut body = response.into_body();
    let mut events = Events::default();
    let mut out = std::io::stdout();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("strata closed the stream: {e}"))?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        for record in events.push(data) {
            let text = match args.json {
                true => record,
                false => line::format(&record, style),
            };
            if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
                // stdout closed (`strata tap | head`): nothing left to do.
                return Ok(());
            }
        }
    }
    Err("strata closed the stream".to_owned())
}

/// Why strata refused the stream, when it did.
fn refused(status: StatusCode, admin: SocketAddr) -> Result<(), String> {
    match status {
        StatusCode::OK => Ok(()),
        StatusCode::NOT_FOUND => Err(format!(
            "strata at {admin} has no inspector (set inspector.enabled: true)"
        )),
        StatusCode::UNAUTHORIZED => Err(format!(
            "strata at {admin} refused the token (pass --token-file with inspector.token_file's)"
        )),
        other => Err(format!("strata at {admin} answered {other}")),
    }
}

fn read_token(path: &std::path::Path) -> Result<BearerToken, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
    BearerToken::from_text(&text)
        .ok_or_else(|| format!("the token file {} is empty", path.display()))
}

/// `http://ADMIN/calls/stream?…` with the filters given.
fn stream_uri(args: &TapArgs) -> String {
    let filters = [
        ("outcome", &args.outcome),
        ("layer", &args.layer),
        ("tool", &args.tool),
        ("method", &args.method),
        ("client", &args.client),
    ];
    let mut uri = format!("http://{}/calls/stream", args.admin);
    let given = filters
        .iter()
        .filter_map(|(name, v)| Some((name, v.as_deref()?)));
    for (i, (name, value)) in given.enumerate() {
        uri.push(if i == 0 { '?' } else { '&' });
        uri.push_str(name);
        uri.push('=');
        uri.push_str(&percent_encode(value));
    }
    uri
}

/// Every byte but unreserved ones (RFC 3986) as `%XX`.
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_go_into_the_query() {
        let mut args = TapArgs {
            admin: DEFAULT_ADMIN,
            outcome: None,
            layer: Some("transport".into()),
            tool: Some("a b/c".into()),
            method: None,
            client: None,
            json: false,
            token_file: None,
        };
        assert_eq!(
            stream_uri(&args),
            "http://127.0.0.1:9464/calls/stream?layer=transport&tool=a%20b%2Fc"
        );
        args.layer = None;
        args.tool = None;
        assert_eq!(stream_uri(&args), "http://127.0.0.1:9464/calls/stream");
    }
}
