//! The two ways an agent's HTTP/1.1 request reaches the upstream connection, side by side:
//! strata's own (`agent_h1` reads the head, its fields go out as read) and hyper's (hyper's
//! server reads it into a map, the hop rules run on the map). Both end in the same request
//! encoder (`h1_conns/wire.rs`). For one request, the two must send the upstream the same
//! message: one request, framed by the body that follows it, with the same end-to-end
//! fields. For the fuzz target (`fuzz/fuzz_targets/forwarded_framing.rs`) and the fixed-seed
//! property test beside this file; not used on the data path.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use std::collections::BTreeMap;

use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;

use super::agent_h1::request::{self, HeadLimits, Parsed};
use super::h1_conns::wire::{Fields, encode_request};
use crate::http::forward::{self, Hop, Peer};

/// The upstream bytes each way took, head and body; `None` where that way forwards nothing
/// (strata's own hands the connection to hyper; hyper refuses the request).
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct Forwarded {
    pub own: Option<Vec<u8>>,
    pub hyper: Option<Vec<u8>>,
}

/// What a request sent upstream says, read back strictly.
#[derive(Debug, PartialEq, Eq)]
struct Sent {
    method: String,
    target: String,
    /// Every field by its lower-cased name, each name's values in order: the order of
    /// fields with different names means nothing (RFC 9110 §5.3).
    fields: BTreeMap<String, Vec<Vec<u8>>>,
    body: Vec<u8>,
}

/// Forwards `wire` (a request head and what follows it) both ways, to `upstream`.
#[doc(hidden)]
pub fn forward_both_ways(wire: &[u8], rewrite_host: bool) -> Forwarded {
    let agent = Peer::new(SocketAddr::from(([127, 0, 0, 1], 40000)));
    let hop = Hop::new(http::Version::HTTP_11, &agent);
    Forwarded {
        own: own_way(wire, rewrite_host, &hop),
        hyper: hyper_way(wire, rewrite_host, &hop),
    }
}

const UPSTREAM: &str = "up.example:8000";

fn own_way(wire: &[u8], rewrite_host: bool, hop: &Hop<'_>) -> Option<Vec<u8>> {
    let limits = HeadLimits {
        max_bytes: 64 * 1024,
        max_fields: 100,
    };
    let Parsed::Complete(mut head) = request::parse(wire, limits) else {
        return None;
    };
    let length = usize::try_from(head.content_length).ok()?;
    let body = wire.get(head.len..head.len.checked_add(length)?)?;
    let bytes = Bytes::copy_from_slice(&wire[..head.len]);
    let (request, mut fields) = head.request_and_fields(bytes).ok()?;
    fields.set_host(rewrite_host, UPSTREAM);
    let target = request.uri().path_and_query().map_or("/", |pq| pq.as_str());
    let mut out = Vec::new();
    encode_request(
        &mut out,
        request.method(),
        target,
        Fields::AsRead(&fields),
        hop,
        body.len(),
    );
    out.extend_from_slice(body);
    Some(out)
}

fn hyper_way(wire: &[u8], rewrite_host: bool, hop: &Hop<'_>) -> Option<Vec<u8>> {
    let (mut parts, body) = hyper_reads(wire)?;
    let authority = http::uri::Authority::from_static(UPSTREAM);
    forward::set_host(&mut parts.headers, &parts.uri, &authority, rewrite_host);
    forward::apply_hop_rules(&mut parts.headers).ok()?;
    let target = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let mut out = Vec::new();
    encode_request(
        &mut out,
        &parts.method,
        target,
        Fields::Map(&parts.headers),
        hop,
        body.len(),
    );
    out.extend_from_slice(&body);
    Some(out)
}

/// The first request hyper's HTTP/1.1 server reads from `wire`, and its whole body.
fn hyper_reads(wire: &[u8]) -> Option<(http::request::Parts, Bytes)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .ok()?;
    runtime.block_on(async {
        let (mut agent, server) = tokio::io::duplex(wire.len() + 64 * 1024);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let tx = tx.clone();
            async move {
                let (parts, body) = req.into_parts();
                if let Ok(body) = body.collect().await {
                    let _ = tx.send((parts, body.to_bytes()));
                }
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
            }
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            // The agent's bytes end at its request: its side is closed once they are written.
            .half_close(true)
            .serve_connection(TokioIo::new(server), service);
        agent.write_all(wire).await.ok()?;
        agent.shutdown().await.ok()?;
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), conn).await;
        let mut rx = rx;
        rx.recv().await
    })
}

/// Whether the two ways sent the upstream the same message; what differs, if not.
#[doc(hidden)]
pub fn same_message(forwarded: &Forwarded) -> Result<(), String> {
    let own = forwarded.own.as_deref().map(one_request).transpose()?;
    let hyper = forwarded.hyper.as_deref().map(one_request).transpose()?;
    match (own, hyper) {
        (Some(own), Some(hyper)) if own != hyper => {
            Err(format!("own sent {own:?}\nhyper sent {hyper:?}"))
        }
        (Some(own), None) => Err(format!("only strata's own forwarded it: {own:?}")),
        _ => Ok(()),
    }
}

/// Reads `sent` as an upstream would: exactly one request, its body framed by its one
/// `Content-Length` (no transfer coding: strata writes none), nothing after it.
fn one_request(sent: &[u8]) -> Result<Sent, String> {
    let mut slots = [httparse::EMPTY_HEADER; 128];
    let mut request = httparse::Request::new(&mut slots);
    let len = match request.parse(sent) {
        Ok(httparse::Status::Complete(len)) => len,
        other => return Err(format!("not one whole request head: {other:?}")),
    };
    let mut fields: BTreeMap<String, Vec<Vec<u8>>> = BTreeMap::new();
    let mut lengths = Vec::new();
    for field in request.headers.iter() {
        let name = field.name.to_ascii_lowercase();
        match name.as_str() {
            "content-length" => lengths.push(field.value.to_vec()),
            "transfer-encoding" | "connection" => {
                return Err(format!("`{name}` went upstream"));
            }
            _ => {}
        }
        fields.entry(name).or_default().push(field.value.to_vec());
    }
    let body = &sent[len..];
    let stated = match lengths.as_slice() {
        [] => 0,
        [one] => std::str::from_utf8(one)
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .ok_or_else(|| format!("Content-Length {one:?}"))?,
        more => return Err(format!("{} Content-Length fields", more.len())),
    };
    if stated != body.len() {
        return Err(format!(
            "Content-Length {stated} before a body of {}: the rest is another request",
            body.len()
        ));
    }
    Ok(Sent {
        method: request.method.unwrap_or("").to_owned(),
        target: request.path.unwrap_or("").to_owned(),
        fields,
        body: body.to_vec(),
    })
}

#[cfg(test)]
#[path = "differential/tests.rs"]
mod tests;
