//! Spreadsheet sources (X5): an xlsx, xls, xlsb or ods file read with calamine into the same
//! [`Table`] a CSV file gives, each cell as a person sees it: dates as `2026-12-10` (with the
//! time when there is one), whole numbers without a decimal point, `TRUE`/`FALSE`. Rows carry
//! their sheet row numbers, so errors read `questions.xlsx!確認事項:12: …`; blank rows (merged
//! titles, formatted empty rows at the end) are left to the callers, which skip them.

use std::path::Path;

use calamine::{Data, Reader as _};
use daicho_core::InputError;
use daicho_core::format::csv::{Row, Table};

/// The file extensions read as spreadsheets.
pub const EXTENSIONS: [&str; 4] = ["xlsx", "xls", "xlsb", "ods"];

/// Reads `sheet` (the first sheet when `None`) of a spreadsheet, its header at `header_row`
/// (1-based; the first row with a value when `None`). Returns the name errors go by
/// (`file!sheet`) and the table.
///
/// # Errors
///
/// An [`InputError`] naming the file (and sheet, and cell): unreadable, not a spreadsheet, no
/// such sheet (the sheets there are named), an empty sheet, or a cell holding an error value.
pub fn read(
    path: &Path,
    sheet: Option<&str>,
    header_row: Option<usize>,
) -> Result<(String, Table), InputError> {
    let file = crate::input::check_size(path)?;
    let mut book = calamine::open_workbook_auto(path)
        .map_err(|e| InputError::new(&file, None, format!("cannot read as a spreadsheet: {e}")))?;
    let names = book.sheet_names();
    let name = match sheet {
        Some(wanted) => names.iter().find(|n| n.as_str() == wanted).cloned().ok_or_else(|| {
            InputError::new(&file, None, format!("no sheet '{wanted}' (its sheets: {})", names.join(", ")))
        })?,
        None => {
            names.first().cloned().ok_or_else(|| InputError::new(&file, None, "the workbook has no sheet"))?
        }
    };
    let at = format!("{file}!{name}");
    let range = book
        .worksheet_range(&name)
        .map_err(|e| InputError::new(&at, None, format!("cannot read the sheet: {e}")))?;
    let Some((top, left)) = range.start() else {
        return Err(InputError::new(&at, None, "the sheet is empty"));
    };
    let (top, left) = (top as usize, left as usize);
    let mut header = None;
    let mut rows = Vec::new();
    for (offset, cells) in range.rows().enumerate() {
        let row = top + offset + 1;
        let texts = cells
            .iter()
            .enumerate()
            .map(|(col, cell)| {
                text(cell).map_err(|reason| {
                    InputError::new(&at, None, format!("{}: {reason}", a1(left + col, row)))
                })
            })
            .collect::<Result<Vec<String>, InputError>>()?;
        match header {
            None if header_row.is_none_or(|h| h == row) && texts.iter().any(|t| !t.trim().is_empty()) => {
                header = Some((row, texts));
            }
            None => {}
            Some(_) => rows.push(Row { line: row, cells: texts }),
        }
    }
    let Some((header_line, mut header)) = header else {
        let which =
            header_row.map_or_else(|| "no row has a value".to_owned(), |h| format!("row {h} is empty"));
        return Err(InputError::new(&at, None, format!("no header: {which}")));
    };
    // Columns past the last named one (formatting that widened the used range) are dropped.
    let width = header.iter().rposition(|h| !h.trim().is_empty()).map_or(0, |i| i + 1);
    header.truncate(width);
    for row in &mut rows {
        row.cells.truncate(width);
    }
    Ok((at.clone(), Table { header, header_line, rows }))
}

