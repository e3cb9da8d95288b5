//! `strata-healthcheck`: the image's HEALTHCHECK probe. Exits 0 when strata's admin listener
//! answers `GET /healthz` with 200, 1 otherwise (Docker's healthy/unhealthy).
//!
//! The runtime image is distroless: no shell, no curl, no wget. A static busybox would bring a
//! shell back in, so the probe is this file instead: the standard library only, built by one
//! `rustc` call in the image's build stage, a few hundred KiB.
//!
//! ```text
//! strata-healthcheck [ADDR [PATH]]     ADDR: IP:PORT, default below; PATH: default /healthz
//! ```
//!
//! Address, first match wins: the first argument; `STRATA_HEALTHCHECK_ADDR`; `STRATA_ADMIN`
//! (strata's own override of `admin`), with an unspecified IP (`0.0.0.0`, `::`) read as
//! loopback; `127.0.0.1:9464`, the image's admin port.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::Duration;

const DEFAULT_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9464);
/// Connect, write and read each get this long; Docker's own `--timeout` bounds the whole.
const TIMEOUT: Duration = Duration::from_secs(2);
/// `HTTP/1.1 200`: all of the status line that matters.
const STATUS_PREFIX_LEN: usize = 12;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let addr = args.next();
    let path = args.next().unwrap_or_else(|| "/healthz".to_string());
    let result = target(addr).and_then(|addr| probe(addr, &path).map(|()| addr));
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("strata-healthcheck: {message}");
            ExitCode::FAILURE
        }
    }
}

fn target(arg: Option<String>) -> Result<SocketAddr, String> {
    let given = arg
        .or_else(|| std::env::var("STRATA_HEALTHCHECK_ADDR").ok())
        .or_else(|| std::env::var("STRATA_ADMIN").ok());
    let Some(text) = given else {
        return Ok(DEFAULT_ADDR);
    };
    let mut addr: SocketAddr = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not IP:PORT"))?;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        });
    }
    Ok(addr)
}

fn probe(addr: SocketAddr, path: &str) -> Result<(), String> {
    let fail = |what: &str, e: std::io::Error| format!("{addr}{path}: {what}: {e}");
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| fail("connect", e))?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
        .map_err(|e| fail("socket", e))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| fail("write", e))?;
    let mut head = [0u8; STATUS_PREFIX_LEN];
    stream.read_exact(&mut head).map_err(|e| fail("read", e))?;
    let line = String::from_utf8_lossy(&head);
    if line.starts_with("HTTP/1.") && &head[9..] == b"200" {
        Ok(())
    } else {
        Err(format!("{addr}{path}: answered {line:?}"))
    }
}
