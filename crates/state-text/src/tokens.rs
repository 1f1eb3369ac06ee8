//! Token counts with OpenAI's `o200k_base` byte-pair encoding (GPT-4o and later), whose
//! vocabulary is compiled into the binary: counting never touches the network or the disk.
//!
//! No model's tokenizer is the same as another's: Claude has no public offline tokenizer,
//! and o200k is reported to undercount Claude by roughly 15-20% on English prose and more on
//! code. Budgets are therefore budgets in o200k tokens; callers packing for another model
//! leave themselves that margin.

use std::sync::OnceLock;

/// The name of the encoding every count uses, reported beside counts.
pub const TOKENIZER: &str = "o200k_base";

fn encoding() -> Option<&'static tiktoken::CoreBpe> {
    // Decompressing and indexing the vocabulary takes ~130 ms and ~20 MB, so it happens on
    // first use, once per process.
    static ENCODING: OnceLock<Option<&'static tiktoken::CoreBpe>> = OnceLock::new();
    *ENCODING.get_or_init(|| tiktoken::get_encoding(TOKENIZER))
}

/// How many `o200k_base` tokens `text` encodes to. Special-token markers in the text are
/// counted as the ordinary text they are.
pub fn count_tokens(text: &str) -> usize {
    match encoding() {
        Some(bpe) => bpe.count(text),
        // The vocabulary is a compile-time feature of this crate, so this cannot happen in a
        // build of it; if it ever did, over-estimating keeps every budget safe.
        None => text.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_the_published_encoding() {
        // Reference counts from OpenAI's tiktoken for o200k_base.
        assert_eq!(count_tokens("hello world"), 2);
        assert_eq!(count_tokens(""), 0);
        assert_eq!(count_tokens("The quick brown fox jumps over the lazy dog."), 10);
    }

    #[test]
    fn special_token_markers_are_ordinary_text() {
        assert!(count_tokens("<|endoftext|>") > 1);
    }
}
