//! Path patterns for reservations: `*` is any run of characters but `/`, `**` any run
//! including `/` (as a whole `**/` segment, any number of directories, none included), `?`
//! one character but `/`; a pattern ending in `/` is that directory and everything under it.
//! Everything else is literal, so a plain path reserves exactly itself.
//!
//! Two patterns conflict when some path matches both. That is decided exactly, by walking
//! both patterns together over the characters that could tell them apart (a product of the
//! two automata), so `src/*.rs` and `src/lib.rs` overlap while `src/*.rs` and `docs/**` and
//! `src/*.rs` and `src/a/b.rs` do not.

use std::collections::{BTreeSet, HashSet};

/// The longest pattern accepted, in bytes: the overlap check is quadratic in pattern length.
pub const MAX_PATTERN_BYTES: usize = 256;

/// Steps (a pair of positions times one character) an overlap check may take. Past it the
/// patterns are taken to overlap: a crafted pair then costs a refusal, never the writer's time.
const OVERLAP_STEPS: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Literal(char),
    /// `?`
    One,
    /// `*`
    Segment,
    /// `**`
    Any,
    /// `**/` as a whole segment: no directory or any number of them (`a/**/b` is `a/b` too).
    /// Always followed by `InDir`: between directories, it may end; inside a directory's name,
    /// only after the separator that closes it.
    AnyDirs,
    InDir,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    tokens: Vec<Token>,
    /// The literal characters every matching path starts with, and ends with.
    head: String,
    tail: String,
}

impl Glob {
    /// Reads a pattern; `Err` says what is wrong with it.
    pub fn parse(pattern: &str) -> Result<Glob, String> {
        if pattern.is_empty() {
            return Err("is empty: give a path or a pattern such as `src/**`".into());
        }
        if pattern.len() > MAX_PATTERN_BYTES {
            return Err(format!("is {} bytes, over the {MAX_PATTERN_BYTES}-byte limit", pattern.len()));
        }
        if let Some(c) = pattern.chars().find(|c| c.is_control()) {
            return Err(format!("contains the control character U+{:04X}", u32::from(c)));
        }
        check_relative(pattern.strip_suffix('/').unwrap_or(pattern))?;
        let mut tokens = Vec::new();
        let mut chars = pattern.chars().peekable();
        let mut segment_start = true;
        while let Some(c) = chars.next() {
            let at_start = segment_start;
            segment_start = c == '/';
            let token = match c {
                '*' if chars.peek() == Some(&'*') => {
                    chars.next();
                    while chars.peek() == Some(&'*') {
                        chars.next();
                    }
                    if at_start && chars.peek() == Some(&'/') {
                        chars.next();
                        segment_start = true;
                        tokens.push(Token::AnyDirs);
                        Token::InDir
                    } else {
                        Token::Any
                    }
                }
                '*' => Token::Segment,
                '?' => Token::One,
                c => Token::Literal(c),
            };
            tokens.push(token);
        }
        if pattern.ends_with('/') {
            tokens.push(Token::Any);
        }
        let literal = |token: &Token| match token {
            Token::Literal(c) => Some(*c),
            _ => None,
        };
        let head: String = tokens.iter().map_while(literal).collect();
        let mut tail: Vec<char> = tokens.iter().rev().map_while(literal).collect();
        tail.reverse();
        Ok(Glob { tokens, head, tail: tail.into_iter().collect() })
    }

    /// Whether `path` matches the pattern.
    pub fn matches(&self, path: &str) -> bool {
        let mut states = self.closure([0].into_iter().collect());
        for c in path.chars() {
            states = self.closure(states.iter().flat_map(|&i| self.step(i, c)).collect());
            if states.is_empty() {
                return false;
            }
        }
        states.contains(&self.tokens.len())
    }

    /// Whether some path matches both patterns (or the check ran past its budget, when it
    /// answers yes: a reservation is refused rather than the writer stalled).
    pub fn overlaps(&self, other: &Glob) -> bool {
        let mut budget = OVERLAP_STEPS;
        self.overlaps_within(other, &mut budget)
    }

    /// Like [`Glob::overlaps`], spending its steps from `budget`, shared by every pair one
    /// request checks: 32 crafted patterns against many reservations cost the budget once,
    /// not once per pair. With the budget spent, the answer is yes without looking.
    pub fn overlaps_within(&self, other: &Glob, budget: &mut usize) -> bool {
        // Every path a pattern matches starts with its literal head and ends with its literal
        // tail: two patterns whose heads (or tails) differ where both have characters share no
        // path, and cost no steps (most pairs of a real repository: other directories, other
        // files).
        let heads_agree = self.head.starts_with(&other.head) || other.head.starts_with(&self.head);
        let tails_agree = self.tail.ends_with(&other.tail) || other.tail.ends_with(&self.tail);
        if !heads_agree || !tails_agree {
            return false;
        }
        let allowed = (*budget).min(OVERLAP_STEPS);
        let mut steps = 0usize;
        let overlap = self.walk_both(other, allowed, &mut steps);
        *budget = budget.saturating_sub(steps);
        overlap
    }

