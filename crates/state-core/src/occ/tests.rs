use super::*;

#[test]
fn conditional_write_rules() {
    // (current version, expected, accepted)
    let cases = [
        (0, None, true),
        (7, None, true),
        (0, Some(0), true),
        (1, Some(0), false),
        (3, Some(3), true),
        (3, Some(2), false),
        (3, Some(4), false),
        (0, Some(1), false),
    ];
    for (current, expected, accepted) in cases {
        let got = check_expected(current, expected);
        assert_eq!(got.is_ok(), accepted, "current {current} expected {expected:?}");
        if let Err(mismatch) = got {
            assert_eq!(mismatch, VersionMismatch { expected: expected.unwrap_or_default(), current });
        }
    }
}
