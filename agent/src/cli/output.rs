//! How the commands print: aligned tables for people, JSON for scripts.

use std::io::Write;

use serde::Serialize;

/// `--output`: a table (the default) or JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// A table whose columns are as wide as their widest cell.
pub struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&'static str]) -> Table {
        Table {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as text, one line per row, columns two spaces apart.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                match widths.get_mut(i) {
                    Some(w) => *w = (*w).max(cell.chars().count()),
                    None => widths.push(cell.chars().count()),
                }
            }
        }
        let mut out = String::new();
        let headers: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        for row in std::iter::once(&headers).chain(self.rows.iter()) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let pad = widths[i].saturating_sub(cell.chars().count());
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad + 2));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    pub fn print(&self) {
        print_text(&self.render());
    }
}

/// Writes `text` to stdout; a closed pipe (`| head`) is not an error.
pub fn print_text(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Prints `value` as pretty JSON on stdout.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    print_text(&text);
    Ok(())
}

/// A list of broker ids as `1,2,3`.
pub fn ids(ids: &[i32]) -> String {
    ids.iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_under_their_widest_cell() {
        let mut t = Table::new(&["NAME", "PARTITIONS"]);
        t.row(vec!["a-long-topic".into(), "3".into()]);
        t.row(vec!["b".into(), "12".into()]);
        assert_eq!(
            t.render(),
            "NAME          PARTITIONS\na-long-topic  3\nb             12\n"
        );
    }
}
