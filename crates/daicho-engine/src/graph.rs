//! Loading a project's dependency graph for drawing (V6): the web UI's `/p/{project}/graph` and
//! `daicho graph` both come here, so the picture is the same on either face. The layout and the
//! drawing are pure (`daicho_core::graph`); this reads what they need and no more, so a project
//! of 100,000 rows costs a few hundred rows read.

use std::collections::{BTreeSet, HashSet};

use daicho_core::graph::{self, Graph, Omitted};
use daicho_core::{Status, Task};
use daicho_store::{ListFilter, Store};
use jiff::Timestamp;

use crate::Error;

/// The most nodes a drawing holds unless asked otherwise: a few hundred stay readable.
pub const MAX_NODES: usize = 300;

/// What to draw.
#[derive(Clone, Debug)]
pub struct GraphRequest {
    /// The project.
    pub project: String,
    /// Only the rows of this source (a plan's goal is the source `plan:<goal>`).
    pub source: Option<String>,
    /// At most this many nodes; a larger project is drawn as its open frontier.
    pub max_nodes: usize,
}

/// Reads the rows of `request` and lays them out at `now`: every row when the project has at
/// most `max_nodes`, else its open rows (the frontier) with the closed rows they wait on folded
/// into counts. The rows the drawn ones wait on from other projects are read too, so their
/// state colours the edges and decides readiness.
///
/// # Errors
///
/// The store's, or [`Error::Invalid`] for a project with no rows.
pub async fn load<S: Store>(store: &S, request: &GraphRequest, now: Timestamp) -> Result<Graph, Error> {
    let max = request.max_nodes.max(1);
    let filter = ListFilter {
        project: Some(request.project.clone()),
        source: request.source.clone(),
        limit: Some(max + 1),
        ..ListFilter::default()
    };
    let mut rows = store.list(filter.clone()).await?;
    if rows.is_empty() {
        let what = match &request.source {
            Some(source) => format!("the project '{}' has no rows of the source '{source}'", request.project),
            None => format!("the project '{}' has no rows", request.project),
        };
        return Err(Error::Invalid(what));
    }
    let whole = rows.len() <= max;
    if !whole {
        let open: Vec<Status> = Status::ALL.into_iter().filter(|s| s.is_open()).collect();
        rows = store.list(ListFilter { statuses: open, ..filter }).await?;
        rows.truncate(max);
    }
    let have: HashSet<_> = rows.iter().map(|t| t.id).collect();
    let missing: BTreeSet<_> =
        rows.iter().flat_map(|t| t.deps.iter()).filter(|d| !have.contains(d)).copied().collect();
    let mut tasks: Vec<Task> = rows;
    for id in missing {
        if let Some(task) = store.get(id).await? {
            tasks.push(task);
        }
    }
    let awaiting: HashSet<_> = store.approvals().await?.into_iter().map(|q| q.id).collect();
    if whole {
        return Ok(graph::layout(&tasks, &awaiting, now, max));
    }
    let mut drawn = graph::frontier(&tasks, &awaiting, now, max);
    // The totals of the project (kept as counters, so reading them is cheap), when the drawing
    // covers the whole project; for one source, what was seen.
    if request.source.is_none() {
        let counts = store.status_counts().await?;
        let of = |closed: bool| -> usize {
            counts
                .iter()
                .filter(|c| c.project == request.project && c.status.is_closed() == closed)
                .map(|c| c.count as usize)
                .sum()
        };
        // The project's open rows drawn (a row it waits on from elsewhere may take a place).
        let shown = drawn.nodes.iter().filter(|n| have.contains(&n.id)).count();
        drawn.omitted = Omitted { closed: of(true), open: of(false).saturating_sub(shown) };
    }
    Ok(drawn)
}
