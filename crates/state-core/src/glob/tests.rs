use super::*;

fn glob(p: &str) -> Glob {
    Glob::parse(p).unwrap()
}

#[test]
fn stars_stop_at_slashes_and_double_stars_do_not() {
    assert!(glob("src/*.rs").matches("src/lib.rs"));
    assert!(!glob("src/*.rs").matches("src/a/lib.rs"));
    assert!(glob("src/**").matches("src/a/b/c.rs"));
    assert!(glob("src/**/*.rs").matches("src/a/b.rs"));
    assert!(glob("src/?.rs").matches("src/a.rs"));
    assert!(!glob("src/?.rs").matches("src/ab.rs"));
    assert!(glob("docs/").matches("docs/README.md"), "a trailing slash is the directory and all under it");
    assert!(glob("Cargo.toml").matches("Cargo.toml"));
    assert!(!glob("Cargo.toml").matches("Cargo.tom"));
}

#[test]
fn overlap_is_decided_exactly() {
    let cases = [
        ("src/*.rs", "src/lib.rs", true),
        ("src/*.rs", "src/a/b.rs", false),
        ("src/*.rs", "docs/**", false),
        ("src/**", "src/a/b.rs", true),
        ("src/**", "**/*.rs", true),
        ("*.md", "docs/*.md", false),
        ("**/*.md", "docs/*.md", true),
        ("src/a*", "src/*b", true),
        ("src/a*c", "src/*b", false),
        ("src/?", "src/ab", false),
        ("a/", "a/b/c", true),
        ("a/", "ab", false),
        ("x", "x", true),
        ("x", "y", false),
    ];
    for (a, b, expected) in cases {
        assert_eq!(glob(a).overlaps(&glob(b)), expected, "{a} vs {b}");
        assert_eq!(glob(b).overlaps(&glob(a)), expected, "{b} vs {a} (symmetric)");
    }
}

#[test]
fn bad_patterns_are_refused_with_a_reason() {
    assert!(Glob::parse("").is_err());
    assert!(Glob::parse("a\u{1}b").is_err());
    assert!(Glob::parse(&"a".repeat(MAX_PATTERN_BYTES + 1)).is_err());
}

#[test]
fn overlap_agrees_with_matching_on_every_short_path() {
    // Every path of up to four characters from a small alphabet: two patterns overlap exactly
    // when one of these matches both (the patterns are short enough for that to be complete).
    let patterns = ["*", "**", "a*", "*b", "a/*", "a/**", "?/b", "**/b", "a?", "ab", "a/", "*/*", "a/**/b", "**/a"];
    let alphabet = ['a', 'b', '/'];
    let mut paths = vec![String::new()];
    for _ in 0..4 {
        let longer: Vec<String> = paths.iter().flat_map(|p| alphabet.iter().map(move |c| format!("{p}{c}"))).collect();
        paths.extend(longer);
    }
    paths.sort();
    paths.dedup();
    for a in patterns {
        for b in patterns {
            let witnessed = paths.iter().any(|p| glob(a).matches(p) && glob(b).matches(p));
            assert_eq!(glob(a).overlaps(&glob(b)), witnessed, "{a} vs {b}");
        }
    }
}

#[test]
fn a_crafted_pair_costs_a_refusal_not_the_writers_time() {
    // Stars between many distinct literals, and different characters just before the last:
    // no path matches both, but proving it means walking a large product of the two patterns
    // (neither starts nor ends with a literal, so no shortcut tells them apart).
    let stars: String = (0..60).map(|i| format!("*{}", char::from(b'a' + (i % 26) as u8))).collect();
    let (a, b) = (format!("{stars}*X?"), format!("{stars}*Y?"));
    // No path matches both: only the budget makes the answer yes, so this proves it stops.
    assert!(glob(&a).overlaps(&glob(&b)), "past its budget, a check answers that they overlap");
    assert!(!glob("*a*X?").overlaps(&glob("*a*Y?")), "a small pair is still decided exactly");
    // Literal heads or tails that differ tell a pair apart at no cost at all.
    let (x, y) = (format!("{stars}*X"), format!("{stars}*Y"));
    let mut none = 0;
    assert!(!glob(&x).overlaps_within(&glob(&y), &mut none), "different last characters");
    assert!(!glob("src/**").overlaps_within(&glob("docs/**"), &mut none), "different directories");
}

#[test]
fn one_budget_bounds_every_pair_a_request_checks() {
    // An attacker's reservation of 32 long patterns of `**` between distinct letters, and a
    // request of 32 more: 1,024 pairs, each of which could take a whole per-pair budget.
    let letters: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
    let crafted = |offset: usize| {
        let pattern: String = (0..86).map(|i| format!("**{}", letters[(offset + i) % letters.len()])).collect();
        glob(&pattern[..super::MAX_PATTERN_BYTES])
    };
    let theirs: Vec<Glob> = (0..32).map(crafted).collect();
    let wanted: Vec<Glob> = (5..37).map(crafted).collect();
    let mut budget = 1_000_000;
    let mut pairs = 0;
    for mine in &wanted {
        for other in &theirs {
            mine.overlaps_within(other, &mut budget);
            pairs += 1;
        }
    }
    assert_eq!((pairs, budget), (1024, 0), "the pairs share one budget, and spend it");
    // With nothing left, a pair is taken to overlap without a step; with a little, two plain
    // paths are still told apart.
    assert!(glob("*a?").overlaps_within(&glob("*b?"), &mut 0));
    let mut some = 1_000;
    assert!(!glob("*a?").overlaps_within(&glob("*b?"), &mut some));
    assert!(some < 1_000, "what a check takes is counted");
}

#[test]
fn a_double_star_segment_is_any_number_of_directories_none_included() {
    for (pattern, path, matched) in [
        ("a/**/b", "a/b", true),
        ("a/**/b", "a/x/b", true),
        ("a/**/b", "a/x/y/b", true),
        ("a/**/b", "a/xb", false),
        ("a/**/b", "ab", false),
        ("**/b.rs", "b.rs", true),
        ("**/b.rs", "src/b.rs", true),
        ("**/b.rs", "srcb.rs", false),
        ("src/**", "src/a/b", true),
        ("x**/b", "x/b", true),
    ] {
        assert_eq!(glob(pattern).matches(path), matched, "{pattern} on {path}");
    }
}

#[test]
fn a_path_is_written_one_way() {
    for bad in ["/src/a.rs", "./src/a.rs", "src//a.rs", "src/x/../a.rs", "src/./a.rs", ".."] {
        assert!(Glob::parse(bad).is_err(), "{bad} as a pattern");
        assert!(super::check_relative(bad).is_err(), "{bad} as a path");
    }
    for good in ["src/a.rs", "src/", "**/*.rs", ".github/workflows/ci.yml", "a..b"] {
        assert!(Glob::parse(good).is_ok(), "{good}");
    }
}
