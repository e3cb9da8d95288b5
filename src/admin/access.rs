//! Who may read the inspector: on a loopback admin listener anyone on the host, unless a
//! token is set; otherwise only a request with `Authorization: Bearer <token>`. A
//! non-loopback listener without a token serves nobody (config validation refuses to enable
//! the inspector that way; this holds regardless).

use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};

use super::{AdminBody, text};
use crate::observe::recent::Inspector;

/// Whether the request may read the inspector.
pub(super) fn allowed(headers: &HeaderMap, inspector: &Inspector, loopback: bool) -> bool {
    match inspector.token() {
        Some(token) => headers
            .get(header::AUTHORIZATION)
            .and_then(|value| bearer(value.as_bytes()))
            .is_some_and(|offered| token.matches(offered)),
        None => loopback,
    }
}

/// 401, naming the scheme expected.
pub(super) fn unauthorized() -> Response<AdminBody> {
    let mut response = text(StatusCode::UNAUTHORIZED, "unauthorized");
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"strata\""),
    );
    response
}

/// The credentials of a `Bearer` authorization (the scheme's case ignored, RFC 9110).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || !rest.starts_with(b" ") {
        return None;
    }
    Some(rest.trim_ascii())
}
