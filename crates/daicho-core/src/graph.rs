//! The dependency graph as a picture (V6): which tasks to draw, where, in what colour, and the
//! same drawing as SVG (web UI, `daicho graph --format svg`), Graphviz DOT and Mermaid.
//!
//! Layout is a layered left-to-right drawing: each task's layer is the longest path of deps
//! before it, and the order within a layer is improved by a few barycentric sweeps (each task
//! moves toward the mean position of its neighbours), so edges cross less. A large project is
//! drawn as its open frontier: the open tasks, with the closed tasks they wait on folded into a
//! count on each node, at most `max_nodes` of them, and the drawing says what it left out.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use jiff::Timestamp;
use serde::Serialize;

use crate::dag::is_ready;
use crate::id::TaskId;
use crate::lang::Lang;
use crate::task::{Status, Task};

/// How a node is coloured: a task's status, with `pending` split into ready and blocked, and a
/// pending task in the approval queue shown as such.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// Pending, waiting for a dep (or its start time).
    Pending,
    /// Pending with every dep done: the next to run.
    Ready,
    /// Claimed by a worker.
    Running,
    /// Run; a person checks it.
    Review,
    /// Finished.
    Done,
    /// Not needed.
    Dropped,
    /// Parked for a person.
    NeedsHuman,
    /// An external task waiting for a person's approval.
    AwaitingApproval,
}

impl NodeState {
    /// Every state, in the order the legend shows them.
    pub const ALL: [NodeState; 8] = [
        NodeState::Pending,
        NodeState::Ready,
        NodeState::Running,
        NodeState::Review,
        NodeState::Done,
        NodeState::Dropped,
        NodeState::NeedsHuman,
        NodeState::AwaitingApproval,
    ];

    /// The state's name in data and CSS classes.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Pending => "pending",
            NodeState::Ready => "ready",
            NodeState::Running => "running",
            NodeState::Review => "review",
            NodeState::Done => "done",
            NodeState::Dropped => "dropped",
            NodeState::NeedsHuman => "needs_human",
            NodeState::AwaitingApproval => "awaiting_approval",
        }
    }

    /// The state as a person reads it.
    pub fn label(self, lang: Lang) -> &'static str {
        match self {
            NodeState::Ready => lang.pick("ready", "実行可能"),
            NodeState::AwaitingApproval => lang.pick("awaiting approval", "承認待ち"),
            NodeState::Pending => lang.pick("pending (waiting)", "未着手(待ち)"),
            NodeState::Running => lang.pick("running", Status::Running.ja()),
            NodeState::Review => lang.pick("review", Status::Review.ja()),
            NodeState::Done => lang.pick("done", Status::Done.ja()),
            NodeState::Dropped => lang.pick("dropped", Status::Dropped.ja()),
            NodeState::NeedsHuman => lang.pick("needs human", Status::NeedsHuman.ja()),
        }
    }

    /// The fill colour and the text colour on it (seed 002: running purple, done green).
    pub fn colours(self) -> (&'static str, &'static str) {
        match self {
            NodeState::Pending => ("#e0e0e0", "#212121"),
            NodeState::Ready => ("#1e88e5", "#ffffff"),
            NodeState::Running => ("#8e24aa", "#ffffff"),
            NodeState::Review => ("#f9a825", "#212121"),
            NodeState::Done => ("#2e7d32", "#ffffff"),
            NodeState::Dropped => ("#f5f5f5", "#757575"),
            NodeState::NeedsHuman => ("#c62828", "#ffffff"),
            NodeState::AwaitingApproval => ("#ef6c00", "#ffffff"),
        }
    }

    fn of(task: &Task, ready: bool, awaiting: bool) -> NodeState {
        match task.status {
            Status::Pending if awaiting => NodeState::AwaitingApproval,
            Status::Pending if ready => NodeState::Ready,
            Status::Pending => NodeState::Pending,
            Status::Running => NodeState::Running,
            Status::Review => NodeState::Review,
            Status::Done => NodeState::Done,
            Status::Dropped => NodeState::Dropped,
            Status::NeedsHuman => NodeState::NeedsHuman,
        }
    }
}

/// One task drawn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Node {
    /// The task.
    pub id: TaskId,
    /// Its title.
    pub title: String,
    /// Its colour.
    pub state: NodeState,
    /// Its column: the longest chain of drawn deps before it.
    pub layer: usize,
    /// Its place in the column, from the top.
    pub rank: usize,
    /// Closed deps (done or dropped) not drawn but counted here (the frontier of a large
    /// project).
    pub folded: usize,
}

