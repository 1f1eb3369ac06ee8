//! The inspector's state and what a key press does to it. No IO here: a key press returns
//! the loads it needs (`Load`), the driver performs them through the seam and hands the
//! answers back (`Loaded`), so every screen can be tested without a terminal or a store.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;
use state_core::UnixMillis;
use state_core::ops::history::HistoryEvent;
use state_core::ops::kv::GetResult;
use state_core::ops::lease::LeaseInfo;
use state_core::ops::queue::QueueSummary;
use state_core::ops::reservation::ScopeReservations;
use state_core::ops::semaphore::SemaphoreSummary;
use state_core::ops::workflow::{ResumeResult, RunSummary};
use state_core::time::parse_rfc3339;

use super::keys::{Change, KeyRow, Keys};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    Keys,
    Entry,
    History,
    Workflows,
    Leases,
    Checkpoints,
    Coordination,
}

/// The tables of the coordination view, in the order Tab visits them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Section {
    #[default]
    Semaphores,
    Queues,
    Reservations,
}

impl Section {
    fn next(self) -> Section {
        match self {
            Section::Semaphores => Section::Queues,
            Section::Queues => Section::Reservations,
            Section::Reservations => Section::Semaphores,
        }
    }
}

/// What agents coordinate through, as one read found it.
#[derive(Debug, Default)]
pub(crate) struct Coordination {
    pub(crate) semaphores: Vec<SemaphoreSummary>,
    pub(crate) queues: Vec<QueueSummary>,
    pub(crate) scopes: Vec<ScopeReservations>,
    /// Per section, in `Section` order: more exist than were read (the title says so).
    pub(crate) truncated: [bool; 3],
}

impl Coordination {
    /// Rows of a section: reservations are listed one per row under their scope.
    pub(crate) fn rows(&self, section: Section) -> usize {
        match section {
            Section::Semaphores => self.semaphores.len(),
            Section::Queues => self.queues.len(),
            Section::Reservations => self.scopes.iter().map(|s| s.reservations.len()).sum(),
        }
    }
}

/// Something the app needs read from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Load {
    Entry(String),
    History(String),
    Workflows,
    Run(String),
    Leases,
    Checkpoints,
    Coordination,
}

/// An answer to a `Load`, or a change the watch delivered.
#[derive(Debug)]
pub(crate) enum Loaded {
    KeysPage {
        rows: Vec<KeyRow>,
        done: bool,
    },
    Entry(Box<GetResult>),
    History {
        key: String,
        events: Vec<HistoryEvent>,
        /// The store revision the read reflects.
        revision: u64,
    },
    Workflows(Vec<RunSummary>),
    Run(Box<ResumeResult>),
    Leases(Vec<LeaseInfo>),
    Checkpoints(String),
    Coordination(Box<Coordination>),
    /// Changes to keys, one watch batch.
    Changed(Vec<Change>),
    Failed(String),
}

/// Which pane of the key browser moves with the arrows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Focus {
    Groups,
    Keys,
}

pub(crate) struct App {
    pub(crate) view: View,
    pub(crate) help: bool,
    pub(crate) target: String,
    pub(crate) keys: Keys,
    pub(crate) loading: bool,
    pub(crate) focus: Focus,
    /// Typing a filter after `/`.
    pub(crate) typing: bool,
    pub(crate) cursor: usize,
    pub(crate) group_cursor: usize,
    /// The key the entry view is for: an answer about any other came too late.
    pub(crate) entry_key: String,
    pub(crate) entry: Option<GetResult>,
    pub(crate) entry_scroll: u16,
    pub(crate) history_key: String,
    pub(crate) history: Vec<HistoryEvent>,
    pub(crate) history_revision: u64,
    pub(crate) history_cursor: usize,
    /// The version the selected one is compared with (`m`); the one before it when unset.
    pub(crate) history_base: Option<usize>,
    pub(crate) runs: Vec<RunSummary>,
    pub(crate) run_cursor: usize,
    pub(crate) run: Option<ResumeResult>,
    pub(crate) leases: Vec<LeaseInfo>,
    pub(crate) lease_cursor: usize,
    pub(crate) timeline: String,
    pub(crate) timeline_scroll: u16,
    pub(crate) coordination: Coordination,
    pub(crate) section: Section,
    /// The cursor of each section, in `Section` order.
    pub(crate) section_cursors: [usize; 3],
    pub(crate) status: String,
    /// Changes the watch has delivered since the inspector opened.
    pub(crate) live_changes: u64,
    pub(crate) quit: bool,
    /// Rows of the list area at the last draw, for paging.
    pub(crate) page: usize,
}

