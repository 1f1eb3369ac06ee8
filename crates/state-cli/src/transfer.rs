//! `statectl export` and `statectl import`: a dump is JSON lines, a `dump` header, one
//! `record` line per stored record, optionally `event` lines (the history), and an `end` line
//! that lets an import refuse a dump that was cut off. Both walk the store through the
//! `store_export` and `store_import` operations, a page or a chunk at a time.

use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use state_api::catalog::Operation;
use state_api::{Api, Outcome, Reply};
use state_core::ops::history::HistoryRequest;
use state_core::ops::transfer::{
    DEFAULT_IMPORT_CHUNK, DumpedRecord, ExportRequest, ImportConflict, ImportRequest, ImportResult, MAX_IMPORT_RECORDS,
};

use crate::input::request_args;
use crate::output::private_file;
use crate::{exit, foreign, memory_graph};

/// The `format` a dump's header names; `version` changes only if a reader could misread it.
const FORMAT: &str = "state-dump";
const VERSION: u32 = 1;
const PAGE: usize = 1000;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Write the dump here instead of standard output (written to FILE.partial, then renamed)
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Add the store's history (every change still kept) after the records
    #[arg(long, conflicts_with = "format")]
    history: bool,
    /// What to write: a dump of every record, or the knowledge graph of `--compat memory` as
    /// the memory server's JSONL file
    #[arg(long, value_enum, default_value = "dump")]
    format: ExportFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportFormat {
    /// statectl's dump: every record, for `statectl import`
    Dump,
    /// The official MCP memory server's file (MEMORY_FILE_PATH): entities and relations
    Memory,
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// A dump made by `statectl export` (- or nothing: standard input), or with --from, the
    /// other server's SQLite database (or the memory server's JSONL file)
    input: Option<PathBuf>,
    /// Read another server's database instead of a dump, keeping its versions
    #[arg(long, value_enum, value_name = "SERVER", requires = "input")]
    from: Option<Source>,
    /// Decide every record and print the summary, but write nothing
    #[arg(long)]
    dry_run: bool,
    /// Records per transaction (1 to 1000)
    #[arg(long, default_value_t = DEFAULT_IMPORT_CHUNK as u64, value_parser = clap::value_parser!(u64).range(1..=MAX_IMPORT_RECORDS as u64))]
    chunk: u64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Source {
    /// agentcheckpoint's checkpoints.db (CHECKPOINT_DB_PATH, default ~/.hermes/checkpoints.db)
    Agentcheckpoint,
    /// mcp-state-sidecar's SQLite database (DB_PATH, default state_sidecar.db)
    Sidecar,
    /// The official MCP memory server's JSONL file (MEMORY_FILE_PATH), merged into the graph
    /// `--compat memory` serves; once per file
    Memory,
}

/// One line of a dump.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Line {
    Dump(Header),
    Record(DumpedRecord),
    /// A history event as `history_log` shows it. Kept for the record; an import does not
    /// replay it, since a store's history is the story of its own revisions.
    Event(Value),
    End(Trailer),
}

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    exported_at: String,
    /// The store revision when the export began.
    revision: u64,
    history: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct Trailer {
    records: u64,
    events: u64,
    /// The store revision when the export ended.
    revision: u64,
}

fn progress(total: Option<u64>, what: &'static str) -> ProgressBar {
    // indicatif draws nothing when stderr is not a terminal, so scripts get only the summary.
    let rate = |state: &indicatif::ProgressState, out: &mut dyn std::fmt::Write| {
        let _ = write!(out, "{}/s", whole_number(state.per_sec()));
    };
    match total {
        Some(total) => {
            let style = ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} ({rate}, {eta} left)")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .with_key("rate", rate);
            ProgressBar::new(total).with_style(style).with_message(what)
        }
        None => {
            let style = ProgressStyle::with_template("{spinner} {pos} {msg} ({rate})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner())
                .with_key("rate", rate);
            ProgressBar::new_spinner().with_style(style).with_message(what)
        }
    }
}

