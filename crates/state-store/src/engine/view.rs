//! The core's `StateView` over a backend transaction, so core planners and readers can look
//! at stored entries while the IO stays here.

use state_core::{Entry, StateView};

use crate::backend::ReadTxn;
use crate::error::StorageError;

pub(crate) struct TxnView<'a>(pub(crate) &'a dyn ReadTxn);

impl StateView for TxnView<'_> {
    type Error = StorageError;

    fn get(&self, key: &str) -> Result<Option<Entry>, StorageError> {
        self.0.get(key)
    }

    fn scan(
        &self,
        prefix: &str,
        after: Option<&str>,
        visit: &mut dyn FnMut(Entry) -> bool,
    ) -> Result<(), StorageError> {
        self.0.scan(prefix, after, visit)
    }
}
