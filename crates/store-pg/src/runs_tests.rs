use std::time::Duration;

use lsm_test_support::pg;
use serde_json::json;

use super::*;
use crate::PgSettings;

fn runs(test: &str, owner: &str, lease: Duration) -> Option<(PgRuns, pg::TestDb)> {
    let db = pg::database(test)?;
    let settings = PgSettings::new(&db.url).with_schema(&db.schema);
    let conn = Db::connect(settings).expect("connect");
    Some((PgRuns::new(conn, owner, lease), db))
}

fn other(runs: &PgRuns, owner: &str, lease: Duration) -> PgRuns {
    PgRuns::new(Arc::clone(runs.db()), owner, lease)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_queued_run_is_claimed_once_and_its_appends_are_fenced_by_the_lease() {
    let Some((a, _db)) = runs("queue", "worker-a", Duration::from_secs(60)) else {
        return;
    };
    let b = other(&a, "worker-b", Duration::from_secs(60));
    a.submit("r1", "general", "the task", json!({"task": "the task"}))
        .await
        .unwrap();
    let claimed = a.claim(&[]).await.unwrap().expect("a run to claim");
    assert_eq!(claimed.run_id, "r1");
    assert_eq!(claimed.status, "running");
    assert_eq!(claimed.lease_owner.as_deref(), Some("worker-a"));
    assert_eq!(claimed.attempts, 1);
    assert!(b.claim(&[]).await.unwrap().is_none(), "claimed twice");

    a.append("r1", 1, "{\"seq\":1}", Some("the task")).unwrap();
    // The same line again (an answer lost with the connection) is fine; another is not.
    a.append("r1", 1, "{\"seq\":1}", None).unwrap();
    let e = a.append("r1", 1, "{\"seq\":1,\"x\":2}", None).unwrap_err();
    assert!(matches!(e, StoreError::LeaseLost { .. }), "{e}");
    let e = b.append("r1", 2, "{\"seq\":2}", None).unwrap_err();
    assert!(e.to_string().contains("worker-a holds it now"), "{e}");
    assert_eq!(a.read("r1").unwrap(), vec!["{\"seq\":1}".to_string()]);
    assert_eq!(
        a.heartbeat("r1").await.unwrap(),
        Heartbeat::Held {
            cancel_requested: false
        }
    );
    assert_eq!(b.heartbeat("r1").await.unwrap(), Heartbeat::Lost);
    a.finish("r1", "completed", json!({"status": "completed"}))
        .unwrap();
    let row = a.get("r1").await.unwrap().unwrap();
    assert_eq!(row.status, "completed");
    assert_eq!(row.last_seq, 1);
    assert!(row.lease_owner.is_none());
    assert_eq!(a.heartbeat("r1").await.unwrap(), Heartbeat::Lost);
    assert_eq!(
        b.take("r1", "general").unwrap(),
        TakeOutcome::Finished {
            status: "completed".into()
        }
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_whose_lease_ran_out_is_taken_over_and_the_old_driver_is_fenced_off() {
    let Some((a, _db)) = runs("lease", "worker-a", Duration::from_millis(300)) else {
        return;
    };
    let b = other(&a, "worker-b", Duration::from_secs(60));
    a.submit("r2", "general", "t", json!({})).await.unwrap();
    a.claim(&[]).await.unwrap().expect("claimed");
    a.append("r2", 1, "one", None).unwrap();
    assert!(
        matches!(b.take("r2", "general").unwrap(), TakeOutcome::Held { owner, .. } if owner == "worker-a")
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let row = b.claim(&[]).await.unwrap().expect("the expired run");
    assert_eq!(row.run_id, "r2");
    assert_eq!(row.attempts, 2);
    assert_eq!(row.last_seq, 1);
    assert_eq!(a.heartbeat("r2").await.unwrap(), Heartbeat::Lost);
    assert!(matches!(
        a.append("r2", 2, "two", None).unwrap_err(),
        StoreError::LeaseLost { .. }
    ));
    b.append("r2", 2, "two", None).unwrap();
    assert_eq!(b.read("r2").unwrap(), vec!["one", "two"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_steps_lines_are_appended_together_all_or_none_and_fenced_by_the_lease() {
    let Some((a, _db)) = runs("batch", "worker-a", Duration::from_secs(60)) else {
        return;
    };
    let b = other(&a, "worker-b", Duration::from_secs(60));
    a.submit("r3", "general", "t", json!({})).await.unwrap();
    a.claim(&[]).await.unwrap().expect("claimed");
    let step = |from: u64, texts: &[&str]| -> Vec<(u64, String)> {
        (from..).zip(texts.iter().map(|t| t.to_string())).collect()
    };
    a.append_lines("r3", &step(1, &["one", "two"]), Some("the topic"))
        .unwrap();
    // Repeated (an answer lost with the connection): already written, fine.
    a.append_lines("r3", &step(1, &["one", "two"]), None)
        .unwrap();
    // A batch that collides with a different stored line is refused whole.
    assert!(matches!(
        a.append_lines("r3", &step(2, &["other", "three"]), None)
            .unwrap_err(),
        StoreError::LeaseLost { .. }
    ));
    assert!(matches!(
        b.append_lines("r3", &step(3, &["three", "four"]), None)
            .unwrap_err(),
        StoreError::LeaseLost { .. }
    ));
    a.append_lines("r3", &step(3, &["three", "four"]), None)
        .unwrap();
    a.append_lines("r3", &[], None).unwrap();
    assert_eq!(a.read("r3").unwrap(), vec!["one", "two", "three", "four"]);
    let row = a.get("r3").await.unwrap().unwrap();
    assert_eq!(row.last_seq, 4);
    assert_eq!(row.topic, "the topic");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_ends_a_queued_run_at_once_and_asks_a_driven_one_through_its_heartbeat() {
    let Some((a, _db)) = runs("cancel", "worker-a", Duration::from_secs(60)) else {
        return;
    };
    a.submit("q", "general", "t", json!({})).await.unwrap();
    a.submit("d", "general", "t", json!({})).await.unwrap();
    assert_eq!(a.cancel("q").await.unwrap(), CancelOutcome::Cancelled);
    let d = a
        .claim(&[])
        .await
        .unwrap()
        .expect("d is claimable, q is not");
    assert_eq!(d.run_id, "d");
    assert_eq!(a.cancel("d").await.unwrap(), CancelOutcome::Requested);
    assert_eq!(
        a.heartbeat("d").await.unwrap(),
        Heartbeat::Held {
            cancel_requested: true
        }
    );
    a.finish("d", "stopped", json!({})).unwrap();
    assert_eq!(a.get("d").await.unwrap().unwrap().status, "cancelled");
    assert_eq!(
        a.cancel("d").await.unwrap(),
        CancelOutcome::AlreadyFinished {
            status: "cancelled".into()
        }
    );
    assert_eq!(a.cancel("nope").await.unwrap(), CancelOutcome::NotFound);
    let listed = a
        .list(&ListFilter {
            statuses: vec!["cancelled".into()],
            ..ListFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
        vec!["q", "d"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_of_many_workers_at_once_take_each_run_exactly_once() {
    let Some((a, _db)) = runs("claims", "w0", Duration::from_secs(60)) else {
        return;
    };
    for i in 0..40 {
        a.submit(&format!("r{i:02}"), "general", "t", json!({}))
            .await
            .unwrap();
    }
    let mut tasks = Vec::new();
    for w in 0..4 {
        let worker = other(&a, &format!("w{w}"), Duration::from_secs(60));
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            while let Some(r) = worker.claim(&[]).await.unwrap() {
                mine.push(r.run_id);
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort();
    let want: Vec<String> = (0..40).map(|i| format!("r{i:02}")).collect();
    assert_eq!(all, want);
}

#[test]
fn the_store_waits_for_a_restarted_server_and_goes_on() {
    let Some(server) = pg::PgServer::start("restart") else {
        return;
    };
    let mut settings = PgSettings::new(server.url());
    settings.retry_for = Duration::from_secs(30);
    let db = Db::connect(settings).unwrap();
    let runs = PgRuns::new(db, "w", Duration::from_secs(60));
    assert_eq!(runs.take("r", "general").unwrap(), TakeOutcome::Taken);
    runs.append("r", 1, "one", None).unwrap();
    server.stop();
    let restart = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        server.start_again();
        server
    });
    // Blocks through the restart, then succeeds on a new connection.
    runs.append("r", 2, "two", None).unwrap();
    assert_eq!(runs.read("r").unwrap(), vec!["one", "two"]);
    drop(restart.join().unwrap());
}

#[test]
fn a_database_of_a_newer_schema_is_refused_and_migrations_run_once() {
    let Some(db) = pg::database("migrations") else {
        return;
    };
    let settings = PgSettings::new(&db.url).with_schema(&db.schema);
    let first = Db::connect(settings.clone()).unwrap();
    // A second connect finds everything applied.
    let again = Db::connect(settings.clone()).unwrap();
    let schema = db.schema.clone();
    let versions: i64 = again
        .blocking("counting", move |c| {
            let schema = schema.clone();
            async move {
                let r = c
                    .query_one(
                        &format!("SELECT count(*) FROM {schema}.lsm_schema_migrations"),
                        &[],
                    )
                    .await?;
                Ok(r.get(0))
            }
        })
        .unwrap();
    assert_eq!(versions, i64::from(crate::migrate::latest()));
    let schema = db.schema.clone();
    first
        .blocking("faking a newer schema", move |c| {
            let schema = schema.clone();
            async move {
                c.execute(
                    &format!("INSERT INTO {schema}.lsm_schema_migrations (version) VALUES (9999)"),
                    &[],
                )
                .await?;
                Ok(())
            }
        })
        .unwrap();
    let e = Db::connect(settings).unwrap_err();
    assert!(
        matches!(e, StoreError::SchemaTooNew { found: 9999, .. }),
        "{e}"
    );
}
