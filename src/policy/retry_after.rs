//! `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use http::header::RETRY_AFTER;

/// The wait a response asks for. Returns `None` when:
/// - there is no `Retry-After` header, or it is not valid UTF-8;
/// - it is neither a non-negative integer nor an HTTP-date.
///
/// A date in the past means "now" (zero).
pub fn parse(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    parse_value(headers.get(RETRY_AFTER)?.as_bytes(), now)
}

/// [`parse`] of the field's value.
pub fn parse_value(value: &[u8], now: SystemTime) -> Option<Duration> {
    let value = std::str::from_utf8(value).ok()?.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse::<u64>().ok().map(Duration::from_secs);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(parse(&with("1"), now), Some(Duration::from_secs(1)));
        assert_eq!(parse(&with(" 120 "), now), Some(Duration::from_secs(120)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(parse(&with(&later), now), Some(Duration::from_secs(30)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(parse(&with(&earlier), now), Some(Duration::ZERO));
        assert_eq!(parse(&with("-1"), now), None);
        assert_eq!(parse(&with("soon"), now), None);
        assert_eq!(parse(&HeaderMap::new(), now), None);
    }
}
