//! Reading the Mach-O executables a macOS release ships, to check them on this Linux machine
//! (no Mac, no Apple tools): the CPU, the libraries they load, the oldest macOS they declare,
//! and whether they were stripped. And the one Mach-O writing dist needs: a universal binary
//! of two single-CPU ones, as Apple's `lipo -create` makes.

use std::path::Path;

use anyhow::{Context, Result, bail, ensure};

const MH_MAGIC_64: u32 = 0xfeed_facf;
const FAT_MAGIC: u32 = 0xcafe_babe;
const MH_EXECUTE: u32 = 2;
const CPU_TYPE_X86_64: u32 = 0x0100_0007;
const CPU_TYPE_ARM64: u32 = 0x0100_000c;
const LC_SYMTAB: u32 = 0x2;
const LC_DYSYMTAB: u32 = 0xb;
const LC_LOAD_DYLIB: u32 = 0xc;
const LC_VERSION_MIN_MACOSX: u32 = 0x24;
const LC_BUILD_VERSION: u32 = 0x32;
const LC_LOAD_WEAK_DYLIB: u32 = 0x8000_0018;
const LC_REEXPORT_DYLIB: u32 = 0x8000_001f;
const LC_LOAD_UPWARD_DYLIB: u32 = 0x8000_0023;
const LC_CODE_SIGNATURE: u32 = 0x1d;
const CSMAGIC_EMBEDDED_SIGNATURE: u32 = 0xfade_0cc0;
const CSMAGIC_CODEDIRECTORY: u32 = 0xfade_0c02;
const CS_HASHTYPE_SHA256: u8 = 2;
const PLATFORM_MACOS: u32 = 1;
/// `n_type` bits of a debugging (stab) symbol.
const N_STAB: u8 = 0xe0;

/// What a single-CPU Mach-O executable says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MachO {
    /// `x86_64` or `arm64`.
    pub(crate) cpu: &'static str,
    /// The oldest macOS it runs on, (major, minor).
    pub(crate) min_macos: (u32, u32),
    /// Every library it loads, by install name.
    pub(crate) libraries: Vec<String>,
    /// Debugging symbols (stabs: the map to the objects' DWARF); 0 once stripped.
    pub(crate) debug_symbols: usize,
    /// Local symbols that are not for debugging (function names; a linker's own few).
    pub(crate) local_symbols: usize,
    /// Its code signature, if it has one: Apple silicon runs no code without one (an ad-hoc
    /// signature, as the linker writes, will do), and kills a process whose pages do not
    /// match their hashes in it.
    pub(crate) signature: Option<Signature>,
}

/// What a code signature's code directory says of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Signature {
    /// Pages hashed.
    pub(crate) pages: usize,
    /// Whether every page's SHA-256 is the one the signature holds.
    pub(crate) pages_match: bool,
}

