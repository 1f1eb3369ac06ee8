//! Drawing: one function per screen, all from `App` and the instant `now` (so countdowns
//! are testable). Lists draw only the rows that fit: the browser costs the same with
//! 100,000 keys as with 10.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Table, TableState, Wrap};
use state_core::UnixMillis;

use super::app::{App, Focus, Section, View, countdown, pretty, time_left};
use super::diff;

const SELECTED: Style = Style::new().add_modifier(Modifier::REVERSED);
const DIM: Style = Style::new().fg(Color::DarkGray);

pub(crate) fn draw(frame: &mut Frame<'_>, app: &mut App, now: UnixMillis) {
    let [header, body, footer] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(3), Constraint::Length(1)]).areas(frame.area());
    draw_header(frame, app, header);
    // Rows a page holds: the body less borders and a header row.
    app.page = usize::from(body.height.saturating_sub(3)).max(1);
    match app.view {
        View::Keys => draw_keys(frame, app, body, now),
        View::Entry => draw_entry(frame, app, body, now),
        View::History => draw_history(frame, app, body),
        View::Workflows => draw_workflows(frame, app, body, now),
        View::Leases => draw_leases(frame, app, body, now),
        View::Checkpoints => draw_checkpoints(frame, app, body),
        View::Coordination => draw_coordination(frame, app, body, now),
    }
    draw_footer(frame, app, footer);
    if app.help {
        draw_help(frame, frame.area());
    }
}

fn draw_header(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let tabs = [
        (View::Keys, "1 Keys"),
        (View::Workflows, "2 Runs"),
        (View::Leases, "3 Leases"),
        (View::Checkpoints, "4 Checkpoints"),
        (View::Coordination, "5 Coordination"),
    ];
    // Five tabs, the counts and the target fit 110 columns; narrower, the target is cut.
    let mut spans = Vec::new();
    for (view, label) in tabs {
        let current = app.view == view || (view == View::Keys && matches!(app.view, View::Entry | View::History));
        spans.push(Span::styled(format!(" {label} "), if current { SELECTED } else { Style::new() }));
    }
    let loading =
        if app.loading { format!("loading… {} keys", app.keys.len()) } else { format!("{} keys", app.keys.len()) };
    // The target goes last: on a narrow terminal the path is what gets cut, not the counts.
    spans.push(Span::styled(format!("  {loading}  live changes: {}  {}", app.live_changes, app.target), DIM));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn footer_hints(app: &App) -> &'static str {
    if app.typing {
        return "type to filter  Enter keep  Esc clear";
    }
    match app.view {
        View::Keys => "↑↓ move  Enter open  h history  / filter  Tab groups  1-5 views  ? help  q quit",
        View::Entry => "↑↓ scroll  h history  Esc back  ? help  q quit",
        View::History => "↑↓ version  m mark as base  Esc back  ? help  q quit",
        View::Workflows => "↑↓ run (steps below)  1-5 views  ? help  q quit",
        View::Leases | View::Checkpoints => "↑↓ move  1-5 views  ? help  q quit",
        View::Coordination => "↑↓ move  Tab next table  1-5 views  ? help  q quit",
    }
}

fn draw_footer(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let text = if app.status.is_empty() {
        footer_hints(app).to_owned()
    } else {
        format!("{}  │  {}", app.status, footer_hints(app))
    };
    frame.render_widget(Paragraph::new(text).style(DIM), area);
}

/// The first row to draw so the cursor stays visible (centred when it moves far).
fn window(cursor: usize, len: usize, rows: usize) -> usize {
    if len <= rows { 0 } else { cursor.saturating_sub(rows / 2).min(len - rows) }
}

