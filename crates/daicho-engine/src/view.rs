//! The cross-project view (V1–V5) read from the ledger and drawn as Markdown or HTML, and the
//! view role, which writes the `[view]` files atomically.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use daicho_core::view::{CrossView, Mark, ViewOptions, dashboard_text, more_text};
use daicho_store::Store;
use serde::Serialize;

use crate::{Config, Error};

/// What the view role wrote (fields in the order the JSON has always had).
#[derive(Debug, Serialize)]
pub struct ViewReport {
    /// Always `view`.
    pub role: &'static str,
    /// The files written.
    pub written: Vec<String>,
}

/// Reads the cross view of the ledger in keyset pages (memory stays bounded on a ledger of any
/// size), as of `today`.
pub async fn build<S: Store>(
    store: &S,
    config: &Config,
    per_project: usize,
    today: jiff::civil::Date,
) -> Result<CrossView, Error> {
    let dashboard_sources: BTreeSet<String> =
        config.sources.iter().filter(|s| s.dashboard).map(|s| s.name.clone()).collect();
    Ok(daicho_store::cross_view(store, ViewOptions { per_project, today, dashboard_sources }).await?)
}

/// The view role (R1, V5): writes the `[view]` files (HTML and Markdown) atomically.
pub async fn write_files<S: Store>(
    store: &S,
    config: &Config,
    today: jiff::civil::Date,
) -> Result<ViewReport, Error> {
    let mut written = Vec::new();
    type Draw = fn(&CrossView) -> String;
    let targets: [(Option<&std::path::PathBuf>, Draw); 2] =
        [(config.view.html.as_ref(), html), (config.view.markdown.as_ref(), markdown)];
    for (path, draw) in targets {
        let Some(path) = path else { continue };
        let path = config.resolve(path);
        let view = build(store, config, config.view.per_project, today).await?;
        write_atomically(&path, draw(&view).as_bytes())?;
        written.push(path.display().to_string());
    }
    if written.is_empty() {
        return Err(Error::Invalid("[view] names no html or markdown file to write".into()));
    }
    Ok(ViewReport { role: "view", written })
}

/// Writes `bytes` to `path` (`--out`, the view role's files) without ever replacing what is not
/// a regular file. A regular file is written through a temporary file beside it and a rename, so
/// a reader sees the old file or the new one, never half of one. A symbolic link is followed: its
/// target is replaced the same way and the link stays. A device, FIFO or socket (`/dev/null`,
/// `/dev/stdout`, a named pipe) is written into, never replaced by a regular file.
///
/// # Errors
///
/// [`Error::Write`] naming the path: a directory, a link to nothing, or an I/O error.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let mut file = AtomicFile::create(path)?;
    file.write(bytes)?;
    file.finish()
}

/// A file [`write_atomically`] writes as its bytes come (an export a page at a time): nothing
/// replaces the old file until [`AtomicFile::finish`]; dropped unfinished, the temporary file is
/// removed and the old file stays.
#[derive(Debug)]
pub struct AtomicFile {
    path: String,
    file: std::fs::File,
    /// The temporary file, the file it replaces and their directory; `None` when writing into
    /// a device, FIFO or socket.
    rename: Option<(PathBuf, PathBuf, PathBuf)>,
}

impl AtomicFile {
    /// Opens `path` for writing as [`write_atomically`] does.
    ///
    /// # Errors
    ///
    /// [`Error::Write`] naming the path: a directory, a link to nothing, or an I/O error.
    pub fn create(path: &Path) -> Result<AtomicFile, Error> {
        let shown = path.display().to_string();
        let failed = |cause| Error::Write { path: shown.clone(), cause };
        let other = |reason: &str| failed(std::io::Error::other(reason.to_owned()));
        let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        let target = match std::fs::canonicalize(path) {
            Ok(target) => target,
            Err(_) if is_link => return Err(other("a symbolic link to nothing; give the file itself")),
            Err(_) => path.to_owned(),
        };
        match std::fs::metadata(&target) {
            Ok(m) if m.is_dir() => return Err(other("a directory, not a file")),
            Ok(m) if !m.is_file() => {
                let file = std::fs::OpenOptions::new().write(true).open(&target).map_err(failed)?;
                return Ok(AtomicFile { path: shown, file, rename: None });
            }
            _ => {}
        }
        let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_owned();
        let name =
            target.file_name().ok_or_else(|| Error::Invalid("--out names no file".into()))?.to_string_lossy();
        let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let file = std::fs::File::create(&temp).map_err(failed)?;
        let file = AtomicFile { path: shown.clone(), file, rename: Some((temp, target, dir)) };
        // A file replaced keeps its mode (a person's tasks.md stays as private as it was).
        if let Some((_, target, _)) = &file.rename
            && let Ok(old) = std::fs::metadata(target)
        {
            file.file.set_permissions(old.permissions()).map_err(failed)?;
        }
        Ok(file)
    }