/// A drawn dependency: `from` must finish before `to` (indices into [`Graph::nodes`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Edge {
    /// The dep.
    pub from: usize,
    /// The task that waits for it.
    pub to: usize,
    /// The dep is done or dropped: the wait is over (drawn green).
    pub met: bool,
}

/// What a drawing left out, so that it never cuts silently.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Omitted {
    /// Closed tasks not drawn (folded into the counts of the open tasks that wait for them, or
    /// waited on by nothing open).
    pub closed: usize,
    /// Open tasks not drawn: past `max_nodes`.
    pub open: usize,
}

/// A laid-out dependency graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Graph {
    /// The tasks drawn, in id order.
    pub nodes: Vec<Node>,
    /// The deps among them.
    pub edges: Vec<Edge>,
    /// Columns.
    pub layers: usize,
    /// The largest number of nodes in one column.
    pub height: usize,
    /// Drawn as the open frontier (the project had more rows than `max_nodes`).
    pub frontier: bool,
    /// What was left out.
    pub omitted: Omitted,
}

/// Barycentric sweeps down and up the layers.
const SWEEPS: usize = 4;

/// Lays out the graph of `tasks` (a project's rows, and the rows from elsewhere they wait on).
/// All of them are drawn when they are at most `max_nodes`; otherwise the open ones (in id
/// order, at most `max_nodes`), each counting the closed deps it waits on. `awaiting` are the
/// tasks in the approval queue; `now` decides readiness (`not_before`).
pub fn layout(tasks: &[Task], awaiting: &HashSet<TaskId>, now: Timestamp, max_nodes: usize) -> Graph {
    let mut ids: Vec<TaskId> = tasks.iter().map(|t| t.id).collect();
    ids.sort();
    ids.dedup();
    build(tasks, awaiting, now, max_nodes, ids.len() > max_nodes)
}

/// [`layout`] of a project known to be larger than `max_nodes` though only part of it is given:
/// its open rows and the rows they wait on. Drawn as the open frontier; the caller knows the
/// project's totals and sets [`Graph::omitted`] from them.
pub fn frontier(tasks: &[Task], awaiting: &HashSet<TaskId>, now: Timestamp, max_nodes: usize) -> Graph {
    build(tasks, awaiting, now, max_nodes, true)
}

fn build(
    tasks: &[Task],
    awaiting: &HashSet<TaskId>,
    now: Timestamp,
    max_nodes: usize,
    frontier: bool,
) -> Graph {
    let status: HashMap<TaskId, Status> = tasks.iter().map(|t| (t.id, t.status)).collect();
    let mut order: Vec<&Task> = tasks.iter().collect();
    order.sort_by_key(|t| t.id);
    order.dedup_by_key(|t| t.id);
    let mut omitted = Omitted::default();
    if frontier {
        let (open, closed): (Vec<&Task>, Vec<&Task>) = order.into_iter().partition(|t| t.status.is_open());
        omitted.closed = closed.len();
        omitted.open = open.len().saturating_sub(max_nodes);
        order = open.into_iter().take(max_nodes).collect();
    }
    let index: HashMap<TaskId, usize> = order.iter().enumerate().map(|(i, t)| (t.id, i)).collect();
    let mut nodes: Vec<Node> = order
        .iter()
        .map(|t| {
            let ready = is_ready(t, now, |id| status.get(&id).copied());
            let folded = t
                .deps
                .iter()
                .filter(|d| !index.contains_key(d) && status.get(d).is_some_and(|s| s.is_closed()))
                .count();
            Node {
                id: t.id,
                title: t.title.clone(),
                state: NodeState::of(t, ready, awaiting.contains(&t.id)),
                layer: 0,
                rank: 0,
                folded: if frontier { folded } else { 0 },
            }
        })
        .collect();
    let mut edges: Vec<Edge> = Vec::new();
    for (to, task) in order.iter().enumerate() {
        for dep in &task.deps {
            if let Some(&from) = index.get(dep) {
                let met = status.get(dep).is_some_and(|s| s.satisfies_deps());
                edges.push(Edge { from, to, met });
            }
        }
    }
    let layers = assign_layers(&mut nodes, &edges);
    let height = order_layers(&mut nodes, &edges, layers);
    Graph { nodes, edges, layers, height, frontier, omitted }
}

