//! Okapi BM25, the ranking function of Lucene and SQLite FTS5, with the usual constants.

/// How quickly repeating a term stops adding to a score.
pub const K1: f64 = 1.2;
/// How much a long document is penalised for its length (0 = not at all, 1 = fully).
pub const B: f64 = 0.75;

/// What the index knows about the corpus as a whole.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Corpus {
    /// Documents indexed.
    pub documents: u64,
    /// Sum of their lengths, in (weighted) term occurrences.
    pub total_length: u64,
}

impl Corpus {
    fn average_length(&self) -> f64 {
        if self.documents == 0 { 1.0 } else { (self.total_length as f64 / self.documents as f64).max(1.0) }
    }

    /// A term's weight: rare terms count for more. Never negative (the +1 form), so a term in
    /// most documents still counts a little rather than against a match.
    pub fn idf(&self, documents_with_term: u64) -> f64 {
        let n = self.documents as f64;
        let df = documents_with_term.min(self.documents) as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// One query term's contribution to one document's score.
    pub fn score(&self, idf: f64, term_frequency: u64, document_length: u64) -> f64 {
        let tf = term_frequency as f64;
        let norm = 1.0 - B + B * document_length as f64 / self.average_length();
        idf * tf * (K1 + 1.0) / (tf + K1 * norm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rarer_terms_and_more_occurrences_score_higher_shorter_documents_too() {
        let corpus = Corpus { documents: 100, total_length: 10_000 };
        assert!(corpus.idf(1) > corpus.idf(50));
        assert!(corpus.idf(100) > 0.0);
        let idf = corpus.idf(5);
        assert!(corpus.score(idf, 3, 100) > corpus.score(idf, 1, 100));
        assert!(corpus.score(idf, 1, 50) > corpus.score(idf, 1, 200));
    }

    #[test]
    fn an_empty_corpus_does_not_divide_by_zero() {
        let corpus = Corpus { documents: 0, total_length: 0 };
        assert!(corpus.score(corpus.idf(0), 1, 10).is_finite());
    }
}
