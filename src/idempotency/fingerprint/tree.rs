//! A request body as the fingerprint reads it: a JSON tree whose strings borrow from the body
//! where they hold no escape, and whose objects are member lists sorted by key once parsed.
//! It reads the same values `serde_json::Value` would — numbers through `serde_json::Number`,
//! a repeated key keeping its last value — without a map or a string allocated per member.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

/// One JSON value.
#[derive(Debug)]
pub(super) enum Node<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Node<'a>>),
    /// Sorted by key, each key once.
    Object(Vec<(Cow<'a, str>, Node<'a>)>),
}

impl<'a> Node<'a> {
    /// Parses a whole body; `None` when it is not one JSON value. The body's UTF-8 is checked
    /// once, whole, rather than string by string as the parser of bytes does: JSON is UTF-8
    /// throughout (RFC 8259 §8.1), so a body that fails here fails there too.
    pub(super) fn parse(body: &'a [u8]) -> Option<Node<'a>> {
        let text = std::str::from_utf8(body).ok()?;
        serde_json::from_str(text).ok()
    }

    /// The value under `key` of an object.
    pub(super) fn member_mut(&mut self, key: &str) -> Option<&mut Node<'a>> {
        let Node::Object(members) = self else {
            return None;
        };
        let at = members
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()?;
        members.get_mut(at).map(|(_, v)| v)
    }

    /// Removes `key` from an object.
    pub(super) fn remove(&mut self, key: &str) {
        if let Node::Object(members) = self
            && let Ok(at) = members.binary_search_by(|(k, _)| k.as_ref().cmp(key))
        {
            members.remove(at);
        }
    }
}

/// Sorts members by key; of a repeated key the last value stays, as in a map that inserts
/// each member in order.
fn sorted<'a>(mut members: Vec<(Cow<'a, str>, Node<'a>)>) -> Vec<(Cow<'a, str>, Node<'a>)> {
    // Stable, so the members of one key stay in body order.
    members.sort_by(|a, b| a.0.cmp(&b.0));
    members.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            std::mem::swap(&mut later.1, &mut kept.1);
        }
        same
    });
    members
}

impl<'de> Deserialize<'de> for Node<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node<'de>, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(b))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Node<'de>, E> {
        Ok(Node::Number(n.into()))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Node<'de>, E> {
        Ok(Node::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Node<'de>, E> {
        // As `serde_json::Value` reads it: a number that is not finite is null.
        Ok(Number::from_f64(n).map_or(Node::Null, Node::Number))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Owned(s)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(Key(key)) = map.next_key()? {
            members.push((key, map.next_value()?));
        }
        Ok(Node::Object(sorted(members)))
    }
}

/// An object's key, borrowed from the body when it holds no escape.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Key<'de>, D::Error> {
        d.deserialize_str(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(s)))
    }
}
