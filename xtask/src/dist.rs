//! `cargo xtask dist`: release binaries in a versioned archive, with checksums.

use std::fs;
use std::process::Command;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::{cargo, root, run};

/// Every binary the product ships.
const BINARIES: [&str; 2] = ["state-mcp", "state-http"];

pub(crate) fn dist() -> Result<()> {
    let mut build = cargo();
    build.args(["build", "--release", "--locked"]);
    for bin in BINARIES {
        build.args(["--bin", bin]);
    }
    run(build)?;

    let version = workspace_version()?;
    let target = host_target()?;
    let name = format!("state-{version}-{target}");
    let dist = root().join("dist");
    let stage = dist.join(&name);
    if stage.exists() {
        fs::remove_dir_all(&stage)?;
    }
    fs::create_dir_all(&stage)?;
    for bin in BINARIES {
        fs::copy(root().join("target/release").join(bin), stage.join(bin)).with_context(|| format!("copying {bin}"))?;
    }
    for doc in ["README.md", "ARCHITECTURE.md"] {
        let path = root().join(doc);
        if path.exists() {
            fs::copy(&path, stage.join(doc))?;
        }
    }
    let archive = format!("{name}.tar.gz");
    let mut tar = Command::new("tar");
    tar.current_dir(&dist).args(["-czf", &archive, &name]);
    run(tar)?;
    fs::remove_dir_all(&stage)?;

    let bytes = fs::read(dist.join(&archive))?;
    let sums = format!("{:x}  {archive}\n", Sha256::digest(&bytes));
    fs::write(dist.join("SHA256SUMS"), &sums)?;
    eprintln!("\nwrote {}\n{sums}verify with: cd dist && sha256sum -c SHA256SUMS", dist.join(&archive).display());
    Ok(())
}

fn workspace_version() -> Result<String> {
    let manifest = fs::read_to_string(root().join("Cargo.toml"))?;
    let in_package = manifest.split("[workspace.package]").nth(1).context("no [workspace.package] table")?;
    let line = in_package.lines().find(|l| l.trim_start().starts_with("version")).context("no workspace version")?;
    let version = line.split('"').nth(1).context("malformed version line")?;
    Ok(version.to_owned())
}

fn host_target() -> Result<String> {
    let output = Command::new("rustc").arg("-vV").output().context("running rustc -vV")?;
    let text = String::from_utf8_lossy(&output.stdout);
    match text.lines().find_map(|l| l.strip_prefix("host: ")) {
        Some(host) => Ok(host.trim().to_owned()),
        None => bail!("rustc -vV did not report a host target"),
    }
}