/// Longest-path layers (Kahn's order over the drawn edges); returns the number of layers. A
/// node on a cycle (which the ledger refuses, but a drawing must not hang on) stays in layer 0.
fn assign_layers(nodes: &mut [Node], edges: &[Edge]) -> usize {
    let mut incoming = vec![0usize; nodes.len()];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for e in edges {
        incoming[e.to] += 1;
        out[e.from].push(e.to);
    }
    let mut queue: Vec<usize> = (0..nodes.len()).filter(|&i| incoming[i] == 0).collect();
    while let Some(n) = queue.pop() {
        for &next in &out[n] {
            nodes[next].layer = nodes[next].layer.max(nodes[n].layer + 1);
            incoming[next] -= 1;
            if incoming[next] == 0 {
                queue.push(next);
            }
        }
    }
    nodes.iter().map(|n| n.layer + 1).max().unwrap_or(0)
}

/// Orders each layer by barycentric sweeps and sets each node's rank; returns the tallest
/// layer's size.
fn order_layers(nodes: &mut [Node], edges: &[Edge], layers: usize) -> usize {
    let mut columns: Vec<Vec<usize>> = vec![Vec::new(); layers];
    for (i, n) in nodes.iter().enumerate() {
        columns[n.layer].push(i);
    }
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for e in edges {
        preds[e.to].push(e.from);
        succs[e.from].push(e.to);
    }
    let mut rank: Vec<f64> = vec![0.0; nodes.len()];
    let set_ranks = |column: &[usize], rank: &mut Vec<f64>| {
        for (r, &i) in column.iter().enumerate() {
            rank[i] = r as f64;
        }
    };
    for column in &columns {
        set_ranks(column, &mut rank);
    }
    let sweep = |column: &mut Vec<usize>, neighbours: &[Vec<usize>], rank: &mut Vec<f64>| {
        let key = |i: usize| -> f64 {
            let around = &neighbours[i];
            if around.is_empty() {
                rank[i]
            } else {
                around.iter().map(|&j| rank[j]).sum::<f64>() / around.len() as f64
            }
        };
        let mut keyed: Vec<(f64, usize)> = column.iter().map(|&i| (key(i), i)).collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
        *column = keyed.into_iter().map(|(_, i)| i).collect();
        set_ranks(column, rank);
    };
    for _ in 0..SWEEPS {
        for column in columns.iter_mut().skip(1) {
            sweep(column, &preds, &mut rank);
        }
        for column in columns.iter_mut().rev().skip(1) {
            sweep(column, &succs, &mut rank);
        }
    }
    for column in &columns {
        for (r, &i) in column.iter().enumerate() {
            nodes[i].rank = r;
        }
    }
    columns.iter().map(Vec::len).max().unwrap_or(0)
}

/// A node's box in the SVG drawing.
const NODE_W: usize = 200;
const NODE_H: usize = 46;
const GAP_X: usize = 56;
const GAP_Y: usize = 18;
const PAD: usize = 16;
/// Display columns of a title in a box (a CJK character takes two).
const TITLE_WIDTH: usize = 30;

impl Graph {
    /// Where a node's box starts: columns left to right, a shorter column centred.
    fn origin(&self, node: &Node, column_sizes: &[usize]) -> (usize, usize) {
        let x = PAD + node.layer * (NODE_W + GAP_X);
        let shift = (self.height - column_sizes[node.layer]) * (NODE_H + GAP_Y) / 2;
        (x, PAD + shift + node.rank * (NODE_H + GAP_Y))
    }

    fn column_sizes(&self) -> Vec<usize> {
        let mut sizes = vec![0; self.layers];
        for n in &self.nodes {
            sizes[n.layer] += 1;
        }
        sizes
    }

    /// What the drawing left out, in a sentence (empty when nothing was).
    pub fn omitted_text(&self, lang: Lang) -> String {
        let Omitted { closed, open } = self.omitted;
        let mut parts = Vec::new();
        if closed > 0 {
            parts.push(match lang {
                Lang::En => {
                    format!("{closed} done or dropped tasks folded into the counts on the open tasks")
                }
                Lang::Ja => format!("完了・不要の {closed} 件は待っているタスクの件数にまとめました"),
            });
        }
        if open > 0 {
            parts.push(match lang {
                Lang::En => format!("{open} more open tasks not drawn"),
                Lang::Ja => format!("ほかに未完了の {open} 件は描いていません"),
            });
        }
        parts.join("; ")
    }

