//! Many clients at once against the API on loopback: no error and no lost update — every
//! acknowledged patch is in the journal (the full-size load run is `daicho-bench load`).

use std::collections::HashSet;

use daicho_server::ServerOptions;
use daicho_store::Store;
use serde_json::json;

use crate::{TestServer, item};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i3_concurrent_patches_and_reads_lose_no_update() {
    let server = TestServer::start(ServerOptions::default()).await;
    let ids = server.push((0..8).map(|i| item(&format!("task {i}"), "PJ-01", "work", "ai")).collect()).await;
    let clients = 16;
    let per_client = 20;
    let mut handles = Vec::new();
    for c in 0..clients {
        let (client, base, ids) = (server.client.clone(), server.base.clone(), ids.clone());
        handles.push(tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            for n in 0..per_client {
                let id = ids[(c + n) % ids.len()];
                if n % 3 == 0 {
                    let page =
                        client.get(format!("{base}/api/v1/tasks?project=PJ-01")).send().await.expect("get");
                    assert_eq!(page.status().as_u16(), 200);
                }
                let value = format!("c{c}-n{n}");
                let response = client
                    .patch(format!("{base}/api/v1/tasks/{id}"))
                    .json(&json!({ "correction": value, "by": format!("client{c}") }))
                    .send()
                    .await
                    .expect("patch");
                assert_eq!(response.status().as_u16(), 200, "{}", response.text().await.unwrap_or_default());
                acknowledged.push((id, value));
            }
            acknowledged
        }));
    }
    let mut acknowledged = Vec::new();
    for handle in handles {
        acknowledged.extend(handle.await.expect("client"));
    }
    assert_eq!(acknowledged.len(), clients * per_client);
    for id in &ids {
        let journal = server.store.journal(*id).await.expect("journal");
        let written: HashSet<String> =
            journal.iter().filter_map(|e| e.after.get("correction")?.as_str().map(str::to_owned)).collect();
        for (_, value) in acknowledged.iter().filter(|(i, _)| i == id) {
            assert!(written.contains(value), "acknowledged patch {value} of {id} is not in the journal");
        }
    }
}
