//! Loading a project's graph for drawing (V6) from a real SQLite ledger: a large project is read
//! as its open frontier with the project's true totals, and the rows it waits on in other
//! projects colour its edges.

use daicho_core::graph::{NodeState, Omitted};
use daicho_core::{Actor, Item, Status};
use daicho_engine::graph::{GraphRequest, load};
use daicho_sqlite::{SqliteOptions, SqliteStore};
use daicho_store::{Batch, Store, UnknownDeps};

async fn seed(store: &SqliteStore, items: Vec<Item>) -> Vec<daicho_core::TaskId> {
    let batch = Batch {
        items: items.into(),
        actor: Actor::Human("test".into()),
        now: jiff::Timestamp::now(),
        file: "test".into(),
        unknown_deps: UnknownDeps::Refuse,
    };
    store.upsert(batch).await.expect("upsert").added
}

fn item(title: String, project: &str, status: Status, deps: Vec<String>) -> Item {
    let mut item = Item::new(&title, "test");
    item.project = project.into();
    item.status = Some(status);
    item.deps = deps;
    item
}

/// V6: 1,200 done rows and 400 open ones, each open row waiting on two done ones and on a row
/// of another project: drawn as 300 open nodes, each counting its two done deps, the other
/// project's row drawn too; the totals left out come from the whole project, not from what was
/// read; a project of no rows is an error that names it; one source draws one plan.
#[tokio::test]
async fn v6_a_large_project_loads_as_its_frontier_with_the_projects_totals() {
    let dir = tempfile::tempdir().expect("dir");
    let store = SqliteStore::open(dir.path().join("l.db"), SqliteOptions::default()).await.expect("open");
    let other = seed(&store, vec![item("elsewhere".into(), "PJ-OTHER", Status::Pending, vec![])]).await;
    let done =
        seed(&store, (0..1_200).map(|n| item(format!("done {n}"), "PJ-BIG", Status::Done, vec![])).collect())
            .await;
    let open: Vec<Item> = (0..400)
        .map(|n| {
            let deps = vec![done[2 * n].to_string(), done[2 * n + 1].to_string(), other[0].to_string()];
            item(format!("open {n}"), "PJ-BIG", Status::Pending, deps)
        })
        .collect();
    seed(&store, open).await;

    let request = GraphRequest { project: "PJ-BIG".into(), source: None, max_nodes: 300 };
    let graph = load(&store, &request, jiff::Timestamp::now()).await.expect("load");
    assert!(graph.frontier);
    let (elsewhere, mine): (Vec<_>, Vec<_>) = graph.nodes.iter().partition(|n| n.id == other[0]);
    assert_eq!((elsewhere.len(), mine.len()), (1, 299), "300 nodes: the other project's row among them");
    assert!(mine.iter().all(|n| n.folded == 2 && n.state == NodeState::Pending), "each waits on `elsewhere`");
    assert_eq!(graph.omitted, Omitted { closed: 1_200, open: 101 });
    assert_eq!(graph.edges.len(), 299);

    let small = GraphRequest { project: "PJ-OTHER".into(), source: None, max_nodes: 300 };
    let graph = load(&store, &small, jiff::Timestamp::now()).await.expect("load");
    assert_eq!((graph.nodes.len(), graph.frontier, graph.nodes[0].state), (1, false, NodeState::Ready));

    let none = GraphRequest { project: "PJ-NONE".into(), source: None, max_nodes: 300 };
    let err = load(&store, &none, jiff::Timestamp::now()).await.expect_err("no rows");
    assert!(err.to_string().contains("'PJ-NONE' has no rows"), "{err}");

    let mut plan = item("step two".into(), "PJ-PLAN", Status::Pending, vec![]);
    plan.source = "plan:ship it".into();
    let first = seed(
        &store,
        vec![{
            let mut first = item("step one".into(), "PJ-PLAN", Status::Done, vec![]);
            first.source = "plan:ship it".into();
            first
        }],
    )
    .await;
    plan.deps = vec![first[0].to_string()];
    seed(&store, vec![plan, item("not in the plan".into(), "PJ-PLAN", Status::Pending, vec![])]).await;
    let goal =
        GraphRequest { project: "PJ-PLAN".into(), source: Some("plan:ship it".into()), max_nodes: 300 };
    let graph = load(&store, &goal, jiff::Timestamp::now()).await.expect("load");
    let states: Vec<NodeState> = graph.nodes.iter().map(|n| n.state).collect();
    assert_eq!(states, [NodeState::Done, NodeState::Ready]);
    assert!(graph.edges.len() == 1 && graph.edges[0].met);
}
