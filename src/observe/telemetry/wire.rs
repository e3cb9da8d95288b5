//! The protobuf wire format, as much of it as an OTLP trace export request needs (varints,
//! fixed64/fixed32, length-delimited fields), written straight into one buffer per batch.
//!
//! Written by hand because a measurement says it must be (`bench/README.md`, "OpenTelemetry
//! export"): going through the SDK's `SpanData` and the crate's generated messages made every
//! text of every span twice more (an owned attribute, then a message field) and was most of
//! a traced call's cost. Tested against the official definitions (`opentelemetry-proto`),
//! which decode what this writes.

/// Wire types (protobuf encoding, "Message Structure").
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// An OTLP `AnyValue` of an attribute.
#[derive(Clone, Copy, Debug)]
pub(super) enum AnyValue<'a> {
    Str(&'a str),
    Int(i64),
    Bool(bool),
}

/// A buffer protobuf fields are appended to.
#[derive(Debug, Default)]
pub(super) struct Wire {
    buf: Vec<u8>,
}

impl Wire {
    pub(super) fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// Appends bytes written elsewhere (a pre-encoded message's fields).
    pub(super) fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.buf.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.buf.push(value as u8);
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.varint(u64::from(field << 3 | u32::from(wire_type)));
    }

    /// A `uint32`/`int64`/`bool`/enum field (negative `int64` as ten bytes, as protobuf has it).
    pub(super) fn uint(&mut self, field: u32, value: u64) {
        self.key(field, VARINT);
        self.varint(value);
    }

    pub(super) fn fixed64(&mut self, field: u32, value: u64) {
        self.key(field, FIXED64);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    pub(super) fn fixed32(&mut self, field: u32, value: u32) {
        self.key(field, FIXED32);
        self.buf.extend_from_slice(&value.to_le_bytes());
    }

    /// A `bytes` or `string` field.
    pub(super) fn bytes(&mut self, field: u32, value: &[u8]) {
        self.key(field, LEN);
        self.varint(value.len() as u64);
        self.buf.extend_from_slice(value);
    }

    pub(super) fn str(&mut self, field: u32, value: &str) {
        self.bytes(field, value.as_bytes());
    }

    /// A message field whose fields `write` appends. Its length is known only afterwards: one
    /// byte is kept for it, and the content moves up in the rare case the length needs more
    /// (a message of 128 bytes or over: a span, a batch).
    pub(super) fn message(&mut self, field: u32, write: impl FnOnce(&mut Wire)) {
        self.key(field, LEN);
        let at = self.buf.len();
        self.buf.push(0);
        write(self);
        let len = self.buf.len() - at - 1;
        if len < 0x80 {
            self.buf[at] = len as u8;
            return;
        }
        let mut prefix = Wire::default();
        prefix.varint(len as u64);
        self.buf.splice(at..=at, prefix.buf);
    }

    /// A `KeyValue` (`opentelemetry.proto.common.v1`) as field `field`.
    pub(super) fn attribute(&mut self, field: u32, key: &str, value: AnyValue<'_>) {
        self.message(field, |kv| {
            kv.str(1, key);
            kv.message(2, |any| match value {
                AnyValue::Str(text) => any.str(1, text),
                AnyValue::Bool(b) => any.uint(2, u64::from(b)),
                AnyValue::Int(i) => any.uint(3, i as u64),
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
    use prost::Message;

    fn decoded(value: AnyValue<'_>) -> KeyValue {
        let mut wire = Wire::default();
        wire.attribute(1, "k", value);
        // The attribute is field 1 of the buffer: its key, its length, then the message.
        let bytes = wire.into_bytes();
        let mut rest = &bytes[1..];
        let Ok(len) = prost::encoding::decode_varint(&mut rest) else {
            panic!("no length: {bytes:?}");
        };
        assert_eq!(len as usize, rest.len());
        let Ok(kv) = KeyValue::decode(rest) else {
            panic!("undecodable: {bytes:?}");
        };
        kv
    }

    #[test]
    fn attributes_decode_with_the_official_definitions() {
        let value = |kv: KeyValue| kv.value.and_then(|v| v.value);
        assert_eq!(
            value(decoded(AnyValue::Str("tools/call"))),
            Some(any_value::Value::StringValue("tools/call".into()))
        );
        assert_eq!(
            value(decoded(AnyValue::Int(-5))),
            Some(any_value::Value::IntValue(-5))
        );
        assert_eq!(
            value(decoded(AnyValue::Bool(true))),
            Some(any_value::Value::BoolValue(true))
        );
        assert_eq!(decoded(AnyValue::Int(1)).key, "k");
    }

    #[test]
    fn a_long_message_gets_a_longer_length() {
        for len in [0_usize, 1, 127, 128, 300, 20_000] {
            let text = "x".repeat(len);
            let kv = decoded(AnyValue::Str(&text));
            let Some(any_value::Value::StringValue(got)) = kv.value.and_then(|v| v.value) else {
                panic!("no string at {len}");
            };
            assert_eq!(got.len(), len);
        }
    }
}
