//! The official memory server's file (`MEMORY_FILE_PATH`, JSONL) brought into the store: read,
//! checked line by line, and merged once per file by the `memory_import` operation, so the
//! graph a user kept there is what `--compat memory` serves from its first start. The file is
//! never written back; `statectl export --format memory` writes one on request.

use std::path::{Path, PathBuf};

use serde_json::json;
use state_compat::memory::{Graph, Imported, jsonl};

use crate::catalog::Operation;
use crate::{Api, ApiError};

/// Where the memory server kept its graph; read at the first start of `--compat memory`.
pub const MEMORY_FILE_ENV: &str = "MEMORY_FILE_PATH";

#[derive(Debug, thiserror::Error)]
pub enum MemoryFileError {
    #[error("cannot read the memory file {}: {cause}", path.display())]
    Read { path: PathBuf, cause: std::io::Error },
    #[error("the memory file {} is not the memory server's format at {bad}: fix that line", path.display())]
    Format { path: PathBuf, bad: jsonl::BadLine },
    #[error("importing the memory file {} failed: {error}", path.display())]
    Import { path: PathBuf, error: Box<ApiError> },
    /// At a server's start: the way to start without the file is to unset the variable.
    #[error("{inner} (or unset {MEMORY_FILE_ENV} to start without importing it)")]
    AtStart { inner: Box<MemoryFileError> },
}

/// The graph in the file at `path`.
pub fn read(path: &Path) -> Result<Graph, MemoryFileError> {
    let text = std::fs::read_to_string(path).map_err(|cause| MemoryFileError::Read { path: path.to_owned(), cause })?;
    jsonl::parse(&text).map_err(|bad| MemoryFileError::Format { path: path.to_owned(), bad })
}

/// Merges the file at `path` into the store, unless a file at that path was imported before
/// (then nothing changes and `imported` is false). The path is made absolute (and resolved,
/// when the file exists) so one file is one source however it is named.
pub async fn import(api: &Api, path: &Path) -> Result<Imported, MemoryFileError> {
    let graph = read(path)?;
    let source = std::fs::canonicalize(path).or_else(|_| std::path::absolute(path)).unwrap_or_else(|_| path.to_owned());
    let args =
        json!({"source": source.display().to_string(), "entities": graph.entities, "relations": graph.relations});
    let failed = |error: ApiError| MemoryFileError::Import { path: path.to_owned(), error: Box::new(error) };
    let body = api.call(Operation::MemoryImport, args).await.body.map_err(failed)?;
    serde_json::from_value(body).map_err(|e| failed(ApiError::new(crate::ErrorCode::Internal, e.to_string())))
}

/// At the start of a server with `--compat memory`: imports `MEMORY_FILE_PATH` if it is set
/// and the file exists (the memory server started empty on a missing file; so does this).
pub async fn import_from_env(api: &Api) -> Result<Option<Imported>, MemoryFileError> {
    let Some(given) = std::env::var_os(MEMORY_FILE_ENV).map(PathBuf::from) else { return Ok(None) };
    let path = std::path::absolute(&given).unwrap_or_else(|_| given.clone());
    if !path.exists() {
        // Said loudly: a user switching expects their graph, and the memory server resolved a
        // relative path against its own install directory, not the working one.
        tracing::warn!(
            "{MEMORY_FILE_ENV}={} is {}, which does not exist: nothing imported (give the file's absolute path)",
            given.display(),
            path.display()
        );
        return Ok(None);
    }
    let imported = import(api, &path).await.map_err(|inner| MemoryFileError::AtStart { inner: Box::new(inner) })?;
    if imported.imported {
        tracing::info!(
            entities_created = imported.entities_created,
            entities_extended = imported.entities_extended,
            relations_created = imported.relations_created,
            "imported the memory file {} into the store (once: later starts and edits of the file do not re-import it; \
             the file is not written)",
            path.display()
        );
    } else {
        tracing::info!("the memory file {} was imported before; the store holds the graph now", path.display());
    }
    Ok(Some(imported))
}
