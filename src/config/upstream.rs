//! The upstream MCP server's address: scheme and authority, nothing else.
//!
//! Request paths and queries pass through verbatim (the agent already addresses `/mcp` or
//! whatever the server uses), so an upstream URL with a path or query would be either ignored
//! or silently prepended. Both surprise; we reject them instead.
use std::fmt;

use http::uri::{Authority, Uri};

/// How strata talks to the upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    Https,
}

/// A validated upstream base: `http` or `https`, a host and an optional port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    pub scheme: Scheme,
    /// `host` or `host:port`; never carries userinfo.
    pub authority: Authority,
}

/// Why an upstream URL was rejected. The caller prefixes the key or flag it came from.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    #[error("invalid URL {url}: {reason}")]
    Invalid { url: String, reason: String },
    #[error("URL {url} has no scheme; expected e.g. http://127.0.0.1:8000")]
    MissingScheme { url: String },
    #[error("unsupported scheme {scheme:?} in {url}; expected http or https")]
    UnsupportedScheme { url: String, scheme: String },
    #[error(
        "URL {url} has a {part}; request paths pass through verbatim, so give only scheme://host:port"
    )]
    HasPathOrQuery { url: String, part: &'static str },
    #[error("URL {url} carries credentials; put them in request headers instead")]
    HasUserinfo { url: String },
    #[error("URL {url} has an invalid port; expected 1..=65535")]
    InvalidPort { url: String },
}

// === impl Scheme ===

impl Scheme {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }

    /// The port used when the authority has none (RFC 9110 §4.2).
    pub const fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// === impl Upstream ===

impl Upstream {
    /// Parses `http[s]://host[:port][/]`.
    pub fn parse(text: &str) -> Result<Self, UpstreamError> {
        let url = super::error::quoted(text);
        // `http::Uri` silently drops a fragment, so look for it before parsing.
        if text.contains('#') {
            return Err(UpstreamError::HasPathOrQuery {
                url,
                part: "fragment",
            });
        }
        let uri: Uri = text
            .parse()
            .map_err(|e: http::uri::InvalidUri| UpstreamError::Invalid {
                url: url.clone(),
                reason: e.to_string(),
            })?;
        let scheme = match uri.scheme_str() {
            Some("http") => Scheme::Http,
            Some("https") => Scheme::Https,
            Some(other) => {
                return Err(UpstreamError::UnsupportedScheme {
                    url,
                    scheme: other.to_owned(),
                });
            }
            None => return Err(UpstreamError::MissingScheme { url }),
        };
        if uri.query().is_some() || text.contains('?') {
            return Err(UpstreamError::HasPathOrQuery { url, part: "query" });
        }
        // `Uri` normalises an absent path to "/", so "/" is the only path we accept.
        if uri.path() != "/" {
            return Err(UpstreamError::HasPathOrQuery { url, part: "path" });
        }
        let Some(authority) = uri.authority().cloned() else {
            return Err(UpstreamError::Invalid {
                url,
                reason: "no host".to_owned(),
            });
        };
        if authority.as_str().contains('@') {
            return Err(UpstreamError::HasUserinfo { url });
        }
        if authority.host().is_empty() {
            return Err(UpstreamError::Invalid {
                url,
                reason: "no host".to_owned(),
            });
        }
        // `Authority` accepts "host:" and "host:99999" and then reports no port at all.
        let has_port_text = authority.as_str() != authority.host();
        if has_port_text && !matches!(authority.port_u16(), Some(p) if p != 0) {
            return Err(UpstreamError::InvalidPort { url });
        }
        Ok(Self { scheme, authority })
    }

    pub fn host(&self) -> &str {
        self.authority.host()
    }

    /// The explicit port, or the scheme's default.
    pub fn port(&self) -> u16 {
        self.authority
            .port_u16()
            .unwrap_or(self.scheme.default_port())
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.authority)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_scheme_and_authority() {
        let cases = [
            ("http://127.0.0.1:8000", Scheme::Http, "127.0.0.1", 8000),
            ("http://127.0.0.1:8000/", Scheme::Http, "127.0.0.1", 8000),
            (
                "https://mcp.example.com",
                Scheme::Https,
                "mcp.example.com",
                443,
            ),
            ("HTTP://h", Scheme::Http, "h", 80),
            ("http://[::1]:9000", Scheme::Http, "[::1]", 9000),
        ];
        for (text, scheme, host, port) in cases {
            let upstream = Upstream::parse(text).unwrap();
            assert_eq!(upstream.scheme, scheme, "{text}");
            assert_eq!(upstream.host(), host, "{text}");
            assert_eq!(upstream.port(), port, "{text}");
        }
        assert_eq!(
            Upstream::parse("http://h:1/").unwrap().to_string(),
            "http://h:1"
        );
    }

    #[test]
    fn rejects_everything_else() {
        let cases = [
            ("http://h/mcp", "has a path"),
            ("http://h?x=1", "has a query"),
            ("http://h/?", "has a query"),
            ("http://h#top", "has a fragment"),
            ("ftp://h", "unsupported scheme \"ftp\""),
            ("127.0.0.1:8000", "no scheme"),
            ("http://u:p@h", "credentials"),
            ("http://h:", "invalid port"),
            ("http://h:0", "invalid port"),
            ("http://h:65536", "invalid port"),
            ("http://", "invalid URL"),
            ("", "invalid URL"),
            ("http://:80", "no host"),
        ];
        for (text, want) in cases {
            let err = Upstream::parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
