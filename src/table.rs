//! A plain-text table for the terminal (`strata demo`, `strata classify`): each column padded
//! to its widest cell, columns two spaces apart, a rule of dashes under the head; a row may
//! end with a note in parentheses.

use std::io::{self, Write};

/// The head and the rows, written at once by [`Table::write`] (widths need every row).
pub struct Table {
    head: Vec<String>,
    rows: Vec<(Vec<String>, Option<String>)>,
}

impl Table {
    pub fn new(head: &[&str]) -> Self {
        Table {
            head: head.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// A row of cells (one per column; more are left out), and a note after them.
    pub fn row(&mut self, cells: Vec<String>, note: Option<String>) {
        self.rows.push((cells, note));
    }

    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut width: Vec<usize> = self.head.iter().map(|h| h.chars().count()).collect();
        for (cells, _) in &self.rows {
            for (w, cell) in width.iter_mut().zip(cells) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            cells
                .iter()
                .zip(&width)
                .map(|(c, &w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_owned()
        };
        writeln!(out, "{}", line(&self.head))?;
        let rule: Vec<String> = width.iter().map(|&w| "-".repeat(w)).collect();
        writeln!(out, "{}", line(&rule))?;
        for (cells, note) in &self.rows {
            write!(out, "{}", line(cells))?;
            match note {
                Some(note) => writeln!(out, "   ({note})")?,
                None => writeln!(out)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_to_the_widest_cell() {
        let mut table = Table::new(&["a", "bb", ""]);
        table.row(vec!["long".into(), "x".into(), "✓".into()], None);
        table.row(
            vec!["s".into(), "yyy".into(), "".into()],
            Some("why".into()),
        );
        let mut out = Vec::new();
        table.write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "a     bb\n----  ---  -\nlong  x    ✓\ns     yyy   (why)\n"
        );
    }
}
