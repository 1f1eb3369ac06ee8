//! The inspector on a large store: `statectl tui` runs in tmux against a database of N keys,
//! and the time until the screen shows what a person waits for is read back by polling the
//! pane (every 5 ms, so figures carry up to ~5 ms of polling granularity).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::{ms, open_engine, tempfile_dir, write_keys};

struct Tmux(String);

impl Tmux {
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("tmux");
        command.args(["-L", &self.0]).args(args);
        command
    }

    fn screen(&self) -> Result<String> {
        let out = self.command(&["capture-pane", "-p", "-t", "0"]).output().context("tmux capture-pane")?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn keys(&self, keys: &[&str]) -> Result<()> {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        anyhow::ensure!(self.command(&args).status()?.success(), "tmux send-keys failed");
        Ok(())
    }

    /// Time from `since` until the screen shows every part (30 s at most).
    fn until(&self, since: Instant, parts: &[&str], absent: &[&str]) -> Result<Duration> {
        loop {
            let screen = self.screen()?;
            if parts.iter().all(|p| screen.contains(p)) && !absent.iter().any(|a| screen.contains(a)) {
                return Ok(since.elapsed());
            }
            if since.elapsed() > Duration::from_secs(30) {
                bail!("the inspector never showed {parts:?}:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command(&["kill-server"]).status();
    }
}

async fn populate(path: &tempfile_dir::Dir, keys: usize) -> Result<()> {
    let engine = open_engine(path)?;
    write_keys(&engine, keys, |i| (format!("key-{i:06}"), json!({"n": i}))).await?;
    engine.close().await;
    Ok(())
}

pub(crate) fn inspector(statectl: &Path, keys: usize, runtime: &tokio::runtime::Runtime) -> Result<()> {
    println!("## statectl tui: the inspector on {keys} keys (tmux, 110x30)\n");
    let dir = tempfile_dir::Dir::new()?;
    let started = Instant::now();
    runtime.block_on(populate(&dir, keys))?;
    println!("(populated in {:.1} s)\n", started.elapsed().as_secs_f64());
    let db = dir.path().join("bench.redb");
    let tmux = Tmux(format!("state-bench-{}", std::process::id()));
    let command = format!("{} tui", statectl.display());
    let last = format!("key-{:06}", keys - 1);
    let total = format!("{keys} keys ");

    let opened = Instant::now();
    let status = tmux
        .command(&["new-session", "-d", "-x", "110", "-y", "30", &command])
        .env("STATE_DB", &db)
        .env("STATE_RUNTIME_DIR", dir.path().join("run"))
        .env_remove("TMUX")
        .status()
        .context("tmux is needed for this section")?;
    anyhow::ensure!(status.success(), "tmux new-session failed");
    let first_screen = tmux.until(opened, &["key-000000"], &[])?;
    let all_loaded = tmux.until(opened, &[&total], &["loading"])?;

    // Typed as a person would, one key at a time: each narrows the 100,000 names again.
    let filter = "key-0999";
    let typed = Instant::now();
    tmux.keys(&["/"])?;
    for c in filter.chars() {
        tmux.keys(&["-l", &c.to_string()])?;
    }
    let filtered = tmux.until(typed, &[&format!("/{filter}")], &[])?;
    let narrowed = tmux.until(typed, &[&format!("Keys 100 of {keys}")], &[])?;

    tmux.keys(&["Escape", "Escape"])?;
    tmux.until(Instant::now(), &[&format!("Keys {keys} ")], &[])?;
    let end = Instant::now();
    tmux.keys(&["G"])?;
    let to_end = tmux.until(end, &[&last], &[])?;
    tmux.keys(&["q"])?;

    println!("| step | time |");
    println!("|---|---:|");
    println!("| start to first screen of keys | {} |", ms(first_screen));
    println!("| start to all {keys} names loaded | {} |", ms(all_loaded));
    println!("| type `/{filter}` (9 keys) to the filter shown | {} |", ms(filtered));
    println!("| type `/{filter}` to the 100 matches listed | {} |", ms(narrowed));
    println!("| `G` to the last key shown | {} |", ms(to_end));
    println!();
    transfer(statectl, &dir, keys)
}

/// `statectl export` of the same store, then `statectl import` of the dump into a fresh
/// database, twice (the second run finds every record already there).
fn transfer(statectl: &Path, dir: &tempfile_dir::Dir, keys: usize) -> Result<()> {
    println!("## statectl export / import of {keys} keys\n");
    let dump = dir.path().join("dump.jsonl");
    let run = |db: &str, args: &[&str]| -> Result<Duration> {
        let started = Instant::now();
        let out = Command::new(statectl)
            .args(args)
            .env("STATE_DB", dir.path().join(db))
            .env("STATE_RUNTIME_DIR", dir.path().join("run"))
            .output()
            .context("running statectl")?;
        anyhow::ensure!(out.status.success(), "statectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(started.elapsed())
    };
    let exported = run("bench.redb", &["export", "-o", &dump.display().to_string()])?;
    let bytes = std::fs::metadata(&dump)?.len();
    let imported = run("copy.redb", &["import", &dump.display().to_string()])?;
    let again = run("copy.redb", &["import", &dump.display().to_string()])?;
    let rate = |d: Duration| keys as f64 / d.as_secs_f64();
    println!("| step | time | records/s |");
    println!("|---|---:|---:|");
    println!("| export ({:.1} MB dump) | {} | {:.0} |", bytes as f64 / 1e6, ms(exported), rate(exported));
    println!("| import into a fresh database | {} | {:.0} |", ms(imported), rate(imported));
    println!("| the same import again (all unchanged) | {} | {:.0} |", ms(again), rate(again));
    println!();
    Ok(())
}
