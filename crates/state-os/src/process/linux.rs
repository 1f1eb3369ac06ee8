//! Linux: `/proc/<pid>/stat`.

pub(super) fn started(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    start_time_of(&stat)
}

/// Field 22 of a stat line, counted after the command name, which is in parentheses and may
/// itself hold spaces and parentheses (so the last `)` ends it); `None` for a zombie.
fn start_time_of(stat: &str) -> Option<u64> {
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    if fields.next()? == "Z" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_time_is_read_past_a_name_with_spaces_and_parentheses() {
        let line = "1234 (a (b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(start_time_of(line), Some(987654));
        assert_eq!(start_time_of("1 (x) S"), None);
        let zombie = "1234 (x) Z 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(start_time_of(zombie), None);
    }
}