fn u32_at(bytes: &[u8], at: usize) -> Result<u32> {
    let word = bytes.get(at..at + 4).context("the file ends inside a header")?;
    Ok(u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
}

fn be_u32_at(bytes: &[u8], at: usize) -> Result<u32> {
    let word = bytes.get(at..at + 4).context("the file ends inside a header")?;
    Ok(u32::from_be_bytes([word[0], word[1], word[2], word[3]]))
}

fn index(value: u32) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

/// Reads a single-CPU 64-bit Mach-O executable.
pub(crate) fn read(bytes: &[u8]) -> Result<MachO> {
    ensure!(u32_at(bytes, 0)? == MH_MAGIC_64, "not a 64-bit Mach-O file");
    let cpu = match u32_at(bytes, 4)? {
        CPU_TYPE_X86_64 => "x86_64",
        CPU_TYPE_ARM64 => "arm64",
        other => bail!("a Mach-O for CPU type {other:#x}"),
    };
    ensure!(u32_at(bytes, 12)? == MH_EXECUTE, "a Mach-O that is not an executable");
    let commands = u32_at(bytes, 16)?;
    let mut at = 32;
    let mut min_macos = None;
    let mut libraries = Vec::new();
    let mut symbols = None;
    let mut local_symbols = 0;
    let mut signature = None;
    for _ in 0..commands {
        let (command, size) = (u32_at(bytes, at)?, index(u32_at(bytes, at + 4)?));
        ensure!(size >= 8, "a load command of {size} bytes");
        match command {
            LC_LOAD_DYLIB | LC_LOAD_WEAK_DYLIB | LC_REEXPORT_DYLIB | LC_LOAD_UPWARD_DYLIB => {
                let name_at = at + index(u32_at(bytes, at + 8)?);
                let name = bytes.get(name_at..at + size).context("a library name past its command")?;
                let name = name.split(|b| *b == 0).next().unwrap_or_default();
                libraries.push(String::from_utf8_lossy(name).into_owned());
            }
            LC_BUILD_VERSION => {
                ensure!(u32_at(bytes, at + 8)? == PLATFORM_MACOS, "built for an Apple platform other than macOS");
                min_macos = Some(u32_at(bytes, at + 12)?);
            }
            LC_VERSION_MIN_MACOSX => min_macos = Some(u32_at(bytes, at + 8)?),
            LC_SYMTAB => symbols = Some((index(u32_at(bytes, at + 8)?), index(u32_at(bytes, at + 12)?))),
            LC_DYSYMTAB => local_symbols = index(u32_at(bytes, at + 12)?),
            LC_CODE_SIGNATURE => {
                let (offset, size) = (index(u32_at(bytes, at + 8)?), index(u32_at(bytes, at + 12)?));
                let blob = bytes.get(offset..offset.saturating_add(size)).context("a code signature past the file")?;
                signature = Some(check_signature(bytes, blob)?);
            }
            _ => {}
        }
        at += size;
    }
    let min_macos = min_macos.context("no LC_BUILD_VERSION: the oldest macOS it runs on is not declared")?;
    let mut stabs = 0;
    if let Some((offset, count)) = symbols {
        for n in 0..count {
            let n_type = *bytes.get(offset + n * 16 + 4).context("the symbol table runs past the file")?;
            if n_type & N_STAB != 0 {
                stabs += 1;
            }
        }
    }
    Ok(MachO {
        cpu,
        min_macos: (min_macos >> 16, (min_macos >> 8) & 0xff),
        libraries,
        debug_symbols: stabs,
        local_symbols: local_symbols.saturating_sub(stabs),
        signature,
    })
}

/// Reads the code directory of an embedded signature and hashes the pages it covers.
fn check_signature(file: &[u8], blob: &[u8]) -> Result<Signature> {
    use sha2::{Digest, Sha256};
    ensure!(be_u32_at(blob, 0)? == CSMAGIC_EMBEDDED_SIGNATURE, "a code signature of an unknown kind");
    let count = index(be_u32_at(blob, 8)?);
    for n in 0..count {
        let offset = index(be_u32_at(blob, 12 + n * 8 + 4)?);
        let directory = blob.get(offset..).context("a signature index past the signature")?;
        if be_u32_at(directory, 0)? != CSMAGIC_CODEDIRECTORY {
            continue;
        }
        let hash_offset = index(be_u32_at(directory, 16)?);
        let code_slots = index(be_u32_at(directory, 28)?);
        let code_limit = index(be_u32_at(directory, 32)?);
        let (hash_size, hash_type) = (directory.get(36).copied(), directory.get(37).copied());
        let page_shift = directory.get(39).copied().context("a code directory cut short")?;
        ensure!(hash_type == Some(CS_HASHTYPE_SHA256) && hash_size == Some(32), "a code directory not of SHA-256");
        ensure!((1..=20).contains(&page_shift), "a code directory with pages of 2^{page_shift} bytes");
        let page = 1usize << page_shift;
        let code = file.get(..code_limit).context("a signature covering more than the file")?;
        let mut pages_match = code.chunks(page).count() == code_slots;
        for (n, chunk) in code.chunks(page).enumerate() {
            let at = hash_offset + n * 32;
            let recorded = directory.get(at..at + 32).context("a page hash past the code directory")?;
            pages_match &= Sha256::digest(chunk).as_slice() == recorded;
        }
        return Ok(Signature { pages: code_slots, pages_match });
    }
    bail!("a code signature without a code directory")
}

/// The Mach-O CPU name of a Rust target (`aarch64-apple-darwin` → `arm64`).
pub(crate) fn cpu_of(target: &str) -> Result<&'static str> {
    match target.split('-').next() {
        Some("x86_64") => Ok("x86_64"),
        Some("aarch64") => Ok("arm64"),
        _ => bail!("no macOS CPU for {target}"),
    }
}