fn draw_keys(frame: &mut Frame<'_>, app: &App, area: Rect, now: UnixMillis) {
    let [groups_area, keys_area] = Layout::horizontal([Constraint::Length(28), Constraint::Min(20)]).areas(area);
    let groups = app.keys.groups();
    let rows = usize::from(groups_area.height.saturating_sub(2));
    let all = (String::from("(all keys)"), app.keys.len());
    let entries: Vec<(String, usize)> = std::iter::once(all)
        .chain(groups.iter().map(|(g, n)| (if g.is_empty() { "(no prefix)".to_owned() } else { g.clone() }, *n)))
        .collect();
    let first = window(app.group_cursor, entries.len(), rows);
    let lines: Vec<Line> = entries
        .iter()
        .enumerate()
        .skip(first)
        .take(rows)
        .map(|(i, (name, n))| {
            let text = format!("{:<18} {:>7}", truncate(name, 18), n);
            let style = if i == app.group_cursor && app.focus == Focus::Groups { SELECTED } else { Style::new() };
            Line::styled(text, if i == app.group_cursor { style.add_modifier(Modifier::BOLD) } else { style })
        })
        .collect();
    let title = if app.focus == Focus::Groups { " Prefixes (Tab) " } else { " Prefixes " };
    frame.render_widget(Paragraph::new(lines).block(Block::bordered().title(title)), groups_area);

    let matches = app.keys.matches().len();
    let mut title = format!(" Keys {matches}");
    if matches != app.keys.len() {
        title.push_str(&format!(" of {}", app.keys.len()));
    }
    if app.typing || !app.keys.filter().is_empty() {
        title.push_str(&format!("  /{}{} ", app.keys.filter(), if app.typing { "▏" } else { "" }));
    } else {
        title.push(' ');
    }
    let visible = usize::from(keys_area.height.saturating_sub(3));
    let first = window(app.cursor, matches, visible);
    let rows: Vec<Row> = (first..(first + visible).min(matches))
        .filter_map(|n| app.keys.matched(n).map(|row| (n, row)))
        .map(|(n, row)| {
            let ttl = row.expires_at.map(|at| countdown(at, now)).unwrap_or_default();
            let style = if n == app.cursor && app.focus == Focus::Keys { SELECTED } else { Style::new() };
            Row::new([row.key.clone(), row.version.to_string(), ttl]).style(style)
        })
        .collect();
    let empty = rows.is_empty();
    let table = Table::new(rows, [Constraint::Min(20), Constraint::Length(8), Constraint::Length(10)])
        .header(Row::new(["KEY", "VERSION", "TTL"]).style(DIM))
        .block(Block::bordered().title(title));
    frame.render_widget(table, keys_area);
    if empty {
        let message = if app.loading {
            "loading…"
        } else if app.keys.len() == 0 && app.status.starts_with("cannot list keys") {
            // A token scoped to a prefix may not list everything: say so where the keys would be.
            app.status.as_str()
        } else if app.keys.len() == 0 {
            "no keys yet"
        } else {
            "no key matches"
        };
        let inner =
            Rect { x: keys_area.x + 2, y: keys_area.y + 2, width: keys_area.width.saturating_sub(4), height: 1 };
        frame.render_widget(Paragraph::new(message).style(DIM), inner);
    }
}

fn draw_entry(frame: &mut Frame<'_>, app: &App, area: Rect, now: UnixMillis) {
    let Some(entry) = &app.entry else {
        frame.render_widget(Paragraph::new("loading…").block(Block::bordered().title(" Entry ")), area);
        return;
    };
    let [fields_area, value_area] = Layout::vertical([Constraint::Length(8), Constraint::Min(3)]).areas(area);
    let field =
        |name: &str, value: String| Line::from(vec![Span::styled(format!("{name:<10}"), DIM), Span::raw(value)]);
    let ttl = match entry.expires_at.as_deref() {
        Some(at) => format!("{} (until {at})", time_left(Some(at), now)),
        None => "none".to_owned(),
    };
    let status = if entry.value.is_none() { " (not found)" } else { "" };
    let lines = vec![
        field("key", format!("{}{status}", entry.key)),
        field("version", entry.version.to_string()),
        field(
            "revision",
            format!("{} (created at {})", entry.mod_revision.unwrap_or(0), entry.create_revision.unwrap_or(0)),
        ),
        field("writer", entry.agent_id.clone().unwrap_or_else(|| "-".to_owned())),
        field("updated", entry.updated_at.clone().unwrap_or_default()),
        field("ttl", ttl),
    ];
    frame.render_widget(Paragraph::new(lines).block(Block::bordered().title(" Entry ")), fields_area);
    let value = entry.value.as_ref().map(pretty).unwrap_or_default();
    let paragraph = Paragraph::new(value).scroll((app.entry_scroll, 0)).block(Block::bordered().title(" Value "));
    frame.render_widget(paragraph, value_area);
}