    /// Writes the next bytes.
    ///
    /// # Errors
    ///
    /// [`Error::Write`] naming the path.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.file.write_all(bytes).map_err(|cause| Error::Write { path: self.path.clone(), cause })
    }

    /// Makes the file the one at the path: synced, then renamed over the old one.
    ///
    /// # Errors
    ///
    /// [`Error::Write`] naming the path; the old file is then left as it was.
    pub fn finish(mut self) -> Result<(), Error> {
        let result = (|| {
            self.file.flush()?;
            let Some((temp, target, dir)) = self.rename.take() else { return Ok(()) };
            let renamed = self.file.sync_all().and_then(|()| std::fs::rename(&temp, &target));
            if renamed.is_err() {
                let _ = std::fs::remove_file(&temp);
            }
            renamed?;
            // The rename itself is durable once the directory is synced.
            std::fs::File::open(dir)?.sync_all()
        })();
        result.map_err(|cause| Error::Write { path: self.path.clone(), cause })
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let Some((temp, _, _)) = &self.rename {
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// A mark's word.
pub fn mark_word(mark: Mark) -> &'static str {
    match mark {
        Mark::Overdue => "overdue",
        Mark::Review => "review",
        Mark::NeedsHuman => "needs_human",
    }
}

/// The marks of a row, space-separated.
pub fn marks(marks: &[Mark]) -> String {
    marks.iter().map(|m| mark_word(*m)).collect::<Vec<_>>().join(" ")
}

/// A due date as text (empty when undated).
pub fn due(d: Option<jiff::civil::Date>) -> String {
    d.map(|d| d.to_string()).unwrap_or_default()
}

/// A Markdown table cell: pipes and backslashes escaped, HTML neutralised (Markdown renderers
/// pass raw HTML through), one line.
fn md_cell(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

/// The view as a Markdown document.
pub fn markdown(view: &CrossView) -> String {
    let mut out = String::from("# Open work\n\n");
    if view.rows.is_empty() {
        out.push_str("No open work.\n");
    } else {
        out.push_str("| | id | project | status | due | title | assignee |\n|---|---|---|---|---|---|---|\n");
        for row in &view.rows {
            let flag =
                row.marks.iter().map(|m| format!("**{}**", mark_word(*m))).collect::<Vec<_>>().join(" ");
            out.push_str(&format!(
                "| {flag} | {} | {} | {} | {} | {} | {} |\n",
                row.id,
                md_cell(&row.project),
                row.status.as_str(),
                due(row.due),
                md_cell(&row.title),
                md_cell(&row.assignee)
            ));
        }
    }
    if !view.dashboards.is_empty() || !view.more.is_empty() {
        out.push('\n');
    }
    for d in &view.dashboards {
        out.push_str(&format!("- {}\n", md_cell(&dashboard_text(d))));
    }
    for more in &view.more {
        out.push_str(&format!("- {}\n", md_cell(&more_text(more))));
    }
    out
}
/// Escapes text for HTML element content and attribute values.
pub use daicho_core::format::escape_markup as escape;

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}\
th,td{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}\
tr.overdue td{background:#fde8e8}tr.review td{background:#fff6d6}tr.needs_human td{background:#f1e4fb}\
.mark{font-weight:bold;white-space:nowrap}.more,.dashboard{color:#444}";

/// The view as a standalone HTML page.
pub fn html(view: &CrossView) -> String {
    let mut out = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Open work</title><style>{STYLE}</style></head><body>\n<h1>Open work</h1>\n"
    );
    if view.rows.is_empty() {
        out.push_str("<p>No open work.</p>\n");
    } else {
        out.push_str("<table>\n<thead><tr><th></th><th>id</th><th>project</th><th>status</th><th>due</th><th>title</th><th>assignee</th></tr></thead>\n<tbody>\n");
        for row in &view.rows {
            let class = row.marks.iter().map(|m| mark_word(*m)).collect::<Vec<_>>().join(" ");
            out.push_str(&format!(
                "<tr class=\"{class}\"><td class=\"mark\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                escape(&marks(&row.marks)),
                escape(&row.id),
                escape(&row.project),
                row.status.as_str(),
                due(row.due),
                escape(&row.title),
                escape(&row.assignee)
            ));
        }
        out.push_str("</tbody>\n</table>\n");
    }
    for d in &view.dashboards {
        out.push_str(&format!("<p class=\"dashboard\">{}</p>\n", escape(&dashboard_text(d))));
    }
    for more in &view.more {
        out.push_str(&format!("<p class=\"more\">{}</p>\n", escape(&more_text(more))));
    }
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    /// X4 (outputs): `--out` writes into a FIFO and through a symbolic link, and replaces
    /// neither; a regular file is replaced whole; a link to nothing and a directory are refused.
    #[test]
    fn x4_out_never_replaces_a_fifo_or_a_symlink() {
        use std::os::unix::fs::FileTypeExt as _;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        // A reader opened without blocking (O_NONBLOCK), so that a writer that replaced the
        // FIFO instead of writing into it fails this test instead of hanging it.
        use std::io::Read as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut reader = std::fs::OpenOptions::new().read(true).custom_flags(0o4000).open(&fifo).unwrap();
        super::write_atomically(&fifo, b"through the pipe\n").unwrap();
        let mut got = String::new();
        let _ = reader.read_to_string(&mut got);
        assert_eq!(got, "through the pipe\n");
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "still a FIFO");

        let target = dir.path().join("view.md");
        std::fs::write(&target, "old").unwrap();
        let link = dir.path().join("latest.md");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        super::write_atomically(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "still a link");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");

        let dangling = dir.path().join("dangling.md");
        std::os::unix::fs::symlink(dir.path().join("missing/none.md"), &dangling).unwrap();
        let err = super::write_atomically(&dangling, b"x").unwrap_err().to_string();
        assert!(err.contains("symbolic link to nothing"), "{err}");
        let err = super::write_atomically(dir.path(), b"x").unwrap_err().to_string();
        assert!(err.contains("a directory"), "{err}");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 4, "no temporary file left behind: {names:?}");
    }
}
