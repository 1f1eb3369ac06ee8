//! Text rules shared by checkpoints and knowledge, with no IO: how many tokens a text costs
//! (`tokens`), which search terms it contributes (`analyze`) and how a document scores for a
//! query (`bm25`). Everything here is deterministic, so a note's stored terms and counts can
//! be recomputed from its text at any time.

pub mod analyze;
pub mod bm25;
pub mod tokens;

pub use analyze::terms;
pub use tokens::{TOKENIZER, count_tokens};