    /// The product walk: true once both patterns can end together, or once `steps` passes
    /// `allowed`.
    fn walk_both(&self, other: &Glob, allowed: usize, steps: &mut usize) -> bool {
        if allowed == 0 {
            return true;
        }
        // Characters that could make the two differ: every literal of either, the separator,
        // and one character that is none of those (what `?` and `*` match besides).
        let mut alphabet: BTreeSet<char> = self.literals().chain(other.literals()).collect();
        alphabet.insert('/');
        let fresh = (0x4E00u32..).filter_map(char::from_u32).find(|c| !alphabet.contains(c)).unwrap_or('\u{FFFD}');
        alphabet.insert(fresh);

        let start = |glob: &Glob| glob.closure([0].into_iter().collect());
        let mut seen: HashSet<(usize, usize)> = HashSet::new();
        let mut todo: Vec<(usize, usize)> = Vec::new();
        for i in start(self) {
            for j in start(other) {
                if seen.insert((i, j)) {
                    todo.push((i, j));
                }
            }
        }
        while let Some((i, j)) = todo.pop() {
            if i == self.tokens.len() && j == other.tokens.len() {
                return true;
            }
            *steps += alphabet.len();
            if *steps > allowed {
                return true;
            }
            for &c in &alphabet {
                let mine = self.closure(self.step(i, c).collect());
                if mine.is_empty() {
                    continue;
                }
                let theirs = other.closure(other.step(j, c).collect());
                *steps += mine.len() * theirs.len();
                for &a in &mine {
                    for &b in &theirs {
                        if seen.insert((a, b)) {
                            todo.push((a, b));
                        }
                    }
                }
            }
        }
        false
    }

    fn literals(&self) -> impl Iterator<Item = char> + '_ {
        self.tokens.iter().filter_map(|t| match t {
            Token::Literal(c) => Some(*c),
            _ => None,
        })
    }

    /// Positions reachable from `at` on `c`.
    fn step(&self, at: usize, c: char) -> impl Iterator<Item = usize> {
        let (stay, next) = match self.tokens.get(at) {
            Some(Token::Literal(l)) if *l == c => (None, Some(at + 1)),
            Some(Token::One) if c != '/' => (None, Some(at + 1)),
            // A star stays where it is after taking a character.
            Some(Token::Segment) if c != '/' => (Some(at), None),
            Some(Token::Any) => (Some(at), None),
            // Between directories: a separator keeps it there, anything else enters a name.
            Some(Token::AnyDirs) if c == '/' => (Some(at), None),
            Some(Token::AnyDirs) => (Some(at + 1), None),
            // In a directory's name until the separator that closes it.
            Some(Token::InDir) if c == '/' => (Some(at - 1), None),
            Some(Token::InDir) => (Some(at), None),
            _ => (None, None),
        };
        stay.into_iter().chain(next)
    }

    /// `states` and every position reached from them by letting stars match nothing.
    fn closure(&self, mut states: BTreeSet<usize>) -> BTreeSet<usize> {
        let mut todo: Vec<usize> = states.iter().copied().collect();
        while let Some(at) = todo.pop() {
            let skip = match self.tokens.get(at) {
                Some(Token::Segment | Token::Any) => Some(at + 1),
                // No directory at all: past `InDir` too.
                Some(Token::AnyDirs) => Some(at + 2),
                _ => None,
            };
            if let Some(next) = skip
                && states.insert(next)
            {
                todo.push(next);
            }
        }
        states
    }
}

/// Refuses what would name one file two ways: a leading `/`, an empty segment (`a//b`), and
/// `.` or `..` segments. Paths are relative to their scope and written one way, or two
/// reservations of `src/a.rs` and `./src/a.rs` would both be granted.
pub fn check_relative(path: &str) -> Result<(), String> {
    if path.starts_with('/') {
        return Err("starts with `/`: paths are relative to the scope, like `src/lib.rs`".into());
    }
    for segment in path.split('/') {
        match segment {
            "" => return Err("has an empty segment (`//`): write each path one way".into()),
            "." | ".." => return Err(format!("has a `{segment}` segment: write the path without it")),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
