//! Export and import: the engine verbs over `state_core::transfer`. Search terms of imported
//! notes and checkpoints are computed before the chunk is queued, so the writer only applies.

use state_core::idempotency::Once;
use state_core::ops::Paged;
use state_core::ops::transfer::{ExportRequest, ExportResult, ImportRequest, ImportResult};
use state_core::transfer;

use super::text::off_thread;
use super::view::TxnView;
use super::{Engine, ReadCost};
use crate::error::EngineError;

impl Engine {
    pub async fn export(&self, req: ExportRequest) -> Result<ExportResult, EngineError> {
        req.validate()?;
        self.read(ReadCost::Scan, move |txn, now| {
            let (page, after) = (req.page_size()?, req.start_after()?);
            let (records, next_cursor) = transfer::export_page(&TxnView(txn), after.as_deref(), page, now)?;
            Ok(ExportResult { records, next_cursor, revision: txn.revision()? })
        })
        .await
    }

    /// Writes one chunk of dumped records in one transaction.
    pub async fn import(&self, req: ImportRequest) -> Result<ImportResult, EngineError> {
        req.validate()?;
        let once = Once::of(&req)?;
        let dry_run = req.dry_run;
        let prepared = off_thread(move || transfer::prepare(req.records)).await?;
        self.plan(once, move |view, ctx| transfer::plan_import(view, &prepared, dry_run, ctx)).await
    }
}
