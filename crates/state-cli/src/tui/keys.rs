//! The key browser's data: every key name (loaded a page at a time, then kept current by
//! watch), its prefix groups and the filtered view of both. Only names, versions and expiry
//! are held, so 100,000 keys cost a few megabytes; values are read when a key is opened.

use std::collections::HashMap;

use state_core::UnixMillis;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeyRow {
    pub(crate) key: String,
    pub(crate) version: u64,
    pub(crate) mod_revision: u64,
    pub(crate) expires_at: Option<UnixMillis>,
}

/// A key's group: its first segment, through the first `/` or `:` (empty when it has none).
pub(crate) fn group_of(key: &str) -> &str {
    match key.find(['/', ':']) {
        Some(i) => &key[..=i],
        None => "",
    }
}

/// A change to a key: `row` for a write, `None` for a delete or an expiry at `revision`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    pub(crate) key: String,
    pub(crate) row: Option<KeyRow>,
    pub(crate) revision: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Keys {
    /// Sorted by key.
    rows: Vec<KeyRow>,
    /// Keys deleted by a change at this revision: a page read before it must not bring them back.
    deleted: HashMap<String, u64>,
    /// Each group with its key count, in key order.
    groups: Vec<(String, usize)>,
    /// Indices into `rows` that the group and the filter let through.
    matches: Vec<usize>,
    group: Option<String>,
    filter: String,
}

impl Keys {
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    pub(crate) fn matches(&self) -> &[usize] {
        &self.matches
    }

    /// The `n`th key the filter lets through.
    pub(crate) fn matched(&self, n: usize) -> Option<&KeyRow> {
        self.matches.get(n).and_then(|&i| self.rows.get(i))
    }

    pub(crate) fn groups(&self) -> &[(String, usize)] {
        &self.groups
    }

    pub(crate) fn filter(&self) -> &str {
        &self.filter
    }

    /// The group the list is narrowed to, if any.
    pub(crate) fn group(&self) -> Option<&str> {
        self.group.as_deref()
    }

    /// Where `key` is among the matches, or where it would be: the key after it once it is gone.
    pub(crate) fn position(&self, key: &str) -> usize {
        self.matches.partition_point(|&i| self.rows[i].key.as_str() < key)
    }

    /// Rows of a listing page; a row older than what a change already said is skipped.
    pub(crate) fn merge_page(&mut self, page: Vec<KeyRow>) {
        for row in page {
            if self.deleted.get(&row.key).is_some_and(|&at| at >= row.mod_revision) {
                continue;
            }
            self.upsert(row);
        }
        self.refresh();
    }

    /// Changes the watch delivered, applied together: one refresh for a whole batch keeps a
    /// busy store from costing a pass over every name per change.
    pub(crate) fn apply(&mut self, changes: Vec<Change>) {
        for change in changes {
            match change.row {
                Some(row) => {
                    self.deleted.remove(&row.key);
                    self.upsert(row);
                }
                None => {
                    if let Ok(i) = self.rows.binary_search_by(|r| r.key.cmp(&change.key))
                        && self.rows[i].mod_revision <= change.revision
                    {
                        self.rows.remove(i);
                    }
                    self.deleted.insert(change.key, change.revision);
                }
            }
        }
        self.refresh();
    }

    fn upsert(&mut self, row: KeyRow) {
        match self.rows.binary_search_by(|r| r.key.cmp(&row.key)) {
            Ok(i) if self.rows[i].mod_revision <= row.mod_revision => self.rows[i] = row,
            Ok(_) => {}
            Err(i) => self.rows.insert(i, row),
        }
    }

    pub(crate) fn set_filter(&mut self, filter: String) {
        self.filter = filter;
        self.refresh();
    }

    pub(crate) fn set_group(&mut self, group: Option<String>) {
        self.group = group;
        self.refresh();
    }

    /// Recomputes groups and matches: one pass over the names, a few milliseconds at 100,000.
    fn refresh(&mut self) {
        self.groups.clear();
        for row in &self.rows {
            let group = group_of(&row.key);
            match self.groups.last_mut() {
                Some((last, count)) if last == group => *count += 1,
                _ => self.groups.push((group.to_owned(), 1)),
            }
        }
        // Keys without a separator sort among the groups; gather them under one entry.
        if self.groups.iter().filter(|(g, _)| g.is_empty()).count() > 1 {
            let loose: usize = self.groups.iter().filter(|(g, _)| g.is_empty()).map(|(_, n)| n).sum();
            self.groups.retain(|(g, _)| !g.is_empty());
            self.groups.insert(0, (String::new(), loose));
        }
        // Smart case, like ripgrep: a filter with a capital letter is case-sensitive.
        let sensitive = self.filter.chars().any(char::is_uppercase);
        let needle = if sensitive { self.filter.clone() } else { self.filter.to_lowercase() };
        let group = self.group.as_deref();
        self.matches = self
            .rows
            .iter()
            .enumerate()
            .filter(|(_, row)| group.is_none_or(|g| group_of(&row.key) == g))
            .filter(|(_, row)| {
                needle.is_empty()
                    || if sensitive { row.key.contains(&needle) } else { row.key.to_lowercase().contains(&needle) }
            })
            .map(|(i, _)| i)
            .collect();
    }
}
