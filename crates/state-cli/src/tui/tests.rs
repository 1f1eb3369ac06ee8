//! Each screen drawn on ratatui's TestBackend from data read out of a real store (a
//! standalone database in a temporary directory, its clock stopped at one instant, so every
//! stamp, countdown and run id is the same on every run), checked by the text a person would
//! see and, whole, against its snapshot in `tui/snapshots/` (`STATE_UPDATE_SNAPSHOTS=1`
//! rewrites them; review the diff).

#![allow(clippy::unwrap_used)]

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;
use state_api::catalog::Operation;
use state_api::{Api, Local};
use state_core::UnixMillis;

use super::app::{App, Load, Loaded, View};
use super::keys::Change;
use super::{perform, render};

struct Fixture {
    api: Api,
    app: App,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let clock = std::sync::Arc::new(state_api::ManualClock::new(WRITTEN_AT));
    let db = dir.path().join("s.redb");
    let api = Api::local(Local::open_standalone_with_clock(&db, Default::default(), clock).unwrap());
    let call = |op, args| api.call(op, args);
    call(Operation::StateSet, json!({"key": "jobs/1", "value": {"step": 1}, "agent_id": "planner"})).await;
    call(Operation::StateSet, json!({"key": "jobs/1", "value": {"step": 2, "done": true}, "agent_id": "worker"})).await;
    call(Operation::StateSet, json!({"key": "jobs/2", "value": "queued"})).await;
    call(Operation::StateSet, json!({"key": "cache:weather", "value": 21, "ttl_seconds": 3600})).await;
    call(Operation::StateSet, json!({"key": "readme", "value": "top level"})).await;
    call(Operation::LeaseAcquire, json!({"resource_id": "printer", "holder_id": "agent-7", "ttl_seconds": 600})).await;
    let permit = json!({"name": "build-slots", "holder_id": "agent-7", "capacity": 4, "ttl_seconds": 600});
    call(Operation::SemaphoreAcquire, permit).await;
    call(Operation::QueueSend, json!({"queue": "inbox/reviewer", "body": {"pr": 42}})).await;
    call(Operation::QueueSend, json!({"queue": "inbox/reviewer", "body": {"pr": 43}, "delay_seconds": 3600})).await;
    let reserve = json!({"scope": "/src/app", "holder_id": "agent-7", "patterns": ["src/parser/**"],
        "ttl_seconds": 1800, "reason": "new grammar"});
    call(Operation::PathsReserve, reserve).await;
    let run = call(Operation::WorkflowCreate, json!({"name": "nightly-report"})).await.body.unwrap();
    let claim =
        call(Operation::WorkflowClaim, json!({"run_id": run["run_id"], "agent_id": "w1", "lease_ttl_seconds": 300}))
            .await
            .body
            .unwrap();
    let step =
        json!({"run_id": run["run_id"], "agent_id": "w1", "token": claim["token"], "step": 1, "output": {"rows": 42}});
    call(Operation::WorkflowCheckpoint, step).await;
    let saved =
        json!({"description": "Wired the inspector", "highlights": ["virtualised list"], "workspace": "/src/state"});
    call(Operation::CheckpointSave, saved).await;
    let mut app = App::new("test.redb".into());
    let mut fixture = Fixture { api, app: App::new(String::new()), _dir: dir };
    load_all(&fixture.api, &mut app).await;
    fixture.app = app;
    fixture
}

/// Loads every key page and answers every load the app asks for, as the driver would.
async fn load_all(api: &Api, app: &mut App) {
    let page = api.call(Operation::StateList, json!({"limit": 1000})).await.body.unwrap();
    let list: state_core::ops::kv::ListResult = serde_json::from_value(page).unwrap();
    let rows = list.entries.iter().map(super::row_of).collect();
    app.loaded(Loaded::KeysPage { rows, done: true });
}

async fn press(f: &mut Fixture, code: KeyCode) {
    let mut loads = f.app.key(KeyEvent::new(code, KeyModifiers::NONE));
    while let Some(load) = loads.pop() {
        let loaded = perform(&f.api, "", load).await;
        loads.extend(f.app.loaded(loaded));
    }
}

async fn typed(f: &mut Fixture, text: &str) {
    for c in text.chars() {
        press(f, KeyCode::Char(c)).await;
    }
}

/// When the fixture was written, by the store's stopped clock.
const WRITTEN_AT: UnixMillis = UnixMillis(1_795_694_400_000); // 2026-11-26T12:00:00Z

/// Some seconds after the fixture was written: TTLs and leases count down from there.
fn at(seconds_after: u64) -> UnixMillis {
    WRITTEN_AT.plus_millis(seconds_after * 1000)
}