impl App {
    pub(crate) fn new(target: String) -> App {
        App {
            view: View::Keys,
            help: false,
            target,
            keys: Keys::default(),
            loading: true,
            focus: Focus::Keys,
            typing: false,
            cursor: 0,
            group_cursor: 0,
            entry_key: String::new(),
            entry: None,
            entry_scroll: 0,
            history_key: String::new(),
            history: Vec::new(),
            history_revision: 0,
            history_cursor: 0,
            history_base: None,
            runs: Vec::new(),
            run_cursor: 0,
            run: None,
            leases: Vec::new(),
            lease_cursor: 0,
            timeline: String::new(),
            timeline_scroll: 0,
            coordination: Coordination::default(),
            section: Section::default(),
            section_cursors: [0; 3],
            status: String::new(),
            live_changes: 0,
            quit: false,
            page: 20,
        }
    }

    /// The key under the cursor in the browser.
    pub(crate) fn selected_key(&self) -> Option<&KeyRow> {
        self.keys.matched(self.cursor)
    }

    /// What the current view shows that a periodic refresh should reload (lease time left,
    /// run status); the key browser is kept current by watch instead.
    pub(crate) fn refresh(&self) -> Option<Load> {
        match self.view {
            View::Workflows => Some(Load::Workflows),
            View::Leases => Some(Load::Leases),
            View::Coordination => Some(Load::Coordination),
            _ => None,
        }
    }

    /// Takes an answer. Loads run concurrently and finish in any order, so an answer for
    /// something no longer on screen, or older than what is shown, is dropped.
    pub(crate) fn loaded(&mut self, loaded: Loaded) -> Vec<Load> {
        match loaded {
            Loaded::KeysPage { rows, done } => {
                let selected = self.selected_key().map(|row| row.key.clone());
                self.keys.merge_page(rows);
                self.loading = !done;
                self.reselect(selected);
            }
            Loaded::Changed(changes) => {
                self.live_changes += changes.len() as u64;
                let touched = |key: &str| changes.iter().any(|c| c.key == key);
                let reload = match (self.view, &self.entry) {
                    (View::Entry, Some(entry)) if touched(&entry.key) => Some(Load::Entry(entry.key.clone())),
                    (View::History, _) if touched(&self.history_key) => Some(Load::History(self.history_key.clone())),
                    _ => None,
                };
                let selected = self.selected_key().map(|row| row.key.clone());
                self.keys.apply(changes);
                self.reselect(selected);
                return reload.into_iter().collect();
            }
            Loaded::Entry(entry) => {
                let older = self.entry.as_ref().is_some_and(|e| e.key == entry.key && e.revision > entry.revision);
                if entry.key == self.entry_key && !older {
                    self.entry = Some(*entry);
                }
            }
            Loaded::History { key, events, revision } => {
                if key != self.history_key || revision < self.history_revision {
                    return Vec::new();
                }
                let was_latest = self.history_cursor + 1 >= self.history.len();
                self.history_revision = revision;
                self.history = events;
                if was_latest || self.history_cursor >= self.history.len() {
                    self.history_cursor = self.history.len().saturating_sub(1);
                }
                self.history_base = self.history_base.filter(|&b| b < self.history.len());
            }
            Loaded::Workflows(runs) => {
                self.runs = runs;
                self.run_cursor = self.run_cursor.min(self.runs.len().saturating_sub(1));
                // The steps shown are read again when the selected run has moved on since.
                if let Some(selected) = self.runs.get(self.run_cursor) {
                    let progress =
                        |r: &RunSummary| (r.run_id.clone(), r.last_step, r.run_status, r.attempt, r.updated_at.clone());
                    let shown = self.run.as_ref().and_then(|r| r.run.as_ref()).map(progress);
                    if shown != Some(progress(selected)) {
                        return vec![Load::Run(selected.run_id.clone())];
                    }
                }
            }
            Loaded::Run(run) => {
                let selected = self.runs.get(self.run_cursor).is_none_or(|r| r.run_id == run.run_id);
                let older = self.run.as_ref().is_some_and(|r| r.run_id == run.run_id && r.revision > run.revision);
                if selected && !older {
                    self.run = Some(*run);
                }
            }
            Loaded::Leases(leases) => {
                self.leases = leases;
                self.lease_cursor = self.lease_cursor.min(self.leases.len().saturating_sub(1));
            }
            Loaded::Checkpoints(text) => self.timeline = text,
            Loaded::Coordination(found) => {
                self.coordination = *found;
                for section in [Section::Semaphores, Section::Queues, Section::Reservations] {
                    let rows = self.coordination.rows(section);
                    let cursor = &mut self.section_cursors[section as usize];
                    *cursor = (*cursor).min(rows.saturating_sub(1));
                }
            }
            Loaded::Failed(message) => self.status = message,
        }
        Vec::new()
    }