/// A rate as a person reads it: rounded, with thousands separated (`53,718`).
fn whole_number(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// A call's result, or the exit code of its failure after saying why.
fn body(reply: Reply) -> Result<Value, u8> {
    match reply.body {
        Ok(body) => Ok(body),
        Err(error) => {
            eprintln!("statectl: {}", error.message);
            Err(exit::of(reply.outcome))
        }
    }
}

fn write_line(out: &mut dyn Write, line: &Line) -> Result<()> {
    serde_json::to_writer(&mut *out, line)?;
    out.write_all(b"\n")?;
    Ok(())
}

pub(crate) async fn export(api: &Api, args: &ExportArgs, json: bool) -> Result<u8> {
    if args.format == ExportFormat::Memory {
        return memory_graph::export(api, args.output.as_deref()).await;
    }
    let partial = args.output.as_ref().map(|path| path.with_extension(partial_extension(path)));
    let mut out: Box<dyn Write> = match &partial {
        Some(path) => Box::new(BufWriter::new(
            // A dump holds every record of the store: as private as the database.
            private_file(path).with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    };
    let bar = progress(None, "records");
    let (mut records, mut events, mut first_revision) = (0u64, 0u64, None);
    let mut revision: u64 = 0;
    let mut pages = state_api::Pages::new(
        api.clone(),
        Operation::StoreExport,
        request_args(ExportRequest { limit: Some(PAGE), cursor: None })?,
    );
    while let Some(reply) = pages.next().await {
        let page = match body(reply) {
            Ok(page) => page,
            Err(code) => return Ok(code),
        };
        revision = page["revision"].as_u64().unwrap_or(0);
        if first_revision.is_none() {
            first_revision = Some(revision);
            let header = Header {
                format: FORMAT.into(),
                version: VERSION,
                exported_at: now_rfc3339(),
                revision,
                history: args.history,
            };
            write_line(&mut *out, &Line::Dump(header))?;
        }
        for record in page["records"].as_array().into_iter().flatten() {
            let record: DumpedRecord =
                serde_json::from_value(record.clone()).context("the store sent a record this statectl cannot read")?;
            write_line(&mut *out, &Line::Record(record))?;
            records += 1;
            bar.inc(1);
        }
    }
    if args.history {
        bar.set_message("records, history");
        let mut since = 0u64;
        loop {
            let request = request_args(HistoryRequest {
                since_revision: Some(since),
                n: Some(PAGE),
                include_values: Some(true),
                ..HistoryRequest::default()
            })?;
            let page = match body(api.call(Operation::HistoryLog, request).await) {
                Ok(page) => page,
                Err(code) => return Ok(code),
            };
            for event in page["events"].as_array().into_iter().flatten() {
                since = since.max(event["revision"].as_u64().unwrap_or(since));
                write_line(&mut *out, &Line::Event(event.clone()))?;
                events += 1;
            }
            revision = revision.max(page["revision"].as_u64().unwrap_or(0));
            if page["more"] != json!(true) {
                break;
            }
        }
    }
    write_line(&mut *out, &Line::End(Trailer { records, events, revision }))?;
    out.flush().context("cannot write the dump")?;
    drop(out);
    bar.finish_and_clear();
    if let (Some(partial), Some(output)) = (&partial, &args.output) {
        std::fs::rename(partial, output)
            .with_context(|| format!("cannot rename {} to {}", partial.display(), output.display()))?;
    }
    let first = first_revision.unwrap_or(revision);
    let place = args.output.as_ref().map_or("standard output".to_owned(), |p| p.display().to_string());
    let history = if args.history { format!(" and {events} history events") } else { String::new() };
    let summary = format!("exported {records} records{history} at revision {revision} to {place}");
    // The summary goes to stdout, as for an import, unless stdout is the dump itself.
    match (&args.output, json) {
        (None, _) => eprintln!("{summary}"),
        (Some(_), false) => outln!("{summary}"),
        (Some(_), true) => {}
    }
    if first != revision {
        eprintln!(
            "note: the store changed while it was exported (revision {first} to {revision}); each record is as it was when its page was read"
        );
    }
    if json && args.output.is_some() {
        outln!("{}", json!({ "records": records, "events": events, "revision": revision }));
    }
    Ok(exit::OK)
}

fn partial_extension(path: &Path) -> String {
    match path.extension() {
        Some(ext) => format!("{}.partial", ext.to_string_lossy()),
        None => "partial".to_owned(),
    }
}

fn now_rfc3339() -> String {
    state_api::Clock::now(&state_api::SystemClock).to_rfc3339()
}

/// The records of a dump: held in memory when it came on standard input (which cannot be
/// read twice), else streamed from its file in a second pass, so a dump of any size imports
/// in the memory of one chunk.
enum Records {
    Held(Vec<DumpedRecord>),
    File { path: PathBuf, count: u64 },
}

impl Records {
    fn count(&self) -> u64 {
        match self {
            Records::Held(records) => records.len() as u64,
            Records::File { count, .. } => *count,
        }
    }

    /// The records in chunks of `size`, in dump order.
    fn chunks(self, size: usize) -> Result<Box<dyn Iterator<Item = Result<Vec<DumpedRecord>>>>> {
        match self {
            Records::Held(records) => {
                let mut records = records.into_iter().peekable();
                Ok(Box::new(std::iter::from_fn(move || {
                    records.peek()?;
                    Some(Ok(records.by_ref().take(size).collect()))
                })))
            }
            Records::File { path, .. } => {
                let file = std::fs::File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
                let mut lines = std::io::BufReader::new(file).lines();
                Ok(Box::new(std::iter::from_fn(move || {
                    let mut chunk = Vec::with_capacity(size);
                    while chunk.len() < size {
                        let line = match lines.next() {
                            None => break,
                            Some(Ok(line)) => line,
                            Some(Err(e)) => {
                                return Some(Err(anyhow::Error::new(e).context("cannot read the dump again")));
                            }
                        };
                        if line.trim().is_empty() {
                            continue;
                        }
                        match serde_json::from_str::<Line>(&line) {
                            Ok(Line::Record(record)) => chunk.push(record),
                            Ok(_) => {}
                            Err(e) => {
                                return Some(Err(
                                    anyhow::Error::new(e).context("the dump changed while it was imported")
                                ));
                            }
                        }
                    }
                    (!chunk.is_empty()).then_some(Ok(chunk))
                })))
            }
        }
    }
}

/// Reads a whole dump and checks it (header, every line, the end line's counts) before
/// anything is written, so a cut-off dump changes nothing. Records are kept only for
/// standard input; a file is read again to import.
fn read_dump(input: Option<&Path>) -> Result<(Records, u64)> {
    let (reader, name, path): (Box<dyn BufRead>, String, Option<PathBuf>) = match input {
        None => (Box::new(std::io::stdin().lock()), "standard input".into(), None),
        Some(path) if path.as_os_str() == "-" => (Box::new(std::io::stdin().lock()), "standard input".into(), None),
        Some(path) => (
            Box::new(std::io::BufReader::new(
                std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
            )),
            path.display().to_string(),
            Some(path.to_owned()),
        ),
    };
    let mut held = Vec::new();
    let (mut records, mut events) = (0u64, 0u64);
    let mut header = false;
    let mut trailer: Option<Trailer> = None;
    for (number, line) in reader.lines().enumerate() {
        let number = number + 1;
        let line = line.with_context(|| format!("cannot read {name}"))?;
        if line.trim().is_empty() {
            continue;
        }
        if trailer.is_some() {
            bail!("{name} line {number}: text after the dump's end line");
        }
        let parsed: Line =
            serde_json::from_str(&line).with_context(|| format!("{name} line {number} is not a dump line"))?;
        match parsed {
            Line::Dump(h) if !header => {
                if h.format != FORMAT || h.version > VERSION {
                    bail!(
                        "{name} is a `{}` version {} dump; this statectl reads `{FORMAT}` up to version {VERSION}",
                        h.format,
                        h.version
                    );
                }
                header = true;
            }
            _ if !header => bail!("{name} does not start with a dump header: make it with `statectl export`"),
            Line::Dump(_) => bail!("{name} line {number}: a second dump header"),
            Line::Record(record) => {
                records += 1;
                if path.is_none() {
                    held.push(record);
                }
            }
            Line::Event(_) => events += 1,
            Line::End(end) => trailer = Some(end),
        }
    }
    let Some(end) = trailer else {
        bail!("{name} ends without the dump's end line: it was cut off (export it again); nothing was imported");
    };
    if end.records != records || end.events != events {
        bail!(
            "{name} says it holds {} records and {} events but holds {records} and {events}: it is damaged; nothing was imported",
            end.records,
            end.events,
        );
    }
    let records = match path {
        Some(path) => Records::File { path, count: records },
        None => Records::Held(held),
    };
    Ok((records, events))
}

#[derive(Debug, Default, Serialize)]
struct Summary {
    imported: u64,
    unchanged: u64,
    expired: u64,
    conflicts: Vec<ImportConflict>,
    dry_run: bool,
    /// History events in the dump, which an import does not replay.
    history_events_not_replayed: u64,
    /// What another server's database held that is not brought over.
    #[serde(skip_serializing_if = "Option::is_none")]
    not_imported: Option<NotImported>,
}

#[derive(Debug, Serialize)]
struct NotImported {
    leases: u64,
}

/// Everything an import writes, read before the store is reached.
pub(crate) struct Loaded {
    records: Records,
    events: u64,
    left: Option<foreign::Left>,
    /// A memory server's file instead of records.
    memory: Option<memory_graph::MemoryFile>,
}

/// Reads the records (and the whole input) first, so bad input never starts an owner.
pub(crate) fn load(args: &ImportArgs) -> Result<Loaded> {
    match (args.from, &args.input) {
        (Some(Source::Agentcheckpoint), Some(path)) => {
            Ok(Loaded { records: Records::Held(foreign::agentcheckpoint(path)?), events: 0, left: None, memory: None })
        }
        (Some(Source::Sidecar), Some(path)) => {
            let (records, left) = foreign::sidecar(path)?;
            Ok(Loaded { records: Records::Held(records), events: 0, left: Some(left), memory: None })
        }
        (Some(Source::Memory), Some(path)) => Ok(Loaded {
            records: Records::Held(Vec::new()),
            events: 0,
            left: None,
            memory: Some(memory_graph::load(path)?),
        }),
        (_, input) => {
            let (records, events) = read_dump(input.as_deref())?;
            Ok(Loaded { records, events, left: None, memory: None })
        }
    }
}

pub(crate) async fn import(api: &Api, args: &ImportArgs, loaded: Loaded, json: bool) -> Result<u8> {
    let Loaded { records, events, left, memory } = loaded;
    if let Some(file) = memory {
        return memory_graph::import(api, file, args.dry_run, json).await;
    }
    let not_imported = left.map(|left| NotImported { leases: left.leases });
    let mut summary =
        Summary { dry_run: args.dry_run, history_events_not_replayed: events, not_imported, ..Summary::default() };
    let total = records.count();
    let bar = progress(Some(total), "records");
    let mut done = 0u64;
    for chunk in records.chunks(usize::try_from(args.chunk).unwrap_or(DEFAULT_IMPORT_CHUNK))? {
        let chunk = chunk?;
        let chunk_len = chunk.len() as u64;
        let request =
            request_args(ImportRequest { records: chunk, dry_run: args.dry_run, agent_id: None, request_id: None })?;
        let reply = api.call(Operation::StoreImport, request).await;
        let outcome = reply.outcome;
        let result = match body(reply) {
            Ok(body) if matches!(outcome, Outcome::Ok | Outcome::Conflict) => body,
            Ok(_) => return Ok(exit::of(outcome)),
            Err(code) => {
                bar.abandon();
                eprintln!(
                    "statectl: stopped after {done} of {total} records; importing again continues where this stopped"
                );
                return Ok(code);
            }
        };
        let result: ImportResult =
            serde_json::from_value(result).context("the store sent an import result this statectl cannot read")?;
        summary.imported += result.imported;
        summary.unchanged += result.unchanged;
        summary.expired += result.expired;
        summary.conflicts.extend(result.conflicts);
        done += chunk_len;
        bar.inc(chunk_len);
    }
    bar.finish_and_clear();
    if json {
        outln!("{}", serde_json::to_string_pretty(&summary).unwrap_or_default());
    } else {
        print_summary(&summary);
    }
    if done != total {
        eprintln!("statectl: the dump changed while it was imported: {done} records read, {total} checked first");
        return Ok(exit::FAILURE);
    }
    Ok(if summary.conflicts.is_empty() { exit::OK } else { exit::CONFLICT })
}

fn print_summary(summary: &Summary) {
    let would = if summary.dry_run { "would import" } else { "imported" };
    outln!("{would:<10} {}", summary.imported);
    outln!("{:<10} {}", "unchanged", summary.unchanged);
    outln!("{:<10} {}", "expired", summary.expired);
    outln!("{:<10} {}", "conflicts", summary.conflicts.len());
    for conflict in &summary.conflicts {
        outln!(
            "  {}: version {} here, {} in the import (left as it is)",
            printable(&conflict.key),
            conflict.current_version,
            conflict.incoming_version
        );
    }
    if summary.history_events_not_replayed > 0 {
        outln!(
            "history: {} events in the dump were not replayed; this store records the import itself",
            summary.history_events_not_replayed
        );
    }
    if let Some(left) = summary.not_imported.as_ref().filter(|l| l.leases > 0) {
        outln!(
            "not imported: {} live leases (the sidecar's leases carry no fencing token: their holders acquire them again here)",
            left.leases
        );
    }
    if summary.dry_run {
        outln!("dry run: nothing was written");
    }
}

/// A stored key as a person reads it: the store's own records start with a control character.
fn printable(key: &str) -> String {
    key.chars().map(|c| if c.is_control() { format!("\\u{{{:x}}}", c as u32) } else { c.to_string() }).collect()
}

#[cfg(test)]
mod rate_tests {
    #[test]
    fn rates_are_whole_numbers_with_separators() {
        assert_eq!(super::whole_number(53_717.876_6), "53,718");
        assert_eq!(super::whole_number(999.4), "999");
        assert_eq!(super::whole_number(1_000.0), "1,000");
        assert_eq!(super::whole_number(0.2), "0");
        assert_eq!(super::whole_number(1_234_567.0), "1,234,567");
    }
}
