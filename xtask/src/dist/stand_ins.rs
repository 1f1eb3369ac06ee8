//! For tests: zig from the cross toolchain, and macOS "binaries" it links from a few lines of
//! C, standing in for the real ones (a macOS release build takes many minutes; packaging
//! tests only need real Mach-O executables of the right CPU under the right names).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{BINARIES, macho, target_dir};

/// zig from target/cross/venv (`cargo xtask ci` and `dist` install it), or `None`, said.
pub(crate) fn zig() -> Option<Command> {
    let python = target_dir().join("cross/venv/bin/python3");
    let works = Command::new(&python).args(["-m", "ziglang", "version"]).output().is_ok_and(|o| o.status.success());
    if !works {
        assert!(std::env::var_os("STATE_REQUIRE_DIST").is_none(), "zig is not installed in target/cross/venv");
        eprintln!("SKIPPED: zig is not installed (cargo xtask dist --macos installs it)");
        return None;
    }
    let mut zig = Command::new(python);
    zig.args(["-m", "ziglang"]);
    Some(zig)
}

/// zig's name for a Rust macOS target, with the release's oldest macOS.
pub(crate) fn zig_target(target: &str) -> String {
    let (major, minor) = macho::min_macos_of(target).expect("a macOS target");
    let cpu = if target.starts_with("aarch64") { "aarch64" } else { "x86_64" };
    format!("{cpu}-macos.{major}.{minor}")
}

/// Links a stripped macOS executable of `target` from `source` (C) into `out`.
pub(crate) fn link_c(zig: &mut Command, source: &str, target: &str, out: &Path) {
    let dir = out.parent().expect("a parent directory");
    let file = dir.join(format!("{}.c", out.file_name().expect("a name").to_string_lossy()));
    std::fs::write(&file, source).expect("write the C source");
    let output =
        zig.args(["cc", "-s", "-target", &zig_target(target)]).arg(&file).arg("-o").arg(out).output().expect("run zig");
    assert!(output.status.success(), "zig cc: {}", String::from_utf8_lossy(&output.stderr));
}

/// The three binaries as stand-ins for `target`, in a directory of their own under `scratch`;
/// each prints its name and CPU, so a test can tell which one an installer placed.
pub(crate) fn stand_in_binaries(scratch: &Path, target: &str) -> Option<PathBuf> {
    let dir = scratch.join(format!("built-{target}"));
    std::fs::create_dir_all(&dir).expect("create the stand-ins' directory");
    for binary in BINARIES {
        let source = format!("#include <stdio.h>\nint main(void) {{ puts(\"{binary} {target}\"); return 0; }}\n");
        link_c(&mut zig()?, &source, target, &dir.join(binary));
    }
    Some(dir)
}
