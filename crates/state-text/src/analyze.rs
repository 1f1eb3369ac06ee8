//! The search analyzer: text -> the terms it is indexed and queried under. Words are runs of
//! letters and digits, lowercased; English stop words are dropped; the rest are reduced to
//! their Snowball (Porter 2) English stem, so "retrying", "retries" and "retried" meet.

use std::sync::OnceLock;

use rust_stemmers::{Algorithm, Stemmer};

/// Longer words are not indexed: they are hashes, base64 or noise, never what anyone types.
const MAX_WORD_CHARS: usize = 40;

/// Common English words that say nothing about what a text is about.
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "could",
    "did",
    "do",
    "does",
    "doing",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "has",
    "have",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "itself",
    "just",
    "me",
    "more",
    "most",
    "my",
    "myself",
    "no",
    "nor",
    "not",
    "now",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "same",
    "she",
    "should",
    "so",
    "some",
    "such",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "would",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

fn stemmer() -> &'static Stemmer {
    static STEMMER: OnceLock<Stemmer> = OnceLock::new();
    STEMMER.get_or_init(|| Stemmer::create(Algorithm::English))
}

fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// The terms of `text`, in order, repeats kept (term frequency counts them).
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
            continue;
        }
        if !word.is_empty() {
            if word.chars().count() <= MAX_WORD_CHARS && !is_stop_word(&word) {
                out.push(stemmer().stem(&word).into_owned());
            }
            word.clear();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn inflections_meet_and_stop_words_go() {
        assert_eq!(terms("Retrying the retries"), ["retri", "retri"]);
        assert_eq!(terms("Indexed INDEXES, index!"), ["index", "index", "index"]);
        assert_eq!(terms("what is it"), Vec::<String>::new());
    }

    #[test]
    fn words_split_on_punctuation_and_keep_digits_and_unicode() {
        assert_eq!(terms("redb_v2 http/2 Zürich"), ["redb", "v2", "http", "2", "zürich"]);
    }

    #[test]
    fn overlong_words_are_not_terms() {
        assert_eq!(terms(&"x".repeat(41)), Vec::<String>::new());
    }
}
