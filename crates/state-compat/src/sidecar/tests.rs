use super::*;

fn run(status: RunStatus, last_step: u64) -> RunSummary {
    RunSummary {
        run_id: "r".into(),
        name: "n".into(),
        run_status: status,
        tags: BTreeMap::new(),
        attempt: 1,
        max_attempts: 3,
        last_step,
        holder: Some("w".into()),
        lease_expires_at: None,
        error: None,
        priority: 0,
        depends_on: Vec::new(),
        waiting_on: Vec::new(),
        blocked_by: None,
        not_before: None,
        awaiting_signal: None,
        limited_by: None,
        state: None,
        created_at: UnixMillis(1_500).to_rfc3339(),
        updated_at: UnixMillis(2_250).to_rfc3339(),
    }
}

#[test]
fn statuses_use_that_servers_names() {
    let cases = [
        (RunStatus::Pending, 0, "created"),
        (RunStatus::Running, 0, "claimed"),
        (RunStatus::Running, 2, "running"),
        (RunStatus::Completed, 2, "done"),
        (RunStatus::Failed, 0, "failed"),
        (RunStatus::Cancelled, 0, "failed"),
    ];
    for (status, last_step, name) in cases {
        assert_eq!(status_name(&run(status, last_step)), name);
    }
    let meta = WorkflowMeta::new(&run(RunStatus::Running, 1));
    assert_eq!((meta.created_at, meta.updated_at), (1.5, 2.25), "epoch seconds as floats");
}

#[test]
fn discover_filters_by_status_name_and_lists_newest_first() {
    let mut a = run(RunStatus::Pending, 0);
    a.run_id = "a".into();
    let mut b = run(RunStatus::Pending, 0);
    b.run_id = "b".into();
    let c = run(RunStatus::Completed, 1);
    let found = runs_newest_first(&[a, b, c], Some("created"), None);
    assert_eq!(found.runs.iter().map(|m| m.run_id.as_str()).collect::<Vec<_>>(), vec!["b", "a"]);
}