/// Compares a whole screen with its snapshot, `tui/snapshots/<name>.txt`; with
/// STATE_UPDATE_SNAPSHOTS set, writes it instead.
fn assert_snapshot(name: &str, screen: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tui/snapshots").join(format!("{name}.txt"));
    if std::env::var_os("STATE_UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, screen).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no snapshot {} ({e}); STATE_UPDATE_SNAPSHOTS=1 writes it", path.display()));
    assert!(expected == screen, "the screen differs from {}:\n{screen}\nexpected:\n{expected}", path.display());
}

fn screen(app: &mut App, now: UnixMillis) -> String {
    let mut terminal = Terminal::new(TestBackend::new(110, 24)).unwrap();
    terminal.draw(|frame| render::draw(frame, app, now)).unwrap();
    let buffer = terminal.backend().buffer();
    let mut text = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            text.push_str(buffer[(x, y)].symbol());
        }
        text.push('\n');
    }
    text
}

fn assert_shows(screen: &str, parts: &[&str]) {
    for part in parts {
        assert!(screen.contains(part), "the screen lacks {part:?}:\n{screen}");
    }
}

#[tokio::test]
async fn the_key_browser_groups_by_prefix_and_filters_as_you_type() {
    let mut f = fixture().await;
    let shown = screen(&mut f.app, at(0));
    assert_shows(&shown, &["1 Keys", "(all keys)", "cache:", "jobs/", "(no prefix)", "Keys 4 ", "jobs/1", "readme"]);
    assert_shows(&shown, &["Enter open", "? help"]);
    assert_snapshot("keys", &shown);
    assert_shows(&screen(&mut f.app, at(90)), &["58m "]);

    press(&mut f, KeyCode::Char('/')).await;
    typed(&mut f, "JOBS").await;
    let shown = screen(&mut f.app, at(0));
    assert_shows(&shown, &["Keys 0 of 4  /JOBS▏", "no key matches"]);
    for _ in 0..4 {
        press(&mut f, KeyCode::Backspace).await;
    }
    typed(&mut f, "jobs").await;
    press(&mut f, KeyCode::Enter).await;
    let shown = screen(&mut f.app, at(0));
    assert_shows(&shown, &["Keys 2 of 4  /jobs ", "jobs/1", "jobs/2"]);
    assert!(!shown.contains("readme"), "{shown}");

    // A group narrows the list the same way.
    press(&mut f, KeyCode::Esc).await;
    press(&mut f, KeyCode::Tab).await;
    press(&mut f, KeyCode::Down).await;
    let shown = screen(&mut f.app, at(0));
    assert_shows(&shown, &["Prefixes (Tab)", "Keys 1 of 4", "cache:weather"]);
}

#[tokio::test]
async fn an_entry_shows_its_value_version_writer_and_ttl_and_its_history_diffs() {
    let mut f = fixture().await;
    press(&mut f, KeyCode::Down).await; // cache:weather, then jobs/1
    press(&mut f, KeyCode::Enter).await;
    assert_eq!(f.app.view, View::Entry);
    let shown = screen(&mut f.app, at(0));
    assert_shows(&shown, &["key       jobs/1", "version   2", "writer    worker", "ttl       none", "\"done\": true"]);
    assert_snapshot("entry", &shown);

    press(&mut f, KeyCode::Char('h')).await;
    let shown = screen(&mut f.app, at(0));
    assert_shows(
        &shown,
        &[
            "History of jobs/1",
            "put",
            "v1",
            "v2",
            " v1 → v2 ",
            "-   \"step\": 1",
            "+   \"step\": 2,",
            "+   \"done\": true",
        ],
    );
    assert_snapshot("history", &shown);

    // Marking v2 and moving to v1 compares them the other way round.
    press(&mut f, KeyCode::Char('m')).await;
    press(&mut f, KeyCode::Up).await;
    let shown = screen(&mut f.app, at(0));
    assert_shows(&shown, &[" v2 → v1 ", "◆"]);

    // A TTL key counts down.
    press(&mut f, KeyCode::Esc).await;
    press(&mut f, KeyCode::Home).await;
    press(&mut f, KeyCode::Enter).await;
    let shown = screen(&mut f.app, at(630));
    assert_shows(&shown, &["key       cache:weather", "ttl       49m "]);
}

