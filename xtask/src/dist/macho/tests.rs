//! The checks, against real Mach-O executables: small C programs linked for macOS by the same
//! zig that links the release.

use std::path::Path;

use super::*;
use crate::dist::stand_ins::zig;

fn link(dir: &Path, target: &str, name: &str, extra: &[&str]) -> Vec<u8> {
    let source = dir.join(format!("{name}.c"));
    std::fs::write(&source, "int helper(void);\nint main(void) { return helper(); }\n").unwrap();
    let helper = dir.join("helper.c");
    std::fs::write(&helper, "int helper(void) { return 0; }\n").unwrap();
    let out = dir.join(name);
    let mut zig = zig().unwrap();
    zig.args(["cc", "-target", target]).arg(&source).args(extra).arg("-o").arg(&out).current_dir(dir);
    if !extra.contains(&"-lhelper") {
        zig.arg(&helper);
    }
    let output = zig.output().unwrap();
    assert!(output.status.success(), "zig cc: {}", String::from_utf8_lossy(&output.stderr));
    std::fs::read(out).unwrap()
}

#[test]
fn an_executable_says_its_cpu_its_oldest_macos_and_its_libraries() {
    if zig().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let arm = read(&link(dir.path(), "aarch64-macos.11.0", "arm", &["-s"])).unwrap();
    assert_eq!(arm.cpu, "arm64");
    assert_eq!(arm.min_macos, (11, 0));
    assert_eq!(arm.libraries, ["/usr/lib/libSystem.B.dylib"]);
    assert_eq!(arm.debug_symbols, 0, "linked with -s");
    let signature = arm.signature.expect("the linker signs arm64 executables ad hoc");
    assert!(signature.pages > 0 && signature.pages_match, "{signature:?}");
    let intel = read(&link(dir.path(), "x86_64-macos.10.12", "intel", &["-s"])).unwrap();
    assert_eq!((intel.cpu, intel.min_macos), ("x86_64", (10, 12)));
}

#[test]
fn the_release_check_refuses_what_a_mac_would_not_run_as_promised() {
    if zig().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    link(dir.path(), "aarch64-macos.11.0", "good", &["-s"]);
    let good = check_release_binary(&path("good"), "aarch64-apple-darwin").unwrap();
    assert_eq!(good.cpu, "arm64");

    let wrong_cpu = check_release_binary(&path("good"), "x86_64-apple-darwin").unwrap_err();
    assert!(format!("{wrong_cpu:#}").contains("not x86_64"), "{wrong_cpu:#}");

    link(dir.path(), "aarch64-macos.11.0", "debug", &["-g"]);
    let unstripped = check_release_binary(&path("debug"), "aarch64-apple-darwin").unwrap_err();
    assert!(format!("{unstripped:#}").contains("not stripped"), "{unstripped:#}");

    link(dir.path(), "aarch64-macos.13.0", "newer", &["-s"]);
    let too_new = check_release_binary(&path("newer"), "aarch64-apple-darwin").unwrap_err();
    assert!(format!("{too_new:#}").contains("needs macOS 13.0"), "{too_new:#}");

    // A library of its own, as a Homebrew build would load from /opt/homebrew.
    let mut zig = zig().unwrap();
    let helper = dir.path().join("helper.c");
    std::fs::write(&helper, "int helper(void) { return 0; }\n").unwrap();
    let status = zig
        .args(["cc", "-target", "aarch64-macos.11.0", "-shared", "-o"])
        .arg(path("libhelper.dylib"))
        .arg(&helper)
        .args(["-Wl,-install_name,/opt/homebrew/lib/libhelper.dylib"])
        .status()
        .unwrap();
    assert!(status.success());
    link(dir.path(), "aarch64-macos.11.0", "foreign", &["-s", "-L.", "-lhelper"]);
    let foreign = check_release_binary(&path("foreign"), "aarch64-apple-darwin").unwrap_err();
    assert!(format!("{foreign:#}").contains("/opt/homebrew/lib/libhelper.dylib"), "{foreign:#}");

    // One byte changed in its code after signing: a Mac would kill it.
    let mut tampered = std::fs::read(path("good")).unwrap();
    let text = tampered.len() / 8;
    tampered[text] ^= 0x01;
    std::fs::write(path("tampered"), tampered).unwrap();
    let broken = check_release_binary(&path("tampered"), "aarch64-apple-darwin").unwrap_err();
    assert!(format!("{broken:#}").contains("signature does not match"), "{broken:#}");

    std::fs::write(path("elf"), b"\x7fELF\x02\x01\x01").unwrap();
    assert!(check_release_binary(&path("elf"), "aarch64-apple-darwin").is_err());
}

#[test]
fn a_universal_binary_holds_both_slices_whole() {
    if zig().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let arm = link(dir.path(), "aarch64-macos.11.0", "arm", &["-s"]);
    let intel = link(dir.path(), "x86_64-macos.10.12", "intel", &["-s"]);
    let both = universal(&[&intel, &arm]).unwrap();
    let slices = read_universal(&both).unwrap();
    assert_eq!(slices.iter().map(|s| s.cpu).collect::<Vec<_>>(), ["x86_64", "arm64"]);
    assert_eq!(slices[1], read(&arm).unwrap());
    assert!(read_universal(&arm).is_err(), "a single-CPU file is not universal");
}

#[test]
fn truncated_and_foreign_files_are_errors_not_panics() {
    for bytes in
        [&b""[..], b"\xcf\xfa\xed\xfe", b"\xcf\xfa\xed\xfe\x07\x00\x00\x01\x00\x00\x00\x00\x02\x00\x00\x00\xff\xff"]
    {
        assert!(read(bytes).is_err());
    }
    assert!(read_universal(b"\xca\xfe\xba\xbe\x00\x00\x00\x09").is_err());
}
