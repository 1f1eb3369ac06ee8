use proptest::prelude::*;

use super::*;
use crate::MemoryView;

fn saved(view: &mut MemoryView, id: &str, content: &str, scope: Option<&str>, source: Option<&str>) {
    let request = KnowledgeSaveRequest {
        id: id.into(),
        content: content.into(),
        scope: scope.map(str::to_owned),
        source: source.map(str::to_owned),
        ..KnowledgeSaveRequest::default()
    };
    let ctx = WriteContext { now: UnixMillis(1), revision: view.revision };
    let Ok(plan) = plan_save(view, &prepare(request), &ctx);
    view.apply(&plan);
}

const WORDS: [&str; 12] =
    ["tokio", "runtime", "blocking", "vacuum", "index", "lease", "fencing", "token", "🙂", "naïve", "x", "\n\n"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the notes and the budget, the formatted context (headers included) and the
    /// items' total stay within the budget, and what is returned was ranked.
    #[test]
    fn recall_never_exceeds_its_budget(
        notes in prop::collection::vec((prop::collection::vec(0..WORDS.len(), 1..120), any::<bool>()), 1..25),
        budget in 1usize..600,
        limit in 1usize..12,
    ) {
        let mut view = MemoryView::default();
        for (i, (words, sourced)) in notes.iter().enumerate() {
            let content: Vec<&str> = words.iter().map(|w| WORDS[*w]).collect();
            saved(&mut view, &format!("note-{i}"), &content.join(" "), None, sourced.then_some("a source"));
        }
        let ask = Recall { query: "tokio blocking index token lease", scope: None, budget, limit };
        let Ok(result) = recall(&view, ask, UnixMillis(2), view.revision);
        prop_assert!(result.context_tokens <= budget);
        prop_assert_eq!(state_text::count_tokens(&result.formatted_context), result.context_tokens);
        prop_assert!(result.total_tokens <= budget);
        prop_assert!(result.items.len() <= limit);
        prop_assert_eq!(result.total_tokens, result.items.iter().map(|i| i.tokens).sum::<usize>());
        prop_assert!(result.items.windows(2).all(|w| w[0].score >= w[1].score));
        for item in &result.items {
            prop_assert_eq!(item.tokens, state_text::count_tokens(&item.content));
            prop_assert!(result.formatted_context.contains(item.content.trim_end()));
        }
    }
}

#[test]
fn a_budget_too_small_for_the_header_returns_nothing_and_counts_what_was_left_out() {
    let mut view = MemoryView::default();
    saved(&mut view, "a", "tokio runtime blocking", None, None);
    let ask = Recall { query: "tokio", scope: None, budget: 2, limit: 10 };
    let Ok(result) = recall(&view, ask, UnixMillis(2), view.revision);
    assert!(result.items.is_empty() && result.formatted_context.is_empty());
    assert_eq!((result.context_tokens, result.omitted), (0, 1));
}

#[test]
fn scope_keeps_that_scope_and_unscoped_notes() {
    let mut view = MemoryView::default();
    for (id, scope) in [("a", Some("rust")), ("b", Some("go")), ("c", None)] {
        saved(&mut view, id, "shared words about tokio", scope, None);
    }
    let ask = Recall { query: "tokio", scope: Some("rust"), budget: 2000, limit: 10 };
    let Ok(result) = recall(&view, ask, UnixMillis(2), view.revision);
    let mut ids: Vec<&str> = result.items.iter().map(|i| i.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["a", "c"]);
}
