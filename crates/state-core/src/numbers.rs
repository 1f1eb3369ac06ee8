//! Integers a JSON value cannot hold exactly. The store keeps JSON numbers as 64-bit integers
//! or doubles: an integer literal beyond both 64-bit ranges would be read as a double and
//! come back as another number, silently. Frontends look at the text they were sent before
//! parsing it, and refuse such a literal, saying how to send it instead.

/// The first integer literal in the JSON text `text` that fits neither `u64` nor `i64`, if any.
/// Strings are skipped; numbers with a fraction or an exponent are doubles by intent.
pub fn first_wide_integer(text: &[u8]) -> Option<String> {
    let mut i = 0;
    let mut in_string = false;
    while i < text.len() {
        let byte = text[i];
        if in_string {
            match byte {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match byte {
            b'"' => {
                in_string = true;
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < text.len() && matches!(text[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                    i += 1;
                }
                let literal = &text[start..i];
                let integer = !literal.iter().any(|b| matches!(b, b'.' | b'e' | b'E'));
                if integer
                    && let Ok(literal) = std::str::from_utf8(literal)
                    && literal.parse::<u64>().is_err()
                    && literal.parse::<i64>().is_err()
                    && literal.len() > 1
                {
                    return Some(literal.to_owned());
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// What to say about a literal [`first_wide_integer`] found.
pub fn wide_integer_message(literal: &str) -> String {
    let shown: String = literal.chars().take(40).collect();
    format!(
        "the integer {shown} does not fit in 64 bits, so it would be stored as an approximation: send it as a \
         string, or as a number with a fraction or an exponent if an approximation is meant"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_past_64_bits_are_found_and_nothing_else_is() {
        let wide = |text: &str| first_wide_integer(text.as_bytes());
        assert_eq!(wide(r#"{"v": 18446744073709551615, "w": -9223372036854775808}"#), None, "the edges fit");
        assert_eq!(wide(r#"{"v": 18446744073709551616}"#).as_deref(), Some("18446744073709551616"));
        assert_eq!(wide(r#"[1, -9223372036854775809]"#).as_deref(), Some("-9223372036854775809"));
        assert_eq!(wide(r#"{"v": 1e400, "w": 123456789012345678901234.5}"#), None, "doubles by intent");
        assert_eq!(wide(r#"{"s": "99999999999999999999999", "e": "\" 99999999999999999999999"}"#), None);
        assert_eq!(wide(r#"{"k": 1}99999999999999999999999"#).as_deref(), Some("99999999999999999999999"));
    }
}