fn draw_history(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let [list_area, diff_area] = Layout::horizontal([Constraint::Length(46), Constraint::Min(20)]).areas(area);
    let visible = usize::from(list_area.height.saturating_sub(3));
    let first = window(app.history_cursor, app.history.len(), visible);
    let rows: Vec<Row> = app
        .history
        .iter()
        .enumerate()
        .skip(first)
        .take(visible)
        .map(|(i, event)| {
            let mark = if app.history_base == Some(i) { "◆" } else { " " };
            let op =
                serde_json::to_value(event.op).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
            let cells =
                [format!("{mark}{}", event.revision), op, format!("v{}", event.version), short_time(&event.time)];
            Row::new(cells).style(if i == app.history_cursor { SELECTED } else { Style::new() })
        })
        .collect();
    let table =
        Table::new(rows, [Constraint::Length(8), Constraint::Length(8), Constraint::Length(6), Constraint::Min(10)])
            .header(Row::new(["REV", "OP", "VER", "TIME"]).style(DIM))
            .block(Block::bordered().title(format!(" History of {} ", app.history_key)));
    frame.render_widget(table, list_area);

    let (base, selected) = app.compared();
    let text = |e: Option<&state_core::ops::history::HistoryEvent>| {
        e.and_then(|e| e.value.as_ref()).map(pretty).unwrap_or_default()
    };
    let title = match (base, selected) {
        (Some(b), Some(s)) => format!(" v{} → v{} ", b.version, s.version),
        (None, Some(s)) => format!(" v{} ", s.version),
        _ => " Diff ".to_owned(),
    };
    let lines: Vec<Line> = diff::lines(&text(base), &text(selected))
        .into_iter()
        .map(|line| match line {
            diff::Line::Same(l) => Line::raw(format!("  {l}")),
            diff::Line::Removed(l) => Line::styled(format!("- {l}"), Style::new().fg(Color::Red)),
            diff::Line::Added(l) => Line::styled(format!("+ {l}"), Style::new().fg(Color::Green)),
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(Block::bordered().title(title)), diff_area);
}

fn draw_workflows(frame: &mut Frame<'_>, app: &App, area: Rect, now: UnixMillis) {
    let [runs_area, steps_area] = Layout::vertical([Constraint::Percentage(55), Constraint::Min(4)]).areas(area);
    let rows: Vec<Row> = app
        .runs
        .iter()
        .enumerate()
        .map(|(i, run)| {
            let status = serde_json::to_value(run.run_status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let cells = [
                run.run_id.clone(),
                run.name.clone(),
                status,
                run.holder.clone().unwrap_or_default(),
                format!("{}/{}", run.attempt, run.max_attempts),
                time_left(run.lease_expires_at.as_deref(), now),
                run.last_step.to_string(),
            ];
            Row::new(cells).style(if i == app.run_cursor { SELECTED } else { Style::new() })
        })
        .collect();
    let widths = [
        Constraint::Length(28),
        Constraint::Min(10),
        Constraint::Length(10),
        Constraint::Length(12),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(5),
    ];
    let table = Table::new(rows, widths)
        .header(Row::new(["RUN", "NAME", "STATUS", "HOLDER", "ATTEMPT", "LEASE", "STEP"]).style(DIM))
        .block(Block::bordered().title(format!(" Workflows {} ", app.runs.len())));
    let mut state = TableState::default().with_selected(Some(app.run_cursor));
    frame.render_stateful_widget(table, runs_area, &mut state);
    let lines: Vec<Line> = match &app.run {
        Some(run) if run.steps.is_empty() => vec![Line::styled("no steps yet", DIM)],
        Some(run) => run
            .steps
            .iter()
            .map(|s| Line::raw(format!("step {:<4} {}", s.step, serde_json::to_string(&s.output).unwrap_or_default())))
            .collect(),
        None => Vec::new(),
    };
    let title = app.run.as_ref().map_or(" Steps ".to_owned(), |r| format!(" Steps of {} ", r.run_id));
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(Block::bordered().title(title)),
        steps_area,
    );
}

fn draw_leases(frame: &mut Frame<'_>, app: &App, area: Rect, now: UnixMillis) {
    let rows: Vec<Row> = app
        .leases
        .iter()
        .enumerate()
        .map(|(i, lease)| {
            let cells = [
                lease.resource_id.clone(),
                lease.holder.clone(),
                short_time(&lease.acquired_at),
                time_left(Some(&lease.expires_at), now),
            ];
            Row::new(cells).style(if i == app.lease_cursor { SELECTED } else { Style::new() })
        })
        .collect();
    let widths = [Constraint::Min(16), Constraint::Length(16), Constraint::Length(20), Constraint::Length(12)];
    let table = Table::new(rows, widths)
        .header(Row::new(["RESOURCE", "HOLDER", "ACQUIRED", "EXPIRES IN"]).style(DIM))
        .block(Block::bordered().title(format!(" Leases {} ", app.leases.len())));
    let mut state = TableState::default().with_selected(Some(app.lease_cursor));
    frame.render_stateful_widget(table, area, &mut state);
}

fn draw_checkpoints(frame: &mut Frame<'_>, app: &App, area: Rect) {
    let text =
        if app.timeline.is_empty() { "no checkpoints in the last 30 days".to_owned() } else { app.timeline.clone() };
    let paragraph = Paragraph::new(text)
        .wrap(Wrap { trim: false })
        .scroll((app.timeline_scroll, 0))
        .block(Block::bordered().title(" Checkpoints: last 30 days "));
    frame.render_widget(paragraph, area);
}

/// Semaphores with their holders, queues with their counts, and path reservations by scope:
/// three tables, one of them (Tab) moving with the arrows.
fn draw_coordination(frame: &mut Frame<'_>, app: &App, area: Rect, now: UnixMillis) {
    let found = &app.coordination;
    let [semaphores_area, queues_area, reservations_area] =
        Layout::vertical([Constraint::Percentage(30), Constraint::Percentage(30), Constraint::Min(4)]).areas(area);
    let focused = |section: Section| app.section == section;
    let style = |section: Section, i: usize| {
        if focused(section) && i == app.section_cursors[section as usize] { SELECTED } else { Style::new() }
    };
    let title = |name: &str, section: Section, rows: usize| {
        // Only the first 1,000 names are read: say so rather than pass them for all.
        let more = if found.truncated[section as usize] { "+ (the first; narrow with a prefix)" } else { "" };
        let block = Block::bordered().title(format!(" {name} {rows}{more} "));
        if focused(section) {
            block.border_style(Style::new().add_modifier(Modifier::BOLD))
        } else {
            block.border_style(DIM)
        }
    };
    let state = |section: Section| {
        TableState::default().with_selected(focused(section).then_some(app.section_cursors[section as usize]))
    };

    let rows: Vec<Row> = found
        .semaphores
        .iter()
        .enumerate()
        .map(|(i, semaphore)| {
            let holders: Vec<String> = semaphore
                .holders
                .iter()
                .map(|h| format!("{} ({})", h.holder, time_left(Some(&h.expires_at), now)))
                .collect();
            let held = semaphore.capacity.saturating_sub(semaphore.available);
            let cells = [semaphore.name.clone(), format!("{held}/{}", semaphore.capacity), holders.join(", ")];
            Row::new(cells).style(style(Section::Semaphores, i))
        })
        .collect();
    let widths = [Constraint::Min(16), Constraint::Length(8), Constraint::Percentage(60)];
    let table = Table::new(rows, widths)
        .header(Row::new(["SEMAPHORE", "HELD", "HOLDERS (EXPIRES IN)"]).style(DIM))
        .block(title("Semaphores", Section::Semaphores, found.semaphores.len()));
    frame.render_stateful_widget(table, semaphores_area, &mut state(Section::Semaphores));

    let rows: Vec<Row> = found
        .queues
        .iter()
        .enumerate()
        .map(|(i, queue)| {
            let counts = [queue.visible, queue.in_flight, queue.delayed].map(|n| n.to_string());
            let [visible, in_flight, delayed] = counts;
            Row::new([queue.queue.clone(), visible, in_flight, delayed]).style(style(Section::Queues, i))
        })
        .collect();
    let widths = [Constraint::Min(16), Constraint::Length(9), Constraint::Length(11), Constraint::Length(9)];
    let table = Table::new(rows, widths)
        .header(Row::new(["QUEUE", "VISIBLE", "IN FLIGHT", "DELAYED"]).style(DIM))
        .block(title("Queues", Section::Queues, found.queues.len()));
    frame.render_stateful_widget(table, queues_area, &mut state(Section::Queues));

    let reservations = found.scopes.iter().flat_map(|scope| scope.reservations.iter().map(move |r| (scope, r)));
    let rows: Vec<Row> = reservations
        .enumerate()
        .map(|(i, (scope, reservation))| {
            let cells = [
                scope.scope.clone(),
                reservation.holder.clone(),
                reservation.patterns.join(" "),
                if reservation.exclusive { "exclusive" } else { "shared" }.to_owned(),
                time_left(Some(&reservation.expires_at), now),
                reservation.reason.clone().unwrap_or_default(),
            ];
            Row::new(cells).style(style(Section::Reservations, i))
        })
        .collect();
    let widths = [
        Constraint::Length(16),
        Constraint::Length(12),
        Constraint::Min(16),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Percentage(25),
    ];
    let total = found.rows(Section::Reservations);
    let table = Table::new(rows, widths)
        .header(Row::new(["SCOPE", "HOLDER", "PATTERNS", "MODE", "EXPIRES IN", "REASON"]).style(DIM))
        .block(title("Path reservations", Section::Reservations, total));
    frame.render_stateful_widget(table, reservations_area, &mut state(Section::Reservations));
}

const HELP: &str = "\
Views        1 keys   2 runs   3 leases   4 checkpoints   5 coordination
Move         ↑/↓ or j/k, PgUp/PgDn, g/G (first/last)
Keys         Enter open the entry, h its history
             / filter (smart case), Esc clear, Tab prefixes
Coordination semaphores, queues, path reservations; Tab next table
History      ↑/↓ pick a version, m mark it as the diff's base
Back         Esc or ←
Quit         q or Ctrl-C

Keys, entries and histories update live as agents write.";

fn draw_help(frame: &mut Frame<'_>, area: Rect) {
    let width = 72.min(area.width);
    let height = 13.min(area.height);
    let popup = Rect { x: area.x + (area.width - width) / 2, y: area.y + (area.height - height) / 2, width, height };
    frame.render_widget(Clear, popup);
    let block = Block::default().borders(Borders::ALL).title(" Help (any key closes) ");
    frame.render_widget(Paragraph::new(HELP).block(block), popup);
}

/// `2026-11-23T21:04:05.123Z` as `2026-11-23 21:04:05`.
fn short_time(time: &str) -> String {
    time.get(..19).map(|t| t.replacen('T', " ", 1)).unwrap_or_else(|| time.to_owned())
}

fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}
