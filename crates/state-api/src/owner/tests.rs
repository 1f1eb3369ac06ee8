use std::time::Duration;

use super::*;

/// Whether `take` completes within a short while (it waits for credit otherwise).
async fn goes(credit: &Credit, bytes: u64) -> bool {
    tokio::time::timeout(Duration::from_millis(50), credit.take(bytes)).await.is_ok()
}

#[tokio::test]
async fn a_watch_sends_no_more_than_its_window_ahead_of_what_was_taken() {
    let credit = Credit::new(Some(1000));
    assert!(goes(&credit, 600).await);
    assert!(goes(&credit, 400).await);
    assert!(!goes(&credit, 1).await, "the window is used up");
    credit.grant(300);
    assert!(!goes(&credit, 400).await, "300 of credit does not send 400");
    assert!(goes(&credit, 300).await);
    // A frame larger than the window goes once the whole window is free, alone.
    credit.grant(1000);
    assert!(goes(&credit, 5000).await);
    assert!(!goes(&credit, 1).await);
    // A client without flow control is never held back.
    let unlimited = Credit::new(None);
    assert!(goes(&unlimited, u64::MAX).await);
}