    /// Puts the cursors back on the key and the group they were on: a key another agent adds
    /// above the cursor must not move the selection onto a different key.
    fn reselect(&mut self, selected: Option<String>) {
        if let Some(key) = selected {
            self.cursor = self.keys.position(&key);
        }
        // Row 0 is "all keys"; row n is group n - 1.
        let group = self.keys.group().and_then(|g| self.keys.groups().iter().position(|(name, _)| name == g));
        if let Some(i) = group {
            self.group_cursor = i + 1;
        }
        self.clamp();
    }

    fn clamp(&mut self) {
        self.cursor = self.cursor.min(self.keys.matches().len().saturating_sub(1));
        self.group_cursor = self.group_cursor.min(self.keys.groups().len());
    }

    pub(crate) fn key(&mut self, key: KeyEvent) -> Vec<Load> {
        if key.modifiers.contains(KeyModifiers::CONTROL) && matches!(key.code, KeyCode::Char('c')) {
            self.quit = true;
            return Vec::new();
        }
        if self.typing {
            self.type_filter(key.code);
            return Vec::new();
        }
        if self.help {
            self.help = false;
            return Vec::new();
        }
        match key.code {
            KeyCode::Char('q') => {
                self.quit = true;
                return Vec::new();
            }
            KeyCode::Char('?') => {
                self.help = true;
                return Vec::new();
            }
            KeyCode::Char('1') => return self.show(View::Keys),
            KeyCode::Char('2') => return self.show(View::Workflows),
            KeyCode::Char('3') => return self.show(View::Leases),
            KeyCode::Char('4') => return self.show(View::Checkpoints),
            KeyCode::Char('5') => return self.show(View::Coordination),
            _ => {}
        }
        match self.view {
            View::Keys => self.browse(key.code),
            View::Entry => self.in_entry(key.code),
            View::History => self.in_history(key.code),
            View::Workflows => self.in_workflows(key.code),
            View::Leases => {
                self.lease_cursor = step(self.lease_cursor, self.leases.len(), key.code, self.page);
                Vec::new()
            }
            View::Checkpoints => {
                self.timeline_scroll = scroll(self.timeline_scroll, key.code, self.page);
                Vec::new()
            }
            View::Coordination => {
                if matches!(key.code, KeyCode::Tab | KeyCode::BackTab) {
                    self.section = self.section.next();
                } else {
                    let rows = self.coordination.rows(self.section);
                    let cursor = &mut self.section_cursors[self.section as usize];
                    *cursor = step(*cursor, rows, key.code, self.page);
                }
                Vec::new()
            }
        }
    }

    fn show(&mut self, view: View) -> Vec<Load> {
        self.view = view;
        self.status.clear();
        match view {
            View::Workflows => vec![Load::Workflows],
            View::Leases => vec![Load::Leases],
            View::Checkpoints => vec![Load::Checkpoints],
            View::Coordination => vec![Load::Coordination],
            _ => Vec::new(),
        }
    }

    fn type_filter(&mut self, code: KeyCode) {
        let mut filter = self.keys.filter().to_owned();
        match code {
            KeyCode::Enter => self.typing = false,
            KeyCode::Esc => {
                self.typing = false;
                filter.clear();
            }
            KeyCode::Backspace => {
                filter.pop();
            }
            KeyCode::Char(c) => filter.push(c),
            _ => return,
        }
        if filter != self.keys.filter() {
            self.keys.set_filter(filter);
            self.cursor = 0;
        }
    }

    fn browse(&mut self, code: KeyCode) -> Vec<Load> {
        match code {
            KeyCode::Char('/') => {
                self.typing = true;
                self.focus = Focus::Keys;
            }
            KeyCode::Esc if !self.keys.filter().is_empty() => {
                self.keys.set_filter(String::new());
                self.cursor = 0;
            }
            KeyCode::Tab | KeyCode::BackTab => {
                self.focus = if self.focus == Focus::Keys { Focus::Groups } else { Focus::Keys };
            }
            KeyCode::Enter | KeyCode::Right | KeyCode::Char('l') if self.focus == Focus::Groups => {
                self.focus = Focus::Keys;
            }
            KeyCode::Enter | KeyCode::Right | KeyCode::Char('l') => {
                if let Some(row) = self.selected_key() {
                    let key = row.key.clone();
                    self.view = View::Entry;
                    self.entry_scroll = 0;
                    if self.entry.as_ref().is_none_or(|e| e.key != key) {
                        self.entry = None;
                    }
                    self.entry_key.clone_from(&key);
                    return vec![Load::Entry(key)];
                }
            }
            KeyCode::Char('h') => {
                if let Some(row) = self.selected_key() {
                    return self.open_history(row.key.clone());
                }
            }
            other if self.focus == Focus::Groups => {
                // Row 0 is "all keys"; row n is group n - 1.
                let rows = self.keys.groups().len() + 1;
                let moved = step(self.group_cursor, rows, other, self.page);
                if moved != self.group_cursor {
                    self.group_cursor = moved;
                    let group = moved.checked_sub(1).and_then(|i| self.keys.groups().get(i)).map(|(g, _)| g.clone());
                    self.keys.set_group(group);
                    self.cursor = 0;
                }
            }
            other => self.cursor = step(self.cursor, self.keys.matches().len(), other, self.page),
        }
        Vec::new()
    }

