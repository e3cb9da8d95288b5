//! Finds the key path (`timeouts.connect`) for a position in a YAML document.
//!
//! serde-saphyr's errors carry a line:col but not the path of the key they are about
//! ("invalid boolean"), and our messages always start with the path. So when serde rejects the
//! file, we read it again as an untyped tree of keys with positions and walk down to the error.
//! This second read is best effort: if the file is not valid YAML at all, there is no path.
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use super::error::Position;

/// The dotted path of the mapping key that `position` falls under, for an error message.
///
/// When `position` is a key itself (an unknown or duplicate key), the path is that of the
/// mapping holding it, since the message already names the key.
///
/// Returns `None` when:
/// - the text is not a YAML document serde-saphyr can read,
/// - the position is at the top level (not under any key).
pub(super) fn key_path(text: &str, position: Position) -> Option<String> {
    let root: Node = serde_saphyr::from_str(text).ok()?;
    let mut path: Vec<&str> = Vec::new();
    let mut node = &root;
    while let Node::Map(entries) = node {
        // Entries are in document order, so the last key at or before the position is the one
        // whose value contains it.
        let Some((key, value)) = entries
            .iter()
            .take_while(|(key, _)| Position::of(key).is_some_and(|at| at <= position))
            .last()
        else {
            break;
        };
        if Position::of(key) == Some(position) {
            break;
        }
        path.push(&key.value.0);
        node = value;
    }
    (!path.is_empty()).then(|| path.join("."))
}

/// A YAML node reduced to what [`key_path`] needs.
enum Node {
    Map(Vec<(Spanned<Key>, Node)>),
    Leaf,
}

/// A mapping key as text; non-string scalar keys (`5:`, `true:`) keep their spelling.
struct Key(String);

// === impl Node ===

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Leaf)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        Node::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        // Our config has no lists; a path into one would not help anyone.
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Node::Leaf)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<Key>>()? {
            entries.push((key, map.next_value::<Node>()?));
        }
        Ok(Node::Map(entries))
    }
}

// === impl Key ===

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a scalar mapping key")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Key, E> {
        Ok(Key(v.to_string()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(Key(v.to_owned()))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Key, E> {
        Ok(Key("null".to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: u64, column: u64) -> Position {
        Position { line, column }
    }

    #[test]
    fn paths() {
        let text = "listen: a\ntimeouts:\n  connect: 5s\n  bogus: 1\nlog: {format: x, level: y}\n";
        let cases = [
            (at(1, 9), Some("listen")),
            (at(1, 1), None),
            (at(3, 12), Some("timeouts.connect")),
            (at(4, 3), Some("timeouts")),
            (at(4, 10), Some("timeouts.bogus")),
            (at(5, 15), Some("log.format")),
            (at(5, 18), Some("log")),
        ];
        for (position, want) in cases {
            assert_eq!(key_path(text, position).as_deref(), want, "{position}");
        }
    }

    #[test]
    fn no_path_for_broken_yaml() {
        assert_eq!(key_path("a: [\n", at(1, 4)), None);
    }
}
