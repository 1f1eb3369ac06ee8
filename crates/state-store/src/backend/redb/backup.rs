//! A consistent copy of a live database: one read transaction (a snapshot of the last commit,
//! taken while the writer goes on) copied table by table into a new file, which becomes the
//! backup only once complete and on disk.

use std::path::{Path, PathBuf};

use redb::{Database, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};

use super::{ENTRIES, EVENTS, EXPIRY, KEY_EVENTS, META, META_REVISION, RECORDS, identity, storage};
use crate::backend::Backup;
use crate::error::StorageError;
use crate::files;

pub(super) fn backup(source: &Database, to: &Path) -> Result<Backup, StorageError> {
    if to.exists() {
        return Err(StorageError::Other(format!("{} exists: a backup never overwrites a file", to.display())));
    }
    let snapshot = source.begin_read().map_err(storage)?;
    let revision = {
        let meta = snapshot.open_table(META).map_err(storage)?;
        meta.get(META_REVISION).map_err(storage)?.map_or(0, |g| g.value())
    };
    let partial = partial_path(to);
    let _ = std::fs::remove_file(&partial);
    let written = copy_into(&snapshot, &partial);
    if let Err(error) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(error);
    }
    std::fs::rename(&partial, to).map_err(|e| StorageError::Io(format!("cannot move the backup into place: {e}")))?;
    if let Some(dir) = to.parent().filter(|d| !d.as_os_str().is_empty()) {
        // The rename is durable only once the directory is.
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    let bytes = std::fs::metadata(to).map_or(0, |m| m.len());
    Ok(Backup { revision, bytes })
}

fn partial_path(to: &Path) -> PathBuf {
    let mut name = to.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

fn copy_into(snapshot: &ReadTransaction, path: &Path) -> Result<(), StorageError> {
    files::private_file()
        .create_new(true)
        .write(true)
        .read(true)
        .open(path)
        .map_err(|e| StorageError::Io(format!("cannot create {}: {e}", path.display())))?;
    let target = Database::create(path).map_err(storage)?;
    let txn = target.begin_write().map_err(storage)?;
    copy(snapshot, &txn, ENTRIES)?;
    copy(snapshot, &txn, RECORDS)?;
    copy(snapshot, &txn, EXPIRY)?;
    copy(snapshot, &txn, EVENTS)?;
    copy(snapshot, &txn, KEY_EVENTS)?;
    copy(snapshot, &txn, META)?;
    {
        // A database of its own: it gets its own identity when first opened, and needs no log
        // (everything is in the copy), whatever the store it was copied from said of its log.
        let mut meta = txn.open_table(META).map_err(storage)?;
        for name in [identity::META_STORE_ID, identity::META_LOG_EPOCH, identity::META_LOG_OPEN] {
            meta.remove(name).map_err(storage)?;
        }
    }
    // A durable commit: redb syncs the file before it returns.
    txn.commit().map_err(storage)?;
    Ok(())
}

fn copy<K: redb::Key + 'static, V: redb::Value + 'static>(
    from: &ReadTransaction,
    to: &WriteTransaction,
    table: TableDefinition<K, V>,
) -> Result<(), StorageError> {
    let source = from.open_table(table).map_err(storage)?;
    let mut target = to.open_table(table).map_err(storage)?;
    for row in source.iter().map_err(storage)? {
        let (key, value) = row.map_err(storage)?;
        target.insert(key.value(), value.value()).map_err(storage)?;
    }
    Ok(())
}