#[tokio::test]
async fn workflows_leases_and_checkpoints_have_their_views() {
    let mut f = fixture().await;
    press(&mut f, KeyCode::Char('2')).await;
    let shown = screen(&mut f.app, at(90));
    assert_shows(
        &shown,
        &["Workflows 1", "nightly-report", "running", "w1", "1/3", "3m ", "Steps of", "step 1", "{\"rows\":42}"],
    );
    assert_snapshot("runs", &shown);

    press(&mut f, KeyCode::Char('3')).await;
    let shown = screen(&mut f.app, at(90));
    assert_shows(&shown, &["Leases 1", "printer", "agent-7", "8m "]);
    assert_snapshot("leases", &shown);

    press(&mut f, KeyCode::Char('4')).await;
    let shown = screen(&mut f.app, at(0));
    assert_shows(&shown, &["Checkpoints: last 30 days", "Wired the inspector"]);
    assert_snapshot("checkpoints", &shown);

    press(&mut f, KeyCode::Char('?')).await;
    let shown = screen(&mut f.app, at(0));
    assert_shows(&shown, &["Help (any key closes)", "m mark it as the diff's base"]);
    assert_snapshot("help", &shown);
    press(&mut f, KeyCode::Char('x')).await;
    assert!(!f.app.help);
    press(&mut f, KeyCode::Char('q')).await;
    assert!(f.app.quit);
}

/// The words of the screen's line that mentions `needle`, frame characters dropped.
fn row_with(screen: &str, needle: &str) -> Vec<String> {
    let line = screen.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("no {needle:?} in:\n{screen}"));
    line.split(['│', ' ']).filter(|w| !w.is_empty()).map(str::to_owned).collect()
}

#[tokio::test]
async fn semaphores_queues_and_reservations_have_a_view_of_their_own() {
    let mut f = fixture().await;
    press(&mut f, KeyCode::Char('5')).await;
    let shown = screen(&mut f.app, at(90));
    assert_shows(&shown, &["5 Coordination", "Semaphores 1", "Queues 1", "Path reservations 1", "Tab next table"]);
    assert_snapshot("coordination", &shown);
    assert_eq!(row_with(&shown, "build-slots"), ["build-slots", "1/4", "agent-7", "(8m", "30s)"]);
    assert_eq!(row_with(&shown, "inbox/reviewer"), ["inbox/reviewer", "1", "0", "1"], "visible, in flight, delayed");
    assert_eq!(
        row_with(&shown, "src/parser/**"),
        ["/src/app", "agent-7", "src/parser/**", "exclusive", "28m", "30s", "new", "grammar"]
    );

    // A receive moves the visible message in flight; the periodic refresh shows it.
    let receive = json!({"queue": "inbox/reviewer", "consumer_id": "reviewer"});
    f.api.call(Operation::QueueReceive, receive).await.body.unwrap();
    let refresh = f.app.refresh().unwrap();
    let loaded = perform(&f.api, "", refresh).await;
    f.app.loaded(loaded);
    assert_eq!(row_with(&screen(&mut f.app, at(90)), "inbox/reviewer"), ["inbox/reviewer", "0", "1", "1"]);

    // Past the first page, the title says the list is not all there is.
    f.app.coordination.truncated[super::app::Section::Queues as usize] = true;
    assert_shows(&screen(&mut f.app, at(90)), &["Queues 1+ (the first; narrow with a prefix)", "Semaphores 1 "]);

    // Tab hands the arrows to the next table.
    assert_eq!(f.app.section, super::app::Section::Semaphores);
    press(&mut f, KeyCode::Tab).await;
    press(&mut f, KeyCode::Tab).await;
    assert_eq!(f.app.section, super::app::Section::Reservations);
}

#[tokio::test]
async fn changes_from_watch_appear_and_refresh_the_open_entry() {
    let mut f = fixture().await;
    let row = super::keys::KeyRow { key: "jobs/3".into(), version: 1, mod_revision: 99, expires_at: None };
    f.app.loaded(Loaded::Changed(vec![Change { key: "jobs/3".into(), row: Some(row), revision: 99 }]));
    let shown = screen(&mut f.app, at(0));
    assert_shows(&shown, &["Keys 5 ", "jobs/3", "live changes: 1"]);
    f.app.loaded(Loaded::Changed(vec![Change { key: "readme".into(), row: None, revision: 100 }]));
    let shown = screen(&mut f.app, at(0));
    assert!(!shown.contains("readme"), "{shown}");
    // A page read before the delete does not bring the key back.
    let stale = super::keys::KeyRow { key: "readme".into(), version: 1, mod_revision: 5, expires_at: None };
    f.app.loaded(Loaded::KeysPage { rows: vec![stale], done: true });
    assert!(!screen(&mut f.app, at(0)).contains("readme"));

    press(&mut f, KeyCode::Down).await;
    press(&mut f, KeyCode::Enter).await;
    let loads = f.app.loaded(Loaded::Changed(vec![Change { key: "jobs/1".into(), row: None, revision: 101 }]));
    assert_eq!(loads, vec![Load::Entry("jobs/1".into())], "the open entry reloads");
}

