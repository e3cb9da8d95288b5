//! A plain HTTP agent for the policy tests: one 2026-07-28 (stateless) JSON-RPC POST at a
//! time, with any extra headers, every wait bounded.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

/// What the agent got.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    /// Empty when the body broke.
    pub body: Vec<u8>,
}

#[derive(Clone)]
pub struct Agent {
    client: Client<HttpConnector, Full<Bytes>>,
    at: SocketAddr,
}

impl Agent {
    pub fn new(at: SocketAddr) -> Agent {
        Agent {
            client: Client::builder(TokioExecutor::new()).build_http(),
            at,
        }
    }

    /// `tools/call` of `tool` with `args` and JSON-RPC id `id`.
    pub async fn call(
        &self,
        id: Value,
        tool: &str,
        args: Value,
        headers: &[(&str, &str)],
    ) -> Answer {
        let body = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}
            }}
        });
        self.post(&body, headers).await
    }

    pub async fn post(&self, body: &Value, headers: &[(&str, &str)]) -> Answer {
        let mut request = http::Request::post(format!("http://{}/mcp", self.at))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        let response = tokio::time::timeout(Duration::from_secs(20), self.client.request(request))
            .await
            .expect("the call timed out")
            .unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body =
            match tokio::time::timeout(Duration::from_secs(20), response.into_body().collect())
                .await
            {
                Ok(Ok(collected)) => collected.to_bytes().to_vec(),
                _ => Vec::new(),
            };
        Answer {
            status,
            headers,
            body,
        }
    }
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The value of one series in Prometheus text (summed over matching series), 0 when absent.
pub fn series(text: &str, family: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(family) && l[family.len()..].starts_with('{'))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
