//! Time-driven rules on a real SQLite ledger with the engine's clock moved by hand instead of
//! sleeping: a lease expires (S4) exactly when the clock passes it.

use std::sync::Arc;

use daicho_core::{Actor, Item, Status, Tags};
use daicho_engine::clock::ManualClock;
use daicho_engine::remote::{ClaimFilter, NextClaim};
use daicho_engine::{Config, Engine, Role};
use daicho_sqlite::{SqliteOptions, SqliteStore};
use daicho_store::{Batch, Store, UnknownDeps};
use jiff::SignedDuration;

const CONFIG: &str = r#"
[policy]
lease = "30m"

[[action]]
name = "work"
kind = "command"
command = ["true"]
auto = true
"#;

/// S4: a claimed run whose lease is not renewed is lost once the clock passes the lease, and
/// not a moment before: the next sweep counts it as one failure and returns the task.
#[tokio::test]
async fn s4_a_lease_expires_when_the_clock_passes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(
        SqliteStore::open(dir.path().join("ledger.db"), SqliteOptions::default()).await.expect("open"),
    );
    let start = jiff::Timestamp::now();
    let mut item = Item::new("work on it", "test");
    item.action = "work".into();
    item.tags = Tags::parse_list("ai");
    let batch = Batch {
        items: vec![item].into(),
        actor: Actor::System,
        now: start,
        file: "test".into(),
        unknown_deps: UnknownDeps::Refuse,
    };
    let id = store.upsert(batch).await.expect("upsert").added[0];
    let clock = Arc::new(ManualClock::new(start));
    let engine = Arc::new(
        Engine::new(Arc::clone(&store), Config::parse(CONFIG, "t.toml").expect("config"), None)
            .with_clock(Arc::clone(&clock) as Arc<dyn daicho_engine::clock::Clock>),
    );

    let filter = ClaimFilter { worker: "remote:a".into(), project: None, action: None };
    let NextClaim::Claimed(claim) = engine.claim_next(&filter).await.expect("claim") else {
        panic!("the ready task is claimed")
    };
    assert_eq!(claim.task.id, id);
    assert_eq!(
        claim.lease_expires_at,
        start + SignedDuration::from_mins(30),
        "the lease is read from the clock"
    );

    clock.advance(SignedDuration::from_mins(29));
    let report = engine.sweep(Role::RunRequested, 0).await.expect("sweep");
    assert!(report.lost.is_empty(), "the lease has a minute left: {:?}", report.lost);
    assert_eq!(store.get(id).await.expect("get").expect("row").status, Status::Running);

    clock.advance(SignedDuration::from_mins(2));
    let report = engine.sweep(Role::RunRequested, 0).await.expect("sweep");
    assert_eq!(report.lost, vec![(id, Status::Pending)], "the lost run is counted once");
    let row = store.get(id).await.expect("get").expect("row");
    assert_eq!((row.status, row.failures), (Status::Pending, 1));
    assert!(row.lease.is_none(), "the claim is returned");
}