fn put_row(key: &str, revision: u64) -> Change {
    let row = super::keys::KeyRow { key: key.into(), version: 1, mod_revision: revision, expires_at: None };
    Change { key: key.into(), row: Some(row), revision }
}

/// Answers a load the way the driver does, following any load the answer asks for.
async fn answer(f: &mut Fixture, load: Load) {
    let mut loads = vec![load];
    while let Some(load) = loads.pop() {
        let loaded = perform(&f.api, "", load).await;
        loads.extend(f.app.loaded(loaded));
    }
}

#[tokio::test]
async fn the_selection_stays_on_its_key_and_group_while_others_come_and_go() {
    let mut f = fixture().await;
    press(&mut f, KeyCode::Down).await;
    press(&mut f, KeyCode::Down).await;
    assert_eq!(f.app.selected_key().unwrap().key, "jobs/2");
    f.app.loaded(Loaded::Changed(vec![put_row("a/1", 99), put_row("jobs/10", 99)]));
    assert_eq!(f.app.selected_key().unwrap().key, "jobs/2", "keys added above the cursor");
    f.app.loaded(Loaded::Changed(vec![Change { key: "jobs/2".into(), row: None, revision: 100 }]));
    assert_eq!(f.app.selected_key().unwrap().key, "readme", "a deleted key hands the cursor to the next");

    press(&mut f, KeyCode::Tab).await;
    press(&mut f, KeyCode::Down).await;
    press(&mut f, KeyCode::Down).await;
    assert_eq!(f.app.keys.group(), Some("cache:"));
    f.app.loaded(Loaded::Changed(vec![put_row("0/first", 101)]));
    let highlighted = f.app.keys.groups().get(f.app.group_cursor - 1).map(|(g, _)| g.as_str());
    assert_eq!(highlighted, Some("cache:"), "a group added above keeps the highlight on the one shown");
}

#[tokio::test]
async fn late_answers_never_replace_what_is_on_screen() {
    let mut f = fixture().await;
    // Open jobs/1, go back and open jobs/2; jobs/1's answer arrives last.
    press(&mut f, KeyCode::Down).await;
    let first = f.app.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(first, vec![Load::Entry("jobs/1".into())]);
    press(&mut f, KeyCode::Esc).await;
    press(&mut f, KeyCode::Down).await;
    press(&mut f, KeyCode::Enter).await;
    let late = perform(&f.api, "", first[0].clone()).await;
    f.app.loaded(late);
    assert_shows(&screen(&mut f.app, at(0)), &["key       jobs/2", "\"queued\""]);

    // The same for histories, and for an older read of the entry shown.
    let stale_history = perform(&f.api, "", Load::History("jobs/1".into())).await;
    let stale_entry = perform(&f.api, "", Load::Entry("jobs/2".into())).await;
    f.api.call(Operation::StateSet, json!({"key": "jobs/2", "value": "running"})).await;
    press(&mut f, KeyCode::Enter).await;
    press(&mut f, KeyCode::Esc).await;
    press(&mut f, KeyCode::Enter).await;
    f.app.loaded(stale_entry);
    assert_shows(&screen(&mut f.app, at(0)), &["version   2", "\"running\""]);
    press(&mut f, KeyCode::Char('h')).await;
    f.app.loaded(stale_history);
    assert_shows(&screen(&mut f.app, at(0)), &["History of jobs/2", " v1 → v2 ", "+ \"running\""]);
}

#[tokio::test]
async fn the_steps_shown_follow_the_run_as_it_moves_on() {
    let mut f = fixture().await;
    press(&mut f, KeyCode::Char('2')).await;
    let run_id = f.app.runs[0].run_id.clone();
    let claim = json!({"run_id": run_id, "agent_id": "w1", "lease_ttl_seconds": 300});
    // The fixture's claim is w1's; claiming again as w1 answers with its token.
    let claimed = f.api.call(Operation::WorkflowClaim, claim).await.body.unwrap();
    let step = json!({"run_id": run_id, "agent_id": "w1", "token": claimed["token"], "step": 2, "output": "two"});
    let reply = f.api.call(Operation::WorkflowCheckpoint, step).await;
    assert!(reply.body.is_ok(), "{:?}", reply.body);
    // The periodic refresh rereads the runs; the selected one changed, so its steps are read too.
    let refresh = f.app.refresh().unwrap();
    answer(&mut f, refresh).await;
    assert_shows(&screen(&mut f.app, at(0)), &["step 1", "step 2", "\"two\""]);
    // A refresh with nothing new asks for nothing more.
    let unchanged = perform(&f.api, "", Load::Workflows).await;
    assert_eq!(f.app.loaded(unchanged), Vec::new());
}
