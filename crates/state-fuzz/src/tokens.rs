//! Tokens files: whatever the file holds, loading it answers a principal set or an error, and
//! an error never quotes a secret the file carries.

use state_api::auth::Tokens;

pub(crate) fn file(data: &[u8]) {
    let text = crate::harness::text(data);
    let Err(error) = Tokens::parse(&text) else { return };
    for secret in secrets(&text) {
        assert!(!error.contains(&secret), "the error quotes a secret: {error}");
    }
}

/// The values of `secret = "..."` lines that look like secrets (long, one word, with a
/// digit), so that words the parser's own messages use are not taken for one.
fn secrets(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.trim_start().strip_prefix("secret"))
        .filter_map(|rest| rest.split_once('"').map(|(_, v)| v.split('"').next().unwrap_or(v)))
        .filter(|value| {
            value.len() >= 12
                && !value.chars().any(|c| c.is_whitespace() || c.is_control())
                && value.chars().any(|c| c.is_ascii_digit())
        })
        .map(str::to_owned)
        .collect()
}
