//! `Content-Length` values (RFC 9110 §8.6): one length, however many times it was stated.

/// Why `Content-Length` states no one length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("conflicting or invalid Content-Length")]
pub struct InvalidLength;

/// What the `Content-Length` fields of a head say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stated {
    /// The length, when a field states one.
    pub length: Option<u64>,
    /// It was stated more than once: a list (`213, 213`) or the field repeated. A proxy
    /// forwards one value instead (RFC 9110 §8.6).
    pub listed: bool,
}

/// A `Content-Length` value: 1*DIGIT, at most 19 of them (fits a u64).
pub fn parse_length(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
    })
}

/// The one length every `Content-Length` value states: equal values, listed or repeated,
/// are that length; different ones, or a value that is not 1*DIGIT, are an error.
pub fn stated_length<'a>(values: impl Iterator<Item = &'a [u8]>) -> Result<Stated, InvalidLength> {
    let mut stated = Stated {
        length: None,
        listed: false,
    };
    for value in values {
        for part in value.split(|&b| b == b',') {
            let n = parse_length(part.trim_ascii()).ok_or(InvalidLength)?;
            match stated.length {
                Some(prior) if prior != n => return Err(InvalidLength),
                Some(_) => stated.listed = true,
                None => stated.length = Some(n),
            }
        }
    }
    Ok(stated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stated(values: &[&'static str]) -> Result<Stated, InvalidLength> {
        stated_length(values.iter().map(|v| v.as_bytes()))
    }

    #[test]
    fn one_value_is_its_length() {
        let one = stated(&["213"]).unwrap();
        assert_eq!((one.length, one.listed), (Some(213), false));
        let none = stated(&[]).unwrap();
        assert_eq!((none.length, none.listed), (None, false));
    }

    #[test]
    fn equal_values_listed_or_repeated_are_one_length() {
        for values in [&["213, 213"][..], &["213", "213"], &["213 ,213", "213"]] {
            let s = stated(values).unwrap();
            assert_eq!((s.length, s.listed), (Some(213), true), "{values:?}");
        }
    }

    #[test]
    fn different_or_invalid_values_are_refused() {
        for values in [
            &["213, 214"][..],
            &["213", "214"],
            &["-1"],
            &["+5"],
            &[""],
            &["1 2"],
            &["99999999999999999999"],
        ] {
            assert_eq!(stated(values), Err(InvalidLength), "{values:?}");
        }
    }
}