    /// The drawing as a standalone SVG document; each node links to `href(id)`.
    pub fn svg(&self, href: &dyn Fn(TaskId) -> String, lang: Lang) -> String {
        let sizes = self.column_sizes();
        let width = PAD * 2 + self.layers * NODE_W + self.layers.saturating_sub(1) * GAP_X;
        let height = PAD * 2 + self.height * NODE_H + self.height.saturating_sub(1) * GAP_Y;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"dag\" width=\"{width}\" height=\"{height}\" \
             viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\">"
        );
        let _ = writeln!(
            out,
            "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" \
             markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" \
             fill=\"context-stroke\"/></marker></defs>"
        );
        for e in &self.edges {
            let (from, to) = (&self.nodes[e.from], &self.nodes[e.to]);
            let (fx, fy) = self.origin(from, &sizes);
            let (tx, ty) = self.origin(to, &sizes);
            let (x1, y1, x2, y2) = (fx + NODE_W, fy + NODE_H / 2, tx, ty + NODE_H / 2);
            let bend = GAP_X / 2;
            let (class, colour) = if e.met { ("edge met", "#2e7d32") } else { ("edge", "#9e9e9e") };
            let _ = writeln!(
                out,
                "<path class=\"{class}\" data-from=\"{}\" data-to=\"{}\" d=\"M {x1} {y1} C {} {y1}, {} {y2}, {x2} {y2}\" \
                 fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" marker-end=\"url(#arrow)\"/>",
                from.id,
                to.id,
                x1 + bend,
                x2.saturating_sub(bend),
            );
        }
        for n in &self.nodes {
            let (x, y) = self.origin(n, &sizes);
            let (fill, ink) = n.state.colours();
            let dash = if n.state == NodeState::Dropped { " stroke-dasharray=\"4 3\"" } else { "" };
            let title = xml(&clip_width(&n.title, TITLE_WIDTH));
            let state = n.state.label(lang);
            let folded = match (n.folded, lang) {
                (0, _) => String::new(),
                (k, Lang::En) => format!(" · +{k} done"),
                (k, Lang::Ja) => format!(" · 完了 +{k}"),
            };
            let _ = writeln!(
                out,
                "<a href=\"{}\" id=\"node-{id}\" class=\"node {}\"><title>{id} {} ({state})</title>\
                 <rect x=\"{x}\" y=\"{y}\" width=\"{NODE_W}\" height=\"{NODE_H}\" rx=\"6\" fill=\"{fill}\" \
                 stroke=\"#616161\"{dash}/><text x=\"{}\" y=\"{}\" fill=\"{ink}\" font-weight=\"bold\">{id}\
                 <tspan font-weight=\"normal\">{}</tspan></text><text x=\"{}\" y=\"{}\" fill=\"{ink}\">{title}</text></a>",
                xml(&href(n.id)),
                n.state.as_str(),
                xml(&n.title),
                x + 8,
                y + 18,
                xml(&format!(" {state}{folded}")),
                x + 8,
                y + 36,
                id = n.id,
            );
        }
        out.push_str("</svg>\n");
        out
    }

    /// The graph in Graphviz DOT (`dot -Tsvg`), left to right, coloured as the SVG.
    pub fn dot(&self, name: &str) -> String {
        let mut out = format!(
            "digraph \"{}\" {{\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", fontname=\"sans-serif\"];\n",
            dot_escape(name)
        );
        for n in &self.nodes {
            let (fill, ink) = n.state.colours();
            let _ = writeln!(
                out,
                "  \"{id}\" [label=\"{id}\\n{}\", fillcolor=\"{fill}\", fontcolor=\"{ink}\", class=\"{}\"];",
                dot_escape(&clip_width(&n.title, TITLE_WIDTH)),
                n.state.as_str(),
                id = n.id,
            );
        }
        for e in &self.edges {
            let colour = if e.met { "#2e7d32" } else { "#9e9e9e" };
            let _ = writeln!(
                out,
                "  \"{}\" -> \"{}\" [color=\"{colour}\"];",
                self.nodes[e.from].id, self.nodes[e.to].id
            );
        }
        out.push_str("}\n");
        out
    }

    /// The graph as a Mermaid flowchart, for pasting into Markdown.
    pub fn mermaid(&self) -> String {
        let mut out = String::from("flowchart LR\n");
        for n in &self.nodes {
            let _ = writeln!(
                out,
                "  t{}[\"{} {}\"]:::{}",
                n.id.num(),
                n.id,
                mermaid_escape(&clip_width(&n.title, TITLE_WIDTH)),
                n.state.as_str()
            );
        }
        for e in &self.edges {
            let _ = writeln!(out, "  t{} --> t{}", self.nodes[e.from].id.num(), self.nodes[e.to].id.num());
        }
        let used: HashSet<NodeState> = self.nodes.iter().map(|n| n.state).collect();
        for state in NodeState::ALL.into_iter().filter(|s| used.contains(s)) {
            let (fill, ink) = state.colours();
            let _ = writeln!(out, "  classDef {} fill:{fill},color:{ink},stroke:#616161", state.as_str());
        }
        out
    }
}