    fn open_history(&mut self, key: String) -> Vec<Load> {
        self.view = View::History;
        if self.history_key != key {
            self.history_key = key.clone();
            self.history.clear();
            self.history_revision = 0;
            self.history_cursor = 0;
            self.history_base = None;
        }
        vec![Load::History(key)]
    }

    fn in_entry(&mut self, code: KeyCode) -> Vec<Load> {
        match code {
            KeyCode::Esc | KeyCode::Left | KeyCode::Backspace => self.view = View::Keys,
            KeyCode::Char('h') => {
                if let Some(entry) = &self.entry {
                    return self.open_history(entry.key.clone());
                }
            }
            other => self.entry_scroll = scroll(self.entry_scroll, other, self.page),
        }
        Vec::new()
    }

    fn in_history(&mut self, code: KeyCode) -> Vec<Load> {
        match code {
            KeyCode::Esc | KeyCode::Left | KeyCode::Backspace => self.view = View::Keys,
            KeyCode::Char('m') => {
                self.history_base = match self.history_base {
                    Some(b) if b == self.history_cursor => None,
                    _ => Some(self.history_cursor),
                };
            }
            other => self.history_cursor = step(self.history_cursor, self.history.len(), other, self.page),
        }
        Vec::new()
    }

    fn in_workflows(&mut self, code: KeyCode) -> Vec<Load> {
        let moved = step(self.run_cursor, self.runs.len(), code, self.page);
        if moved != self.run_cursor || (matches!(code, KeyCode::Enter) && !self.runs.is_empty()) {
            self.run_cursor = moved;
            if let Some(run) = self.runs.get(moved) {
                return vec![Load::Run(run.run_id.clone())];
            }
        }
        Vec::new()
    }

    /// The history events compared in the diff: (base, selected).
    pub(crate) fn compared(&self) -> (Option<&HistoryEvent>, Option<&HistoryEvent>) {
        let selected = self.history.get(self.history_cursor);
        let base = match self.history_base {
            Some(b) => self.history.get(b),
            None => self.history_cursor.checked_sub(1).and_then(|b| self.history.get(b)),
        };
        (base, selected)
    }
}

/// Moves a cursor over `len` rows by a navigation key.
fn step(cursor: usize, len: usize, code: KeyCode, page: usize) -> usize {
    let last = len.saturating_sub(1);
    match code {
        KeyCode::Down | KeyCode::Char('j') => (cursor + 1).min(last),
        KeyCode::Up | KeyCode::Char('k') => cursor.saturating_sub(1),
        KeyCode::PageDown => (cursor + page.max(1)).min(last),
        KeyCode::PageUp => cursor.saturating_sub(page.max(1)),
        KeyCode::Home | KeyCode::Char('g') => 0,
        KeyCode::End | KeyCode::Char('G') => last,
        _ => cursor,
    }
}

fn scroll(offset: u16, code: KeyCode, page: usize) -> u16 {
    let page = u16::try_from(page).unwrap_or(u16::MAX).max(1);
    match code {
        KeyCode::Down | KeyCode::Char('j') => offset.saturating_add(1),
        KeyCode::Up | KeyCode::Char('k') => offset.saturating_sub(1),
        KeyCode::PageDown => offset.saturating_add(page),
        KeyCode::PageUp => offset.saturating_sub(page),
        KeyCode::Home | KeyCode::Char('g') => 0,
        _ => offset,
    }
}

/// "in 4m 05s", "expired", or nothing, for an RFC 3339 expiry.
pub(crate) fn time_left(expires_at: Option<&str>, now: UnixMillis) -> String {
    match expires_at.and_then(parse_rfc3339) {
        Some(at) => countdown(at, now),
        None => String::new(),
    }
}

pub(crate) fn countdown(at: UnixMillis, now: UnixMillis) -> String {
    if at <= now {
        return "expired".to_owned();
    }
    let secs = (at.0 - now.0).div_ceil(1000);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m {:02}s", secs / 60, secs % 60),
        3600..86_400 => format!("{}h {:02}m", secs / 3600, secs / 60 % 60),
        _ => format!("{}d {:02}h", secs / 86_400, secs / 3600 % 24),
    }
}

/// A value as the entry view and the diff show it.
pub(crate) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}
