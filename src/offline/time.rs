//! HAR's `startedDateTime`: ISO 8601 date and time with a zone (`2026-01-31T09:05:02.125Z`,
//! `…+01:00`, mitmproxy's microseconds `…02.125000+00:00`), to milliseconds since the epoch.

/// `text` as milliseconds since the Unix epoch; `None` when it is not such a date-time.
pub(super) fn epoch_ms(text: &str) -> Option<f64> {
    let (date, rest) = text.split_once(['T', 't', ' '])?;
    let (year, month, day) = ymd(date)?;
    let zone_at = rest.find(['Z', 'z', '+', '-'])?;
    let (clock, zone) = rest.split_at(zone_at);
    let seconds = clock_seconds(clock)?;
    let offset = zone_seconds(zone)?;
    let days = days_from_civil(year, month, day);
    Some(((days * 86_400) as f64 + seconds - offset as f64) * 1e3)
}

fn ymd(date: &str) -> Option<(i64, u32, u32)> {
    let mut parts = date.splitn(3, '-');
    let year = number(parts.next()?, 4)?;
    let month = u32::try_from(number(parts.next()?, 2)?).ok()?;
    let day = u32::try_from(number(parts.next()?, 2)?).ok()?;
    ((1..=12).contains(&month) && (1..=31).contains(&day)).then_some((year, month, day))
}

/// `HH:MM:SS` with an optional fraction, as seconds into the day.
fn clock_seconds(clock: &str) -> Option<f64> {
    let (whole, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut parts = whole.splitn(3, ':');
    let h = number(parts.next()?, 2)?;
    let m = number(parts.next()?, 2)?;
    let s = number(parts.next()?, 2)?;
    if h > 23 || m > 59 || s > 60 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let fraction: f64 = match fraction {
        "" => 0.0,
        digits => format!("0.{digits}").parse().ok()?,
    };
    Some((h * 3600 + m * 60 + s) as f64 + fraction)
}

/// `Z`, `+HH:MM`, `-HHMM` or `+HH`, as seconds east of UTC.
fn zone_seconds(zone: &str) -> Option<i64> {
    if zone.eq_ignore_ascii_case("z") {
        return Some(0);
    }
    let sign = match zone.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
    let (h, m) = match digits.len() {
        2 => (number(&digits, 2)?, 0),
        4 => (number(&digits[..2], 2)?, number(&digits[2..], 2)?),
        _ => return None,
    };
    Some(sign * (h * 3600 + m * 60))
}

/// Exactly `len` ASCII digits.
fn number(text: &str, len: usize) -> Option<i64> {
    (text.len() == len && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_forms_har_writers_use() {
        assert_eq!(epoch_ms("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(epoch_ms("1970-01-01T00:00:01.250Z"), Some(1250.0));
        // 2024-02-29 is day 19782 since the epoch.
        assert_eq!(
            epoch_ms("2024-02-29T01:00:00+01:00"),
            Some(19_782.0 * 86_400e3)
        );
        let micro = epoch_ms("2024-02-29T00:00:00.125000+00:00").unwrap();
        assert!((micro - (19_782.0 * 86_400e3 + 125.0)).abs() < 1e-6);
        assert_eq!(
            epoch_ms("1970-01-01T00:00:00-0130"),
            Some(5_400e3),
            "west of UTC is later"
        );
    }

    #[test]
    fn refuses_what_is_not_a_date_time() {
        for text in [
            "",
            "yesterday",
            "2024-02-29",
            "2024-02-29T00:00:00",
            "2024-13-01T00:00:00Z",
            "2024-02-29T24:00:00Z",
            "2024-02-29T00:00:00.x1Z",
            "2024-02-29T00:00:00+1",
        ] {
            assert_eq!(epoch_ms(text), None, "{text:?}");
        }
    }
}