/// Clips a title to `width` display columns (a CJK or other wide character counts two), on its
/// first line, with `…` when cut.
fn clip_width(text: &str, width: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    let mut used = 0;
    let mut out = String::new();
    for c in first.chars() {
        let w = if c.is_ascii() { 1 } else { 2 };
        if used + w > width {
            out.push('…');
            return out;
        }
        used += w;
        out.push(c);
    }
    if text.lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

/// Escapes text for SVG content and attributes.
fn xml(text: &str) -> String {
    crate::format::escape_markup(&text.replace(['\n', '\r', '\t'], " "))
}

fn dot_escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace(['\n', '\r'], " ")
}

/// Mermaid labels in double quotes take entity codes for quotes and markup.
fn mermaid_escape(text: &str) -> String {
    text.replace('"', "#quot;").replace('<', "#lt;").replace('>', "#gt;").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(num: u64, title: &str, status: Status, deps: &[u64]) -> Task {
        let mut task = Task::new(TaskId::new(num), title, "plan:ship", Timestamp::UNIX_EPOCH);
        task.status = status;
        task.deps = deps.iter().map(|&d| TaskId::new(d)).collect();
        task
    }

    /// Seed 002's plan, t1 → t2, t3 → t4 → t5, in the crash state: t1 and t2 done, t3 running.
    fn seed_002() -> Vec<Task> {
        vec![
            task(1, "モジュールの土台作成", Status::Done, &[]),
            task(2, "パーサー実装", Status::Done, &[1]),
            task(3, "テスト作成", Status::Running, &[1]),
            task(4, "テストスイート実行", Status::Pending, &[2, 3]),
            task(5, "リリースノート", Status::Pending, &[4]),
        ]
    }

    fn state_of(graph: &Graph, num: u64) -> NodeState {
        graph.nodes.iter().find(|n| n.id.num() == num).map(|n| n.state).expect("node")
    }

    /// V6: seed 002 in its crash state is drawn as the seed draws it: t1, t2 green (done), t3
    /// purple (running), t4 and t5 waiting; the three edges out of done tasks green, the two
    /// others not; one column per step of the chain, t2 and t3 side by side.
    #[test]
    fn v6_seed_002_in_the_crash_state_is_coloured_and_layered_as_the_seed_draws_it() {
        let graph = layout(&seed_002(), &HashSet::new(), Timestamp::UNIX_EPOCH, 300);
        let states: Vec<NodeState> = (1..=5).map(|n| state_of(&graph, n)).collect();
        use NodeState::*;
        assert_eq!(states, [Done, Done, Running, Pending, Pending]);
        let edges: Vec<(u64, u64, bool)> = graph
            .edges
            .iter()
            .map(|e| (graph.nodes[e.from].id.num(), graph.nodes[e.to].id.num(), e.met))
            .collect();
        assert_eq!(edges, [(1, 2, true), (1, 3, true), (2, 4, true), (3, 4, false), (4, 5, false)]);
        let layers: Vec<usize> = graph.nodes.iter().map(|n| n.layer).collect();
        assert_eq!((layers, graph.layers, graph.height), (vec![0, 1, 1, 2, 3], 4, 2));
        let svg = graph.svg(&|id| format!("/t/{id}"), Lang::Ja);
        assert!(svg.contains("<a href=\"/t/T-0003\" id=\"node-T-0003\" class=\"node running\">"), "{svg}");
        assert!(svg.contains("fill=\"#8e24aa\""), "running is purple");
        assert_eq!(svg.matches("fill=\"#2e7d32\"").count(), 2, "two green nodes");
        assert_eq!(svg.matches("stroke=\"#2e7d32\"").count(), 3, "three green edges");
        assert_eq!(svg.matches("class=\"edge\"").count(), 2, "two edges still waiting");
        insta::assert_snapshot!("seed_002_crash_state.svg", svg);
        insta::assert_snapshot!("seed_002_crash_state.dot", graph.dot("PJ-002"));
        insta::assert_snapshot!("seed_002_crash_state.mmd", graph.mermaid());
    }

    /// V6: readiness and the approval queue colour pending tasks: t3 ready once t1 is done, t4
    /// queued for approval, t5 still waiting.
    #[test]
    fn v6_pending_tasks_are_ready_waiting_or_awaiting_approval() {
        let tasks = vec![
            task(1, "a", Status::Done, &[]),
            task(3, "b", Status::Pending, &[1]),
            task(4, "c", Status::Pending, &[1]),
            task(5, "d", Status::Pending, &[3]),
            task(6, "e", Status::Dropped, &[]),
            task(7, "f", Status::NeedsHuman, &[]),
        ];
        let awaiting = HashSet::from([TaskId::new(4)]);
        let graph = layout(&tasks, &awaiting, Timestamp::UNIX_EPOCH, 300);
        use NodeState::*;
        let states: Vec<NodeState> = [1, 3, 4, 5, 6, 7].map(|n| state_of(&graph, n)).to_vec();
        assert_eq!(states, [Done, Ready, AwaitingApproval, Pending, Dropped, NeedsHuman]);
    }

    /// V6: a project over the limit is drawn as its open frontier: closed deps folded into counts,
    /// open tasks past the limit counted, and the drawing says so.
    #[test]
    fn v6_a_large_project_is_drawn_as_its_open_frontier_and_says_what_it_folded() {
        let mut tasks: Vec<Task> = (1..=500).map(|n| task(n, "done", Status::Done, &[])).collect();
        tasks.extend((501..=800).map(|n| task(n, "open", Status::Pending, &[n - 500, n - 499])));
        let graph = layout(&tasks, &HashSet::new(), Timestamp::UNIX_EPOCH, 250);
        assert!(graph.frontier);
        assert_eq!(graph.nodes.len(), 250);
        assert!(graph.nodes.iter().all(|n| n.state == NodeState::Ready && n.folded == 2));
        assert_eq!(graph.omitted, Omitted { closed: 500, open: 50 });
        let text = graph.omitted_text(Lang::En);
        assert!(text.contains("500 done or dropped") && text.contains("50 more open"), "{text}");
        assert!(graph.svg(&|id| format!("/t/{id}"), Lang::En).contains("+2 done"));
    }

    /// V6: the barycentric sweeps uncross what the id order crosses: two chains whose ids
    /// interleave end up as two straight rows.
    #[test]
    fn v6_the_layout_orders_columns_so_chains_do_not_cross() {
        // 1 → 4, 2 → 3: by id, column 1 would hold 3 above 4 and both edges would cross.
        let tasks = vec![
            task(1, "a", Status::Pending, &[]),
            task(2, "b", Status::Pending, &[]),
            task(3, "c", Status::Pending, &[2]),
            task(4, "d", Status::Pending, &[1]),
        ];
        let graph = layout(&tasks, &HashSet::new(), Timestamp::UNIX_EPOCH, 300);
        let rank = |num: u64| graph.nodes.iter().find(|n| n.id.num() == num).map(|n| n.rank).expect("node");
        assert_eq!((rank(1) == rank(4), rank(2) == rank(3)), (true, true));
    }

    /// V6: titles are text in every format: markup, quotes and newlines are escaped, a wide
    /// title is clipped by display width.
    #[test]
    fn v6_titles_are_escaped_in_svg_dot_and_mermaid() {
        let tasks = vec![task(1, "<script>\"x\" & 'y'</script>\nsecond line", Status::Pending, &[])];
        let graph = layout(&tasks, &HashSet::new(), Timestamp::UNIX_EPOCH, 300);
        let svg = graph.svg(&|id| format!("/t/{id}?a=1&b=2"), Lang::En);
        assert!(!svg.contains("<script>") && svg.contains("&lt;script&gt;"), "{svg}");
        assert!(svg.contains("href=\"/t/T-0001?a=1&amp;b=2\""));
        let dot = graph.dot("P\"J");
        assert!(dot.contains("digraph \"P\\\"J\"") && dot.contains("\\\"x\\\""), "{dot}");
        let mermaid = graph.mermaid();
        assert!(mermaid.contains("#lt;script#gt;#quot;x#quot;") && !mermaid.contains("second"), "{mermaid}");
        assert_eq!(clip_width("確認事項の回答を依頼する作業です", 10), "確認事項の…");
    }
}
