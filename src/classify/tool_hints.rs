//! The tool hints a `tools/list` result gives (2025-06-18 server/tools §ToolAnnotations), as
//! an exchange collects them for `trust_annotations`.
//!
//! Every name goes into one buffer: a result may list thousands of tools, and a box per name
//! would be an allocation per entry.

/// Most tool hints one `tools/list` response hands out (names come from the upstream).
pub const MAX_TOOL_HINTS: usize = 10_000;

/// What a `tools/list` result says of one tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolHint<'a> {
    pub name: &'a str,
    pub read_only: bool,
    pub idempotent: bool,
}

/// The hints of one result, in the order its entries came.
#[derive(Debug, Default)]
pub struct ToolHints {
    /// Every name, one after the other.
    names: String,
    entries: Vec<Entry>,
}

/// One tool: where its name ends in `names` (it starts where the previous one ends).
#[derive(Debug)]
struct Entry {
    end: usize,
    read_only: bool,
    idempotent: bool,
}

impl ToolHints {
    /// Adds a tool; past [`MAX_TOOL_HINTS`] tools, none.
    pub fn push(&mut self, hint: ToolHint<'_>) {
        if self.entries.len() >= MAX_TOOL_HINTS {
            return;
        }
        self.names.push_str(hint.name);
        self.entries.push(Entry {
            end: self.names.len(),
            read_only: hint.read_only,
            idempotent: hint.idempotent,
        });
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The hints, in order.
    pub fn iter(&self) -> impl Iterator<Item = ToolHint<'_>> {
        let mut start = 0;
        self.entries.iter().map(move |e| {
            // Each `end` was the buffer's length after a whole `&str` was added: a boundary.
            let name = self.names.get(start..e.end).unwrap_or_default();
            start = e.end;
            ToolHint {
                name,
                read_only: e.read_only,
                idempotent: e.idempotent,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_come_back_in_order_with_their_names() {
        let mut hints = ToolHints::default();
        let tools = [
            ("read", true, false),
            ("", false, true),
            ("été", false, false),
        ];
        for (name, read_only, idempotent) in tools {
            hints.push(ToolHint {
                name,
                read_only,
                idempotent,
            });
        }
        let got: Vec<_> = hints
            .iter()
            .map(|h| (h.name, h.read_only, h.idempotent))
            .collect();
        assert_eq!(got, tools);
        assert_eq!(hints.len(), 3);
    }

    #[test]
    fn no_more_than_the_cap() {
        let mut hints = ToolHints::default();
        for _ in 0..MAX_TOOL_HINTS + 5 {
            hints.push(ToolHint {
                name: "t",
                read_only: true,
                idempotent: false,
            });
        }
        assert_eq!(hints.len(), MAX_TOOL_HINTS);
        assert_eq!(hints.iter().count(), MAX_TOOL_HINTS);
    }
}
