//! How claims and records are written as Redis values. A readable first part (so
//! `redis-cli GET` tells what a key holds), then for records a length-prefixed binary layout:
//! no base64, no JSON escaping of bodies.
//!
//! ```text
//! marker: "strata-idem/1 inflight " <fingerprint, 32 hex> " " <claim token, 16 hex>
//! record: "strata-idem/1 done " <fingerprint, 32 hex> "\n"
//!         status u16 | flags u8 (bit 0: SSE)
//!         u32 id count,     then per id:     u32 len, bytes
//!         u32 header count, then per header: u32 len, name, u32 len, value
//!         u32 body len, body
//! ```
//! Integers are big-endian. The version in the prefix changes with the layout; a value this
//! build cannot read is reported as corrupt (the call is forwarded without idempotency).

use bytes::{BufMut, Bytes};

use super::fingerprint::Fingerprint;
use super::record::Record;

const MARKER: &[u8] = b"strata-idem/1 inflight ";
const DONE: &[u8] = b"strata-idem/1 done ";
const FP_HEX: usize = 32;
const TOKEN_HEX: usize = 16;

/// What a Redis value holds.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Stored {
    InFlight(Fingerprint),
    /// A record, decoded only when its fingerprint is the one asked for.
    Done(Fingerprint, Option<Record>),
}

/// The in-flight marker. The token makes it this claim's own, so `complete` and `release`
/// only ever replace or delete the marker they set (not a later claim's, after an expiry).
pub(super) fn marker(fp: Fingerprint, token: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(MARKER.len() + FP_HEX + 1 + TOKEN_HEX);
    out.extend_from_slice(MARKER);
    out.extend_from_slice(fp.to_hex().as_bytes());
    out.push(b' ');
    out.extend_from_slice(format!("{token:016x}").as_bytes());
    out
}

/// The size [`encode`] will produce.
pub(super) fn encoded_len(r: &Record) -> usize {
    let ids: usize = r.ids.iter().map(|id| 4 + id.len()).sum();
    let headers: usize = r.headers.iter().map(|(n, v)| 8 + n.len() + v.len()).sum();
    DONE.len() + FP_HEX + 1 + 3 + 4 + ids + 4 + headers + 4 + r.body.len()
}

pub(super) fn encode(fp: Fingerprint, r: &Record) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(r));
    out.extend_from_slice(DONE);
    out.extend_from_slice(fp.to_hex().as_bytes());
    out.push(b'\n');
    out.put_u16(r.status);
    out.put_u8(u8::from(r.sse));
    put_len(&mut out, r.ids.len());
    for id in &r.ids {
        put_bytes(&mut out, id.as_bytes());
    }
    put_len(&mut out, r.headers.len());
    for (name, value) in &r.headers {
        put_bytes(&mut out, name.as_bytes());
        put_bytes(&mut out, value);
    }
    put_bytes(&mut out, &r.body);
    out
}

// Lengths are bounded by `max_record_bytes` (at most 1 GiB by config), so they fit in u32.
fn put_len(out: &mut Vec<u8>, n: usize) {
    out.put_u32(u32::try_from(n).unwrap_or(u32::MAX));
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// Reads a value; the record is decoded only when its fingerprint is `want`.
pub(super) fn decode(value: &Bytes, want: Fingerprint) -> Result<Stored, &'static str> {
    if let Some(rest) = value.strip_prefix(MARKER) {
        let fp = rest.get(..FP_HEX).and_then(Fingerprint::from_hex);
        return fp.map(Stored::InFlight).ok_or("bad in-flight marker");
    }
    let rest = value.strip_prefix(DONE).ok_or("unknown value")?;
    let fp = rest
        .get(..FP_HEX)
        .and_then(Fingerprint::from_hex)
        .ok_or("bad record fingerprint")?;
    if fp != want {
        return Ok(Stored::Done(fp, None));
    }
    let start = DONE.len() + FP_HEX + 1;
    let mut r = Reader {
        value,
        at: start.min(value.len()),
    };
    if value.get(start - 1) != Some(&b'\n') {
        return Err("bad record prefix");
    }
    let head = r.take(3)?;
    let status = u16::from_be_bytes([head[0], head[1]]);
    let sse = head[2] & 1 == 1;
    let mut ids = Vec::new();
    for _ in 0..r.len()? {
        ids.push(r.text()?);
    }
    let mut headers = Vec::new();
    for _ in 0..r.len()? {
        let name = r.text()?;
        let len = r.len()?;
        headers.push((name, r.take(len)?.to_vec()));
    }
    let len = r.len()?;
    let from = r.at;
    r.take(len)?;
    let body = value.slice(from..r.at);
    if r.at != value.len() {
        return Err("trailing bytes after the record");
    }
    let record = Record {
        status,
        headers,
        body,
        sse,
        ids,
    };
    Ok(Stored::Done(fp, Some(record)))
}

struct Reader<'a> {
    value: &'a Bytes,
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], &'static str> {
        let end = self.at.checked_add(n).ok_or("truncated record")?;
        let bytes = self.value.get(self.at..end).ok_or("truncated record")?;
        self.at = end;
        Ok(bytes)
    }

    fn len(&mut self) -> Result<usize, &'static str> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn text(&mut self) -> Result<String, &'static str> {
        let len = self.len()?;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| "record text is not UTF-8")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            status: 200,
            headers: vec![
                ("content-type".into(), b"text/event-stream".to_vec()),
                ("x-odd".into(), vec![0xff, b'\n']),
            ],
            body: Bytes::from_static(b"data: {\"id\":1}\n\n"),
            sse: true,
            ids: vec!["1".into(), "\"b\"".into()],
        }
    }

    #[test]
    fn records_round_trip() {
        let fp = Fingerprint(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        let bytes = Bytes::from(encode(fp, &record()));
        assert_eq!(bytes.len(), encoded_len(&record()));
        assert_eq!(record().size(), bytes.len());
        assert_eq!(decode(&bytes, fp), Ok(Stored::Done(fp, Some(record()))));
        // Another fingerprint: the record is not decoded.
        assert_eq!(decode(&bytes, Fingerprint(1)), Ok(Stored::Done(fp, None)));
        // Every truncation is refused, never misread.
        for n in 0..bytes.len() {
            assert!(decode(&bytes.slice(..n), fp).is_err(), "{n}");
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert!(decode(&Bytes::from(longer), fp).is_err());
    }

    #[test]
    fn markers_round_trip() {
        let fp = Fingerprint(42);
        let m = Bytes::from(marker(fp, 7));
        assert!(m.starts_with(b"strata-idem/1 inflight 000"));
        assert!(m.ends_with(b" 0000000000000007"));
        assert_eq!(decode(&m, Fingerprint(1)), Ok(Stored::InFlight(fp)));
        assert!(decode(&Bytes::from_static(b"something else"), fp).is_err());
    }
}
