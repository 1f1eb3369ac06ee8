//! The official memory server's JSONL file in and out of the store: `statectl import --from
//! memory FILE` merges it into the graph `--compat memory` serves (once per file, as a server
//! started with MEMORY_FILE_PATH does), and `statectl export --format memory` writes that graph
//! as such a file, for the memory server or anything else that reads its format.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;
use state_api::catalog::Operation;
use state_api::memory_file;
use state_api::{Api, Outcome};
use state_compat::memory::{Graph, jsonl};

use crate::exit;

/// A memory file, read and checked before anything reaches the store.
pub(crate) struct MemoryFile {
    pub(crate) path: PathBuf,
    pub(crate) graph: Graph,
}

pub(crate) fn load(path: &Path) -> Result<MemoryFile> {
    let graph = memory_file::read(path)?;
    Ok(MemoryFile { path: path.to_owned(), graph })
}

pub(crate) async fn import(api: &Api, file: MemoryFile, dry_run: bool, json: bool) -> Result<u8> {
    let (entities, relations) = (file.graph.entities.len(), file.graph.relations.len());
    if dry_run {
        if json {
            outln!("{}", json!({"dry_run": true, "entities": entities, "relations": relations}));
        } else {
            outln!("would merge {entities} entities and {relations} relations from {}", file.path.display());
        }
        return Ok(exit::OK);
    }
    let imported = match memory_file::import(api, &file.path).await {
        Ok(imported) => imported,
        Err(e) => {
            eprintln!("statectl: {e}");
            return Ok(exit::FAILURE);
        }
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(&imported).unwrap_or_default());
    } else if imported.imported {
        outln!("entities created      {}", imported.entities_created);
        outln!("entities extended     {}", imported.entities_extended);
        outln!("relations created     {}", imported.relations_created);
        outln!("from {entities} entities and {relations} relations in {}", file.path.display());
    } else {
        outln!(
            "{} was imported before: nothing changed (a file is merged once; the store's graph is the one to edit now)",
            file.path.display()
        );
    }
    Ok(exit::OK)
}

/// Writes the store's memory graph in the memory server's format.
pub(crate) async fn export(api: &Api, output: Option<&Path>) -> Result<u8> {
    let reply = api.call(Operation::MemoryReadGraph, json!({})).await;
    let outcome = reply.outcome;
    let graph = match reply.body {
        Ok(body) if outcome == Outcome::Ok => body,
        Ok(_) => return Ok(exit::of(outcome)),
        Err(e) => {
            eprintln!("statectl: {e}");
            return Ok(exit::of(outcome));
        }
    };
    let graph: Graph = serde_json::from_value(graph).context("the store sent a graph this statectl cannot read")?;
    let text = jsonl::render(&graph);
    match output {
        Some(path) => {
            let partial = path.with_extension("partial");
            let mut file = crate::output::private_file(&partial)
                .with_context(|| format!("cannot create {}", partial.display()))?;
            file.write_all(text.as_bytes()).and_then(|()| file.sync_all())?;
            std::fs::rename(&partial, path).with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!(
                "exported {} entities and {} relations to {}",
                graph.entities.len(),
                graph.relations.len(),
                path.display()
            );
        }
        None => outln!("{text}"),
    }
    Ok(exit::OK)
}
