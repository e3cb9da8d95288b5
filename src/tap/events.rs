//! Server-sent events as they arrive in pieces: the `data` of each complete event.

/// Bytes of an event not complete yet.
#[derive(Debug, Default)]
pub(super) struct Events {
    pending: Vec<u8>,
}

impl Events {
    /// Adds `chunk`; returns the data of each event it completes, in order.
    pub(super) fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(chunk);
        let mut found = Vec::new();
        while let Some(end) = find(&self.pending, b"\n\n") {
            let event: Vec<u8> = self.pending.drain(..end + 2).collect();
            if let Some(data) = data_of(&event) {
                found.push(data);
            }
        }
        found
    }
}

/// The event's `data` lines, joined by newlines (`None` without any: a comment).
fn data_of(event: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(event);
    let data: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|value| value.strip_prefix(' ').unwrap_or(value))
        .collect();
    (!data.is_empty()).then(|| data.join("\n"))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks() {
        let mut events = Events::default();
        assert!(events.push(b"id: 1\nevent: call\nda").is_empty());
        assert_eq!(events.push(b"ta: {\"a\":1}\n\nid: 2\n"), ["{\"a\":1}"]);
        assert_eq!(
            events.push(b"data: x\n\n: comment\n\ndata:y\n\n"),
            ["x", "y"]
        );
    }
}
