//! `statectl tui` in a real terminal: tmux runs it, keys are sent as a person would type them,
//! and the screen is read back, including a change another process makes while it runs.

use std::process::Command;
use std::time::Duration;

use super::{Place, statectl};

/// A tmux server of this test alone, killed however the test ends.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(place: &Place, name: &str, command: &str) -> Tmux {
        let socket = format!("statectl-tui-{name}-{}", std::process::id());
        let tmux = Tmux { socket };
        let status = tmux
            .command(&["new-session", "-d", "-x", "110", "-y", "30", command])
            .env("STATE_DB", &place.db)
            .env("STATE_RUNTIME_DIR", &place.runtime)
            .env("STATE_OWNER_IDLE", "2s")
            .env_remove("TMUX")
            .env_remove("STATE_SERVER")
            .current_dir(place.dir.path())
            .status()
            .expect("tmux runs (install it: apt-get install tmux)");
        assert!(status.success(), "tmux new-session failed");
        tmux
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("tmux");
        command.args(["-L", &self.socket]).args(args);
        command
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        assert!(self.command(&args).status().unwrap().success());
    }

    fn screen(&self) -> String {
        let out = self.command(&["capture-pane", "-p", "-t", "0"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits (10 s at most) until the screen shows every part; the screen when it does.
    fn wait_for(&self, parts: &[&str]) -> String {
        let mut last = String::new();
        state_e2e::wait::within(Duration::from_secs(10), || {
            let screen = self.screen();
            if parts.iter().all(|p| screen.contains(p)) {
                return Some(screen);
            }
            last = screen;
            None
        })
        .unwrap_or_else(|| panic!("the screen never showed {parts:?}:\n{last}"))
    }

    fn alternate_screen(&self) -> bool {
        let out = self.command(&["display-message", "-p", "-t", "0", "#{alternate_on}"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command(&["kill-server"]).status();
    }
}

#[test]
fn browse_filter_open_history_switch_views_and_see_a_live_change() {
    let p = Place::new();
    p.json(&["put", "jobs/1", r#"{"step": 1}"#], 0);
    p.json(&["put", "jobs/1", r#"{"step": 2}"#], 0);
    p.json(&["put", "jobs/2", r#""queued""#], 0);
    p.json(&["put", "readme", r#""hello""#], 0);
    p.json(&["lease", "acquire", "printer", "--holder", "agent-7", "--ttl", "10m"], 0);
    p.json(&["workflow", "create", "nightly"], 0);

    let command = format!("{} tui; echo \"tui exited $?\"; sleep 30", statectl().display());
    let tmux = Tmux::start(&p, "local", &command);
    tmux.wait_for(&["1 Keys", "jobs/1", "jobs/2", "readme", "Keys 3 "]);

    tmux.keys(&["/", "jobs", "Enter"]);
    let screen = tmux.wait_for(&["Keys 2 of 3  /jobs"]);
    assert!(!screen.contains("readme"), "{screen}");

    tmux.keys(&["Enter"]);
    tmux.wait_for(&["key       jobs/1", "version   2", "\"step\": 2"]);
    tmux.keys(&["h"]);
    tmux.wait_for(&["History of jobs/1", " v1 → v2 ", "-   \"step\": 1", "+   \"step\": 2"]);

    tmux.keys(&["2"]);
    tmux.wait_for(&["Workflows 1", "nightly", "pending"]);
    tmux.keys(&["3"]);
    tmux.wait_for(&["Leases 1", "printer", "agent-7"]);

    // Another process writes while the inspector runs: the browser shows it without a key press.
    tmux.keys(&["1"]);
    tmux.wait_for(&["Keys 2 of 3  /jobs"]);
    p.json(&["put", "jobs/3", "1", "--ttl", "2h"], 0);
    let screen = tmux.wait_for(&["Keys 3 of 4  /jobs", "jobs/3", "live changes: 1"]);
    // A key written while the inspector runs shows its TTL too, not an empty cell.
    let row = screen.lines().find(|l| l.contains("jobs/3")).unwrap_or_default();
    assert!(row.contains("2h 00m") || row.contains("1h 59m"), "{row}");

    tmux.keys(&["?"]);
    tmux.wait_for(&["Help (any key closes)"]);
    tmux.keys(&["Escape"]);
    assert!(tmux.alternate_screen(), "the inspector draws on the alternate screen");
    tmux.keys(&["C-c"]);
    tmux.wait_for(&["tui exited 0"]);
    assert!(!tmux.alternate_screen(), "Ctrl-C gave the terminal back");
}

#[test]
fn the_inspector_reads_a_state_http_and_follows_its_changes() {
    let p = Place::new();
    let (_server, url) = p.state_http();
    p.json(&["--server", &url, "put", "remote/1", "1"], 0);

    let command = format!("{} --server {url} tui; echo \"tui exited $?\"; sleep 30", statectl().display());
    let tmux = Tmux::start(&p, "server", &command);
    tmux.wait_for(&["remote/1", &url, "Keys 1 "]);
    p.json(&["--server", &url, "put", "remote/2", "2"], 0);
    tmux.wait_for(&["remote/2", "Keys 2 ", "live changes: 1"]);
    tmux.keys(&["q"]);
    tmux.wait_for(&["tui exited 0"]);
}

#[test]
fn a_token_scoped_to_a_prefix_browses_that_prefix() {
    let p = Place::new();
    let tokens = p.dir.path().join("tokens.toml");
    let file = "[[token]]\nname = \"admin\"\nsecret = \"admin-secret-0123456789\"\nprefixes = [\"\"]\nrights = [\"admin\"]\n\n\
                [[token]]\nname = \"team-a\"\nsecret = \"team-a-secret-012345678\"\nprefixes = [\"team-a/\"]\nrights = [\"read\"]\n";
    std::fs::write(&tokens, file).unwrap();
    let (db, runtime) = (p.db.to_string_lossy(), p.runtime.to_string_lossy());
    let server = state_e2e::HttpServer::start(
        &super::sibling("state-http"),
        &["--db", &db, "--owner-idle", "2s", "--auth", &tokens.to_string_lossy()],
        &[("STATE_RUNTIME_DIR", runtime.as_ref())],
    )
    .unwrap();
    let url = format!("http://{}", server.addr);
    for (key, lease) in [("team-a/job", "team-a/gpu"), ("team-b/job", "team-b/gpu")] {
        let mut put = p.command(&["--server", &url, "put", key, "1"]);
        assert!(put.env("STATE_TOKEN", "admin-secret-0123456789").status().unwrap().success());
        let mut take = p.command(&["--server", &url, "lease", "acquire", lease, "--holder", "h", "--ttl", "10m"]);
        assert!(take.env("STATE_TOKEN", "admin-secret-0123456789").status().unwrap().success());
    }

    // Without a prefix the token may not list the store: the browser says so instead of "no keys yet".
    let command = format!("STATE_TOKEN=team-a-secret-012345678 {} --server {url} tui; sleep 30", statectl().display());
    let everything = Tmux::start(&p, "scoped-all", &command);
    let screen = everything.wait_for(&["cannot list keys"]);
    assert!(!screen.contains("no keys yet"), "{screen}");
    everything.keys(&["q"]);

    let command = format!(
        "STATE_TOKEN=team-a-secret-012345678 {} --server {url} tui team-a/; echo \"tui exited $?\"; sleep 30",
        statectl().display()
    );
    let scoped = Tmux::start(&p, "scoped", &command);
    let screen = scoped.wait_for(&["team-a/job", "Keys 1 "]);
    assert!(!screen.contains("team-b/"), "{screen}");
    scoped.keys(&["3"]);
    let leases = scoped.wait_for(&["Leases 1", "team-a/gpu"]);
    assert!(!leases.contains("team-b/gpu"), "{leases}");
    scoped.keys(&["q"]);
    scoped.wait_for(&["tui exited 0"]);
}
