//! strata's `/metrics`, fetched over HTTP from the child's admin listener, as Prometheus
//! would.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use serde_json::Value;
use strata::demo::{CallKey, calls_total};
use strata::testbed::client::{self, McpClient};

/// One scrape.
pub struct Scrape {
    pub text: String,
}

impl Scrape {
    pub async fn fetch(admin: SocketAddr) -> Scrape {
        let client = McpClient::modern(admin);
        let req = Request::get(format!("http://{admin}/metrics"))
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resp = client.send(req).await.unwrap();
        let reply = client::collect(Value::Null, resp, client::DEFAULT_TIMEOUT)
            .await
            .unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        Scrape {
            text: String::from_utf8(reply.body.to_vec()).unwrap(),
        }
    }

    /// Every `strata_calls_total` series.
    pub fn calls(&self) -> BTreeMap<CallKey, u64> {
        calls_total(&self.text)
    }

    /// The sum of every series of `metric` (a counter or gauge name, without `_bucket` and
    /// the like); 0 when it has no series.
    pub fn sum(&self, metric: &str) -> f64 {
        self.text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let rest = l.strip_prefix(metric)?;
                let value = match rest.chars().next()? {
                    '{' => rest.rsplit_once('}')?.1,
                    ' ' => rest,
                    _ => return None,
                };
                value.trim().parse::<f64>().ok()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_a_family_and_not_its_longer_namesakes() {
        let s = Scrape {
            text: "# TYPE strata_x counter\nstrata_x{a=\"1\"} 2\nstrata_x{a=\"}\"} 3\n\
                   strata_x_total 9\nstrata_y 1\nstrata_x 4\n"
                .into(),
        };
        assert_eq!(s.sum("strata_x"), 9.0);
        assert_eq!(s.sum("strata_z"), 0.0);
    }
}
