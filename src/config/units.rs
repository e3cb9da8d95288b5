//! Durations ("250ms", "5s", "2m", "1h") and sizes ("65536", "64KiB", "1MiB", "1GiB") as the
//! config file spells them. Each parser returns the message for the caller to prefix with the
//! key path, so every error reads `timeouts.connect: invalid duration ...`.
use std::time::Duration;

/// The longest duration accepted anywhere: 365 days.
///
/// Runtime code adds timeouts to `Instant`s; bounding them here means that addition can never
/// overflow (and panic), whatever the file says. Larger values are an error, not clamped.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// Which durations a setting accepts besides positive ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Zero {
    /// "0s" or "off" switches the setting off: `None`.
    MeansOff,
    /// "0s" is a meaningful duration (e.g. no drain wait); "off" is an error.
    Allowed,
    /// Zero would fail every request (e.g. a connect timeout of 0s); both are errors.
    Rejected,
}

const DURATION_HINT: &str = "expected e.g. 250ms, 5s, 2m, 1h";
const SIZE_HINT: &str = "expected integer bytes or e.g. 64KiB, 1MiB, 1GiB";

/// Parses a duration setting under the given [`Zero`] rule.
///
/// Returns `Ok(None)` only for [`Zero::MeansOff`] with "off" or a zero duration.
pub(super) fn duration_setting(text: &str, zero: Zero) -> Result<Option<Duration>, String> {
    let trimmed = text.trim();
    let parsed = if trimmed.eq_ignore_ascii_case("off") {
        Duration::ZERO
    } else {
        duration(trimmed)?
    };
    if !parsed.is_zero() {
        return Ok(Some(parsed));
    }
    match zero {
        Zero::MeansOff => Ok(None),
        Zero::Allowed if !trimmed.eq_ignore_ascii_case("off") => Ok(Some(parsed)),
        Zero::Allowed => Err(format!(
            "cannot be {}; use \"0s\" for no wait",
            super::error::quoted(trimmed)
        )),
        Zero::Rejected => Err(format!(
            "must be greater than zero, got {}",
            super::error::quoted(trimmed)
        )),
    }
}

/// Parses `<digits><unit>` with unit `ms`, `s`, `m` or `h`.
///
/// A bare number is rejected on purpose: "30" could mean seconds or milliseconds, and a wrong
/// guess here is a timeout off by a factor of a thousand.
pub(super) fn duration(text: &str) -> Result<Duration, String> {
    let invalid = || {
        format!(
            "invalid duration {}; {DURATION_HINT}",
            super::error::quoted(text)
        )
    };
    let (number, unit) = split_number(text.trim()).ok_or_else(invalid)?;
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60 * 1_000,
        "h" => 60 * 60 * 1_000,
        _ => return Err(invalid()),
    };
    let too_long = || {
        format!(
            "duration {} is too long; the maximum is {}h",
            super::error::quoted(text),
            MAX_DURATION.as_secs() / 3600
        )
    };
    let millis = number.checked_mul(millis_per_unit).ok_or_else(too_long)?;
    let parsed = Duration::from_millis(millis);
    if parsed > MAX_DURATION {
        return Err(too_long());
    }
    Ok(parsed)
}

/// Parses a byte size: bare digits are bytes; units are binary (`B`, `KiB`, `MiB`, `GiB`).
///
/// Decimal units (`KB`, `MB`) are rejected rather than guessed, since both readings are common.
pub(super) fn size(text: &str) -> Result<u64, String> {
    let invalid = || format!("invalid size {}; {SIZE_HINT}", super::error::quoted(text));
    let (number, unit) = split_number(text.trim()).ok_or_else(invalid)?;
    let multiplier: u64 = match unit {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return Err(invalid()),
    };
    number
        .checked_mul(multiplier)
        .ok_or_else(|| format!("size {} is too large", super::error::quoted(text)))
}

/// Splits leading ASCII digits from the unit that follows (spaces between are allowed).
///
/// Returns `None` when:
/// - there are no leading digits (including signs and decimals like "1.5s"),
/// - the number does not fit in a `u64`.
fn split_number(text: &str) -> Option<(u64, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let (number, unit) = text.split_at(digits);
    Some((number.parse().ok()?, unit.trim_start()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let ok = [
            ("250ms", Duration::from_millis(250)),
            ("5s", Duration::from_secs(5)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            (" 30 s ", Duration::from_secs(30)),
            ("0s", Duration::ZERO),
            ("8760h", MAX_DURATION),
        ];
        for (text, want) in ok {
            assert_eq!(duration(text), Ok(want), "{text}");
        }
        for text in [
            "",
            "5",
            "5 parsecs",
            "1.5s",
            "-1s",
            "s",
            "5S",
            "1d",
            "8761h",
        ] {
            assert!(duration(text).is_err(), "{text} should be rejected");
        }
        assert_eq!(
            duration("5 parsecs"),
            Err("invalid duration \"5 parsecs\"; expected e.g. 250ms, 5s, 2m, 1h".to_owned())
        );
        assert_eq!(
            duration("99999999999999999999h"),
            Err(
                "invalid duration \"99999999999999999999h\"; expected e.g. 250ms, 5s, 2m, 1h"
                    .to_owned()
            )
        );
        assert_eq!(
            duration("18446744073709551615h"),
            Err("duration \"18446744073709551615h\" is too long; the maximum is 8760h".to_owned())
        );
    }

    #[test]
    fn duration_zero_rules() {
        use Zero::*;
        assert_eq!(duration_setting("off", MeansOff), Ok(None));
        assert_eq!(duration_setting("OFF", MeansOff), Ok(None));
        assert_eq!(duration_setting("0ms", MeansOff), Ok(None));
        assert_eq!(
            duration_setting("1s", MeansOff),
            Ok(Some(Duration::from_secs(1)))
        );
        assert_eq!(duration_setting("0s", Allowed), Ok(Some(Duration::ZERO)));
        assert!(duration_setting("off", Allowed).is_err());
        assert!(duration_setting("0s", Rejected).is_err());
        assert!(duration_setting("off", Rejected).is_err());
        assert_eq!(
            duration_setting("250ms", Rejected),
            Ok(Some(Duration::from_millis(250)))
        );
    }

    #[test]
    fn sizes() {
        let ok = [
            ("0", 0),
            ("1048576", 1_048_576),
            ("512B", 512),
            ("64KiB", 65_536),
            ("1MiB", 1_048_576),
            ("1 GiB", 1 << 30),
        ];
        for (text, want) in ok {
            assert_eq!(size(text), Ok(want), "{text}");
        }
        for text in [
            "",
            "1MB",
            "1kib",
            "1.5MiB",
            "-1",
            "MiB",
            "18446744073709551615GiB",
        ] {
            assert!(size(text).is_err(), "{text} should be rejected");
        }
    }
}
