//! macOS: `proc_pidinfo(PROC_PIDTBSDINFO)`, which answers for this user's processes (a holder
//! of a database is one: the files are private). Another user's process at a recorded pid is
//! not the recorded one, and gets `None` here too.

// The one foreign call in the product: libc has the declaration, rustix no wrapper.
#![allow(unsafe_code)]

/// `SZOMB` of `<sys/proc.h>`: exited, not yet reaped.
const ZOMBIE: u32 = 5;

pub(super) fn started(pid: u32) -> Option<u64> {
    let pid = libc::c_int::try_from(pid).ok()?;
    let size = libc::c_int::try_from(std::mem::size_of::<libc::proc_bsdinfo>()).ok()?;
    let mut info = std::mem::MaybeUninit::<libc::proc_bsdinfo>::zeroed();
    // SAFETY: `info` is `size` writable bytes, and proc_pidinfo writes at most `size` bytes
    // into it. A zeroed proc_bsdinfo (integers and byte arrays only) is a valid value.
    let written = unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDTBSDINFO, 0, info.as_mut_ptr().cast(), size) };
    if written != size {
        return None;
    }
    // SAFETY: zeroed above, then filled by the system.
    let info = unsafe { info.assume_init() };
    if info.pbi_status == ZOMBIE {
        return None;
    }
    info.pbi_start_tvsec.checked_mul(1_000_000)?.checked_add(info.pbi_start_tvusec)
}
