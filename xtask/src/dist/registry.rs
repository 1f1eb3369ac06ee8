//! `server.json`: the release's entry in the MCP Registry, where MCP clients find servers. It
//! names four ways to run state: the PyPI wheel (`uvx state-mcp`), the npm package (`npx
//! state-mcp`), the container image (state-http over Streamable HTTP) and the MCP Bundle, by
//! its download address and checksum. Who publishes, and where the release is downloaded
//! from, is `packaging/registry/publisher.json`; the schema it must satisfy is the registry's
//! own (`packaging/registry/server.schema.json`, checked in the tests).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::root;

/// The schema version `server.json` is written for.
pub(crate) const SCHEMA: &str = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json";

/// Who publishes the release, and where it is downloaded from.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Publisher {
    /// The registry name, `io.github.<owner>/<name>` (the registry checks the owner).
    pub(crate) name: String,
    pub(crate) title: String,
    /// At most 100 characters (the registry's limit).
    pub(crate) description: String,
    pub(crate) repository: String,
    /// The release's download address; `{version}` is replaced.
    pub(crate) release: String,
    /// The container image, without its tag.
    pub(crate) image: String,
}

impl Publisher {
    pub(crate) fn load() -> Result<Publisher> {
        let path = root().join("packaging/registry/publisher.json");
        let text = fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is malformed", path.display()))
    }
}

/// Writes `out/server.json` for `version`, naming `bundle` by its checksum; its path.
pub(crate) fn server_json(out: &Path, version: &str, bundle: &Path, publisher: &Publisher) -> Result<PathBuf> {
    let bundle_name = bundle.file_name().context("the bundle has no file name")?.to_string_lossy();
    let sha256 = format!("{:x}", Sha256::digest(fs::read(bundle)?));
    let release = publisher.release.replace("{version}", version);
    let stdio = json!({"type": "stdio"});
    let server = json!({
        "$schema": SCHEMA,
        "name": publisher.name,
        "title": publisher.title,
        "description": publisher.description,
        "version": version,
        "repository": {"url": publisher.repository, "source": "github"},
        "websiteUrl": publisher.repository,
        "packages": [
            {
                "registryType": "pypi", "identifier": "state-mcp", "version": version,
                "runtimeHint": "uvx", "transport": stdio,
            },
            {
                "registryType": "npm", "identifier": "state-mcp", "version": version,
                "runtimeHint": "npx", "transport": stdio,
            },
            {
                "registryType": "oci",
                "identifier": format!("{}:{version}", publisher.image),
                "runtimeHint": "docker",
                "transport": {"type": "streamable-http", "url": "http://localhost:7478/mcp"},
                "runtimeArguments": [
                    {"type": "named", "name": "--publish", "value": "127.0.0.1:7478:7478"},
                    {"type": "named", "name": "--volume", "value": "state-data:/data"},
                    {
                        "type": "named", "name": "--volume", "value": "{tokens}:/etc/state/tokens.toml:ro",
                        "description": "The tokens file the server checks bearer tokens against (README: Tokens)",
                        "variables": {"tokens": {
                            "description": "Path of your tokens.toml", "format": "filepath", "isRequired": true,
                        }},
                    },
                ],
            },
            {
                "registryType": "mcpb",
                "identifier": format!("{release}/{bundle_name}"),
                "version": version,
                "fileSha256": sha256,
                "transport": stdio,
            },
        ],
    });
    let path = out.join("server.json");
    fs::write(&path, serde_json::to_string_pretty(&server)? + "\n")?;
    Ok(path)
}

#[cfg(test)]
mod tests;
