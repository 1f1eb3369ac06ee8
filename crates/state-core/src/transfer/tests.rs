use serde_json::json;

use super::*;
use crate::MemoryView;
use crate::ops::transfer::ImportRequest;
use crate::ops::transfer::check_record;

const NOW: UnixMillis = UnixMillis(1_800_000_000_000);

fn record(key: &str, value: Value, version: u64) -> DumpedRecord {
    DumpedRecord {
        key: key.into(),
        value,
        version,
        create_revision: 3,
        mod_revision: 7,
        updated_at: "2026-01-02T03:04:05.678Z".into(),
        expires_at: None,
        agent_id: Some("writer-1".into()),
    }
}

fn get(view: &MemoryView, key: &str) -> Option<Entry> {
    view.get(key).unwrap_or_else(|never| match never {})
}

fn import(view: &mut MemoryView, records: Vec<DumpedRecord>, dry_run: bool) -> ImportResult {
    let request = ImportRequest { records, dry_run, ..ImportRequest::default() };
    assert_eq!(request.validate(), Ok(()));
    let ctx = WriteContext { now: NOW, revision: view.revision };
    let Ok(plan) = plan_import(view, &prepare(request.records), dry_run, &ctx);
    view.apply(&plan);
    plan.outcome
}

#[test]
fn an_absent_key_is_written_with_its_version_time_and_writer() {
    let mut view = MemoryView::default();
    let mut expiring = record("b", json!([1]), 2);
    expiring.expires_at = Some("2027-06-01T00:00:00.000Z".into());
    let result = import(&mut view, vec![record("a", json!({"n": 1}), 5), expiring], false);
    assert_eq!((result.imported, result.unchanged, result.conflicts.len()), (2, 0, 0));
    let Some(a) = get(&view, "a") else { panic!("missing") };
    assert_eq!((a.value, a.version, a.agent_id.as_deref()), (json!({"n": 1}), 5, Some("writer-1")));
    assert_eq!(a.updated_at.to_rfc3339(), "2026-01-02T03:04:05.678Z");
    let Some(b) = get(&view, "b") else { panic!("missing") };
    assert_eq!(b.expires_at.map(UnixMillis::to_rfc3339).as_deref(), Some("2027-06-01T00:00:00.000Z"));
    // Above every revision the records carried, so later fencing tokens stay larger.
    assert_eq!((result.revision, view.revision, a.mod_revision), (8, 8, 8));
}

#[test]
fn a_rerun_changes_nothing_and_a_differing_key_is_a_conflict_left_alone() {
    let mut view = MemoryView::default();
    import(&mut view, vec![record("a", json!(1), 5), record("b", json!(2), 1)], false);
    let again = import(&mut view, vec![record("a", json!(1), 5), record("b", json!(2), 1)], false);
    assert_eq!((again.imported, again.unchanged, again.revision), (0, 2, 8));

    let clash = import(&mut view, vec![record("a", json!("other"), 5), record("b", json!(2), 3)], false);
    assert_eq!(clash.imported, 0);
    assert_eq!(
        clash.conflicts,
        vec![
            ImportConflict { key: "a".into(), current_version: 5, incoming_version: 5 },
            ImportConflict { key: "b".into(), current_version: 1, incoming_version: 3 },
        ]
    );
    let Some(a) = get(&view, "a") else { panic!("missing") };
    assert_eq!(a.value, json!(1));
}

#[test]
fn a_dry_run_decides_the_same_and_writes_nothing() {
    let mut view = MemoryView::default();
    import(&mut view, vec![record("a", json!(1), 1)], false);
    let result = import(&mut view, vec![record("a", json!(9), 1), record("new", json!(2), 4)], true);
    assert_eq!((result.imported, result.conflicts.len(), result.dry_run), (1, 1, true));
    assert_eq!(view.get("new"), Ok(None));
    assert_eq!(view.revision, 8);
}

#[test]
fn an_expired_record_is_left_out() {
    let mut view = MemoryView::default();
    let mut gone = record("a", json!(1), 1);
    gone.expires_at = Some("2020-01-01T00:00:00Z".into());
    let result = import(&mut view, vec![gone.clone()], false);
    assert_eq!((result.imported, result.expired), (0, 1));
    assert_eq!(view.get("a"), Ok(None));
}

#[test]
fn imported_notes_are_indexed_together_and_found_by_recall() {
    let mut view = MemoryView::default();
    let note = |id: &str, content: &str| {
        record(&keyspace::note_key(id), json!({"content": content, "keywords": ["ops"], "tokens": 4}), 2)
    };
    let result = import(
        &mut view,
        vec![note("vacuum", "autovacuum stalls on wraparound"), note("tokio", "blocking calls starve the runtime")],
        false,
    );
    assert_eq!(result.imported, 2);
    let Ok(found) = text_index::search(&view, Corpus::Knowledge, "runtime starve", Some(5));
    assert_eq!(found.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["tokio"]);
    let Some(stats) = get(&view, &keyspace::index_stats_key(Corpus::Knowledge)) else { panic!("missing") };
    assert_eq!(stats.value["documents"], json!(2));
}

#[test]
fn a_dump_never_carries_or_accepts_derived_records() {
    let posting = keyspace::posting_key(Corpus::Knowledge, "term", "doc");
    assert!(!carried(&posting) && !carried(&keyspace::request_key("r")));
    assert!(carried("user/key") && carried(&keyspace::run_key("run-1")) && carried(&keyspace::note_key("n")));
    let request = ImportRequest { records: vec![record(&posting, json!([1, 2]), 1)], ..ImportRequest::default() };
    let error = request.validate().err().map(|e| e.to_string()).unwrap_or_default();
    assert!(error.contains("records[0]") && error.contains("not a record a dump carries"), "{error}");
    let mut bad = record("k", json!(1), 0);
    assert!(check_record(&bad).is_err());
    bad.version = 1;
    bad.updated_at = "yesterday".into();
    assert!(check_record(&bad).unwrap_err().contains("updated_at"));
}

/// The probe's dumps (issue 30): a version and revisions near 2^64 wrapped the store's
/// revision and a key's version to 0; a run id holding the separator showed another run's step.
#[test]
fn numbers_near_the_top_and_names_holding_separators_are_refused() {
    let mut huge = record("k", json!(1), u64::MAX);
    assert!(check_record(&huge).unwrap_err().contains("`version`"));
    huge.version = crate::ops::transfer::MAX_IMPORTED_NUMBER;
    assert_eq!(check_record(&huge), Ok(()), "2^53 itself is fine");
    huge.mod_revision = u64::MAX - 1;
    assert!(check_record(&huge).unwrap_err().contains("`mod_revision`"));

    let run = |id: &str| record(&keyspace::run_key(id), json!({}), 1);
    assert_eq!(check_record(&run("run-1")), Ok(()));
    let aliased = run("victim\u{2}00000000000000000001");
    assert!(check_record(&aliased).unwrap_err().contains("parts"), "a run id with the separator");
    let step = record(&keyspace::step_key("a\u{3}b", 1), json!({}), 1);
    assert!(check_record(&step).unwrap_err().contains("U+0003"));
    let global = keyspace::checkpoint_latest_key(None);
    assert_eq!(keyspace::check_shape(&global), Ok(()), "the global checkpoint pointer is the separator alone");
    let reservation = record(&keyspace::reservation_key("repo", "me", 7), json!({}), 1);
    assert_eq!(check_record(&reservation), Ok(()));
}