/// Whether a library is one every Mac has: libSystem and the other libraries in /usr/lib, and
/// the system's frameworks. Anything else (Homebrew's, a bundled dylib) would be missing on a
/// clean machine.
pub(crate) fn is_system_library(install_name: &str) -> bool {
    install_name.starts_with("/usr/lib/") || install_name.starts_with("/System/Library/Frameworks/")
}

/// Checks a binary a macOS release ships for `target`; what it found.
pub(crate) fn check_release_binary(path: &Path, target: &str) -> Result<MachO> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let found = read(&bytes).with_context(|| format!("{} is not a macOS executable", path.display()))?;
    let name = path.display();
    ensure!(found.cpu == cpu_of(target)?, "{name} is for {}, not {}", found.cpu, cpu_of(target)?);
    ensure!(found.debug_symbols == 0, "{name} is not stripped ({} debugging symbols)", found.debug_symbols);
    ensure!(
        found.libraries.iter().any(|l| l.starts_with("/usr/lib/libSystem")),
        "{name} does not load libSystem: {:?}",
        found.libraries
    );
    match &found.signature {
        Some(signature) => ensure!(signature.pages_match, "{name}'s code signature does not match its contents"),
        None => ensure!(found.cpu != "arm64", "{name} is not signed: Apple silicon Macs would kill it on start"),
    }
    if let Some(foreign) = found.libraries.iter().find(|l| !is_system_library(l)) {
        bail!("{name} loads {foreign}, which a clean Mac does not have");
    }
    let oldest = min_macos_of(target)?;
    ensure!(
        found.min_macos <= oldest,
        "{name} needs macOS {}.{}, newer than the release's {}.{}",
        found.min_macos.0,
        found.min_macos.1,
        oldest.0,
        oldest.1
    );
    Ok(found)
}

/// The oldest macOS a release supports on each CPU: Rust's own floor for the target (Intel
/// Macs from Sierra, every Apple silicon Mac).
pub(crate) fn min_macos_of(target: &str) -> Result<(u32, u32)> {
    match cpu_of(target)? {
        "x86_64" => Ok((10, 12)),
        _ => Ok((11, 0)),
    }
}

/// One universal binary of single-CPU Mach-O executables (a fat header, then each slice at a
/// 16 KiB boundary, as `lipo` aligns them for arm64).
pub(crate) fn universal(slices: &[&[u8]]) -> Result<Vec<u8>> {
    const ALIGN_LOG2: u32 = 14;
    let align = 1usize << ALIGN_LOG2;
    let mut out = Vec::new();
    out.extend_from_slice(&FAT_MAGIC.to_be_bytes());
    out.extend_from_slice(&u32::try_from(slices.len())?.to_be_bytes());
    let mut offset = (8 + 20 * slices.len()).next_multiple_of(align);
    let mut placed = Vec::new();
    for slice in slices {
        ensure!(u32_at(slice, 0)? == MH_MAGIC_64, "a slice that is not a 64-bit Mach-O");
        out.extend_from_slice(&u32_at(slice, 4)?.to_be_bytes());
        out.extend_from_slice(&u32_at(slice, 8)?.to_be_bytes());
        out.extend_from_slice(&u32::try_from(offset)?.to_be_bytes());
        out.extend_from_slice(&u32::try_from(slice.len())?.to_be_bytes());
        out.extend_from_slice(&ALIGN_LOG2.to_be_bytes());
        placed.push(offset);
        offset = (offset + slice.len()).next_multiple_of(align);
    }
    for (slice, at) in slices.iter().zip(placed) {
        out.resize(at, 0);
        out.extend_from_slice(slice);
    }
    Ok(out)
}

/// The slices of a universal binary, each read.
pub(crate) fn read_universal(bytes: &[u8]) -> Result<Vec<MachO>> {
    ensure!(be_u32_at(bytes, 0)? == FAT_MAGIC, "not a universal binary");
    let count = index(be_u32_at(bytes, 4)?);
    let mut slices = Vec::new();
    for n in 0..count {
        let entry = 8 + n * 20;
        let (offset, size) = (index(be_u32_at(bytes, entry + 8)?), index(be_u32_at(bytes, entry + 12)?));
        let slice = bytes.get(offset..offset.saturating_add(size)).context("a slice past the end of the file")?;
        slices.push(read(slice)?);
    }
    Ok(slices)
}

#[cfg(test)]
mod tests;