/// A cell as a person sees it, or why it cannot be read.
fn text(cell: &Data) -> Result<String, String> {
    Ok(match cell {
        Data::Empty => String::new(),
        Data::String(s) => s.clone(),
        Data::Int(i) => i.to_string(),
        Data::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", *f as i64),
        Data::Float(f) => f.to_string(),
        Data::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_owned(),
        Data::DateTime(dt) if dt.is_duration() => {
            let seconds = (dt.as_f64() * 86_400.0).round() as i64;
            format!("{}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60)
        }
        Data::DateTime(dt) => {
            let (y, m, d, h, min, s, _) = dt.to_ymd_hms_milli();
            match (h, min, s) {
                (0, 0, 0) => format!("{y:04}-{m:02}-{d:02}"),
                (h, min, 0) => format!("{y:04}-{m:02}-{d:02} {h:02}:{min:02}"),
                (h, min, s) => format!("{y:04}-{m:02}-{d:02} {h:02}:{min:02}:{s:02}"),
            }
        }
        Data::DateTimeIso(s) => s.strip_suffix("T00:00:00").unwrap_or(s).to_owned(),
        Data::DurationIso(s) => s.clone(),
        Data::Error(e) => return Err(format!("the cell holds an error value ({e})")),
    })
}

/// A cell's A1 reference (0-based column, 1-based row).
fn a1(column: usize, row: usize) -> String {
    let (mut letters, mut n) = (Vec::new(), column + 1);
    while n > 0 {
        letters.push(b'A' + ((n - 1) % 26) as u8);
        n = (n - 1) / 26;
    }
    letters.reverse();
    format!("{}{row}", String::from_utf8(letters).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
    }

    /// X5: the confirmation sheet as xlsx and as ods: the named sheet, its header below a merged
    /// title, dates and numbers as a person sees them, rows numbered as in the sheet.
    #[test]
    fn x5_a_spreadsheet_reads_as_a_person_sees_it() {
        for file in ["questions.xlsx", "questions.ods"] {
            let (at, table) = read(&fixture(file), Some("確認事項"), Some(2)).unwrap();
            assert!(at.ends_with(&format!("{file}!確認事項")), "{at}");
            assert_eq!(table.header, ["id", "question", "status", "回答期限", "件数"], "{file}");
            assert_eq!(table.header_line, 2);
            let first = &table.rows[0];
            assert_eq!(first.line, 3, "{file}");
            assert_eq!(first.cells, ["Q-1", "仕様は確定か", "未回答", "2026-12-10", "3"], "{file}");
            assert_eq!(table.rows[1].cells[4], "1.5", "{file}");
            let last = table.rows.iter().rfind(|r| r.cells.iter().any(|c| !c.is_empty())).unwrap();
            assert_eq!((last.line, last.cells[3].as_str()), (6, "2027-01-05"), "{file}");
        }
    }

    /// X5: without `header_row` the first row with a value is the header; without `sheet`, the
    /// first sheet is read.
    #[test]
    fn x5_the_defaults_are_the_first_sheet_and_the_first_row_with_a_value() {
        let (at, table) = read(&fixture("questions.xlsx"), None, None).unwrap();
        assert!(at.ends_with("questions.xlsx!表紙"), "{at}");
        assert_eq!(table.header, ["cover"]);
        let (_, table) = read(&fixture("questions.xlsx"), Some("確認事項"), None).unwrap();
        assert_eq!(table.header, ["確認事項一覧"], "the merged title is the first row with a value");
    }

    /// X5: errors name the file, the sheet and the cell.
    #[test]
    fn x5_errors_name_the_sheet_and_the_cell() {
        let err = read(&fixture("questions.xlsx"), Some("壊れた"), None).unwrap_err().to_string();
        assert!(err.ends_with("questions.xlsx!壊れた: C2: the cell holds an error value (#N/A)"), "{err}");
        let err = read(&fixture("questions.xlsx"), Some("ない"), None).unwrap_err().to_string();
        assert!(err.contains("no sheet 'ない' (its sheets: 表紙, 確認事項, 壊れた)"), "{err}");
        let err = read(&fixture("questions.xlsx"), Some("確認事項"), Some(40)).unwrap_err().to_string();
        assert!(err.contains("no header: row 40 is empty"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("notes.xlsx");
        std::fs::write(&fake, "not a zip").unwrap();
        let err = read(&fake, None, None).unwrap_err().to_string();
        assert!(err.contains("notes.xlsx: cannot read as a spreadsheet"), "{err}");
        assert_eq!(a1(0, 12), "A12");
        assert_eq!(a1(27, 3), "AB3");
    }
}
