//! `origins`: the browser origins allowed to call through strata.
//!
//! A web page an attacker controls can make a browser send requests to a local MCP server
//! once its host name is rebound to 127.0.0.1 (DNS rebinding); the browser then still labels
//! each request with the attacker's `Origin`. MCP 2025-11-25 (transports §Security Warning)
//! asks servers to validate `Origin` and answer 403 when it is present and not allowed.
//! Non-browser agents send no `Origin`, so requests without one always pass.
//!
//! Entries are kept as browsers serialise an origin (RFC 6454 §6.2): lowercase scheme and
//! host, and no port when it is the scheme's default. The check is then one exact comparison
//! per entry (ASCII case-insensitive, to forgive a proxy that upper-cases).

use std::str::FromStr;

use http::uri::Authority;

/// The allow-list. Empty means no check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origins(Vec<Box<str>>);

impl Origins {
    pub fn new(entries: Vec<Box<str>>) -> Self {
        Origins(entries)
    }

    /// Whether there is a list to check against.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries, normalised.
    pub fn entries(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|e| &**e)
    }

    /// Whether a request carrying `origin` (the header's value) may pass. With an empty
    /// list every origin passes.
    pub fn allows(&self, origin: &[u8]) -> bool {
        self.0.is_empty()
            || self
                .0
                .iter()
                .any(|e| e.as_bytes().eq_ignore_ascii_case(origin))
    }
}

/// Parses one configured origin (`scheme://host[:port]`) into its serialised form.
pub(super) fn parse_origin(text: &str) -> Result<Box<str>, String> {
    let text = text.trim();
    let bad = |why: &str| {
        format!(
            "invalid origin {text:?}: {why}; expected scheme://host[:port], e.g. https://app.example.com"
        )
    };
    let (scheme, rest) = text.split_once("://").ok_or_else(|| bad("no scheme"))?;
    let scheme_ok = scheme
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !scheme_ok {
        return Err(bad("bad scheme"));
    }
    if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return Err(bad(
            "an origin has a host and nothing after it (no path, no user)",
        ));
    }
    let authority = Authority::from_str(rest).map_err(|_| bad("bad host or port"))?;
    // `Authority` accepts any digits after the colon; a port must also fit in 16 bits.
    if authority.port_u16().is_none() && rest.len() > authority.host().len() {
        return Err(bad("bad port"));
    }
    let scheme = scheme.to_ascii_lowercase();
    let host = authority.host().to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    Ok(match authority.port_u16() {
        Some(port) if Some(port) != default_port => format!("{scheme}://{host}:{port}"),
        _ => format!("{scheme}://{host}"),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_normalised_as_browsers_send_them() {
        let ok = [
            ("https://App.Example.com", "https://app.example.com"),
            ("http://localhost:80", "http://localhost"),
            ("https://x.example:443", "https://x.example"),
            ("http://127.0.0.1:6274", "http://127.0.0.1:6274"),
            ("http://[::1]:3000", "http://[::1]:3000"),
            ("vscode-webview://abc", "vscode-webview://abc"),
        ];
        for (text, want) in ok {
            assert_eq!(&*parse_origin(text).unwrap(), want, "{text}");
        }
        for bad in [
            "app.example.com",
            "https://",
            "https://a.example/",
            "https://a.example/path",
            "https://u@a.example",
            "https://a.example:99999",
            "1http://a",
            "*",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_check() {
        let none = Origins::default();
        assert!(none.allows(b"https://evil.example"));
        let list = Origins::new(vec!["https://app.example.com".into()]);
        assert!(list.allows(b"https://app.example.com"));
        assert!(list.allows(b"HTTPS://APP.EXAMPLE.COM"));
        assert!(!list.allows(b"https://app.example.com.evil.example"));
        assert!(!list.allows(b"null"));
        assert!(!list.allows(b""));
    }
}
