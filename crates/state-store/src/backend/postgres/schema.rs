//! The tables, the migrations that create them, and the SQL every transaction runs, written
//! once per schema name at open.
//!
//! Tables (in the schema the store was opened with):
//! - `meta`       one row: revision, compacted revision, user key count, format. Every write
//!   transaction locks this row first (`FOR UPDATE`), which is what serialises writers across
//!   replicas and keeps revisions gapless and in commit order.
//! - `entries`    key -> current entry (user keys and the store's own records; `system` tells
//!   them apart). Keys use the "C" collation, so their order is Rust's string order.
//! - `events`     (revision, seq) -> event: the history log, and the resume point of watches.
//! - `migrations` which of [`MIGRATIONS`] have been applied.

/// Applied in order, each once, under an advisory lock; never edited once released (add one).
pub(super) const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        r#"
CREATE TABLE {s}.meta (
    id smallint PRIMARY KEY CHECK (id = 1),
    revision bigint NOT NULL,
    compacted bigint NOT NULL,
    user_keys bigint NOT NULL,
    format integer NOT NULL
);
INSERT INTO {s}.meta VALUES (1, 0, 0, 0, 1);
CREATE TABLE {s}.entries (
    key text COLLATE "C" PRIMARY KEY,
    system boolean NOT NULL,
    value text NOT NULL,
    version bigint NOT NULL,
    create_revision bigint NOT NULL,
    mod_revision bigint NOT NULL,
    updated_at bigint NOT NULL,
    expires_at bigint,
    agent_id text
);
CREATE INDEX entries_expiry ON {s}.entries (expires_at, key) WHERE expires_at IS NOT NULL;
CREATE TABLE {s}.events (
    revision bigint NOT NULL,
    seq integer NOT NULL,
    key text COLLATE "C" NOT NULL,
    kind smallint NOT NULL,
    action smallint NOT NULL,
    version bigint NOT NULL,
    agent_id text,
    time bigint NOT NULL,
    value text,
    PRIMARY KEY (revision, seq)
);
CREATE INDEX events_key ON {s}.events (key, revision, seq);
"#,
    ),
    // Who made each change (the token or OAuth subject), for audit. Older events have none.
    (2, "ALTER TABLE {s}.events ADD COLUMN by_principal text;"),
    // Checks a guarded statement's row count inside the database, so a commit can go out with
    // its writes: a failed guard aborts the transaction, which turns the COMMIT into a
    // rollback. Raised as a serialization failure: the batch is planned again.
    (
        3,
        r#"
CREATE FUNCTION {s}.guard(held boolean) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF NOT held THEN
        RAISE EXCEPTION 'a key this transaction read changed before it wrote it'
            USING ERRCODE = 'serialization_failure';
    END IF;
    RETURN true;
END $$;
"#,
    ),
];

/// The storage format this build reads and writes (the `meta.format` column).
pub(super) const STORE_FORMAT: i32 = 1;

/// Columns of an entry, in the order [`super::txn`] decodes them.
const ENTRY_COLUMNS: &str = "key, value, version, create_revision, mod_revision, updated_at, expires_at, agent_id";
/// Columns of an event, in the order [`super::txn`] decodes them.
const EVENT_COLUMNS: &str = "revision, key, kind, action, version, agent_id, time, value, by_principal";

/// Every statement, with the schema spliced in once.
#[derive(Debug)]
pub(super) struct Sql {
    pub(super) schema: String,
    pub(super) channel: String,
    pub(super) lock_meta: String,
    pub(super) read_meta_unlocked: String,
    pub(super) read_meta: String,
    /// The `application_name` every connection of every replica of this store starts with.
    pub(super) replica_name_prefix: String,
    pub(super) count_replicas: String,
    pub(super) get: String,
    pub(super) get_many: String,
    pub(super) get_now: String,
    pub(super) scan_from: String,
    pub(super) scan_after: String,
    pub(super) expired: String,
    pub(super) history: [String; 8],
    pub(super) upsert_many: String,
    pub(super) insert_absent_many: String,
    pub(super) update_version_many: String,
    pub(super) delete_many: String,
    pub(super) delete_version_many: String,
    /// The guarded statements with their row count checked by the database (`guard`), for a
    /// flush sent together with COMMIT; the expected count is the last parameter.
    pub(super) update_version_checked: String,
    pub(super) insert_absent_checked: String,
    pub(super) delete_version_checked: String,
    pub(super) append: String,
    pub(super) append_unguarded: String,
    pub(super) set_revision: String,
    pub(super) set_revision_unguarded: String,
    pub(super) add_user_keys: String,
    pub(super) clear: String,
    pub(super) compaction_boundary: String,
    pub(super) compact: String,
    pub(super) events_left: String,
    pub(super) set_compacted: String,
    pub(super) notify: String,
}

impl Sql {
    pub(super) fn new(schema: &str) -> Sql {
        let s = quote_ident(schema);
        let entry_arrays = "$1::text[], $2::bool[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], \
            $7::bigint[], $8::bigint[], $9::text[]";
        let set_all = "system = EXCLUDED.system, value = EXCLUDED.value, version = EXCLUDED.version, \
            create_revision = EXCLUDED.create_revision, mod_revision = EXCLUDED.mod_revision, \
            updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at, agent_id = EXCLUDED.agent_id";
        let insert = format!(
            "INSERT INTO {s}.entries (key, system, value, version, create_revision, mod_revision, updated_at, expires_at, agent_id) \
             SELECT * FROM unnest({entry_arrays})"
        );
        // History queries: by key filter (all, user keys, exact, prefix) and direction. Within
        // a revision events always come in append order.
        // (Every statement names $4, so its type is known even where the filter ignores it.)
        let filters = [
            "$4::text IS NOT NULL",
            "NOT starts_with(key, E'\\x01') AND $4::text IS NOT NULL",
            "key = $4::text",
            "starts_with(key, $4::text)",
        ];
        let history = |filter: &str, descending: bool| {
            let order = if descending { "revision DESC, seq" } else { "revision, seq" };
            let resume = if descending {
                "(revision < $5 OR (revision = $5 AND seq > $6))"
            } else {
                "(revision, seq) > ($5, $6)"
            };
            format!(
                "SELECT {EVENT_COLUMNS}, seq FROM {s}.events WHERE revision BETWEEN $1 AND $2 AND {filter} AND {resume} \
                 ORDER BY {order} LIMIT $3"
            )
        };
        let mut sql = Sql {
            // A plain identifier within PostgreSQL's 63 bytes; stores whose names collide
            // here only hear each other's doorbells, which cost a read, never correctness.
            channel: format!(
                "state_commits_{}",
                schema.chars().filter(char::is_ascii_alphanumeric).take(40).collect::<String>()
            ),
            lock_meta: format!(
                "SELECT revision, compacted, (extract(epoch FROM clock_timestamp()) * 1000)::bigint FROM {s}.meta WHERE id = 1 FOR UPDATE"
            ),
            read_meta_unlocked: format!(
                "SELECT revision, compacted, (extract(epoch FROM clock_timestamp()) * 1000)::bigint FROM {s}.meta WHERE id = 1"
            ),
            read_meta: format!("SELECT revision, compacted, user_keys FROM {s}.meta WHERE id = 1"),
            // Within the 63 bytes PostgreSQL keeps of a name, with room for the process's part.
            replica_name_prefix: format!("state:{}:", truncated(schema, 32)),
            count_replicas: "SELECT count(DISTINCT application_name) FROM pg_stat_activity \
                 WHERE starts_with(application_name, $1)"
                .to_owned(),
            get: format!("SELECT {ENTRY_COLUMNS} FROM {s}.entries WHERE key = $1"),
            get_many: format!("SELECT {ENTRY_COLUMNS} FROM {s}.entries WHERE key = ANY($1)"),
            // One statement is one snapshot: the revision and the key, without BEGIN/COMMIT.
            get_now: format!(
                "SELECT {}, m.revision FROM {s}.meta m LEFT JOIN {s}.entries e ON e.key = $1 WHERE m.id = 1",
                ENTRY_COLUMNS.split(", ").map(|c| format!("e.{c}")).collect::<Vec<_>>().join(", ")
            ),
            scan_from: format!("SELECT {ENTRY_COLUMNS} FROM {s}.entries WHERE key >= $1 ORDER BY key LIMIT $2"),
            scan_after: format!("SELECT {ENTRY_COLUMNS} FROM {s}.entries WHERE key > $1 ORDER BY key LIMIT $2"),
            expired: format!(
                "SELECT {ENTRY_COLUMNS} FROM {s}.entries WHERE expires_at <= $1 ORDER BY expires_at, key LIMIT $2"
            ),
            history: [
                history(filters[0], false),
                history(filters[1], false),
                history(filters[2], false),
                history(filters[3], false),
                history(filters[0], true),
                history(filters[1], true),
                history(filters[2], true),
                history(filters[3], true),
            ],
            // Buffered writes go in one statement per kind, each row as an element of
            // parallel arrays. A guarded kind must touch every row it names (see txn.rs).
            upsert_many: format!("{insert} ON CONFLICT (key) DO UPDATE SET {set_all} RETURNING system, (xmax = 0)"),
            insert_absent_many: format!("{insert} ON CONFLICT (key) DO NOTHING RETURNING system"),
            update_version_many: format!(
                "UPDATE {s}.entries e SET system = u.system, value = u.value, version = u.version, \
                 create_revision = u.create_revision, mod_revision = u.mod_revision, updated_at = u.updated_at, \
                 expires_at = u.expires_at, agent_id = u.agent_id \
                 FROM unnest({entry_arrays}, $10::bigint[]) \
                 AS u(key, system, value, version, create_revision, mod_revision, updated_at, expires_at, agent_id, expected) \
                 WHERE e.key = u.key COLLATE \"C\" AND e.version = u.expected RETURNING e.system"
            ),
            delete_many: format!("DELETE FROM {s}.entries WHERE key = ANY($1::text[]) RETURNING system"),
            delete_version_many: format!(
                "DELETE FROM {s}.entries e USING unnest($1::text[], $2::bigint[]) AS u(key, expected) \
                 WHERE e.key = u.key COLLATE \"C\" AND e.version = u.expected RETURNING e.system"
            ),
            append: format!(
                "INSERT INTO {s}.events (revision, seq, key, kind, action, version, agent_id, time, value, by_principal) \
                 SELECT * FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::smallint[], $5::smallint[], \
                 $6::bigint[], $7::text[], $8::bigint[], $9::text[], $10::text[])"
            ),
            append_unguarded: format!(
                "INSERT INTO {s}.events (revision, seq, key, kind, action, version, agent_id, time, value, by_principal) \
                 SELECT * FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::smallint[], $5::smallint[], \
                 $6::bigint[], $7::text[], $8::bigint[], $9::text[], $10::text[]) ON CONFLICT DO NOTHING"
            ),
            set_revision: format!("UPDATE {s}.meta SET revision = $1 WHERE id = 1"),
            set_revision_unguarded: format!("UPDATE {s}.meta SET revision = greatest(revision, $1) WHERE id = 1"),
            add_user_keys: format!("UPDATE {s}.meta SET user_keys = user_keys + $1 WHERE id = 1"),
            clear: format!(
                "WITH gone AS (DELETE FROM {s}.entries RETURNING 1), history AS (DELETE FROM {s}.events RETURNING 1) \
                 SELECT (SELECT count(*) FROM gone)"
            ),
            compaction_boundary: format!(
                "SELECT revision FROM {s}.events WHERE revision > $1 AND revision <= $2 ORDER BY revision, seq OFFSET $3 LIMIT 1"
            ),
            compact: format!("DELETE FROM {s}.events WHERE revision > $1 AND revision <= $2"),
            events_left: format!("SELECT EXISTS (SELECT 1 FROM {s}.events WHERE revision > $1 AND revision <= $2)"),
            set_compacted: format!("UPDATE {s}.meta SET compacted = $1 WHERE id = 1"),
            notify: "SELECT pg_notify($1, $2)".to_owned(),
            update_version_checked: String::new(),
            insert_absent_checked: String::new(),
            delete_version_checked: String::new(),
            schema: s,
        };
        let checked = |statement: &str, count: usize| {
            format!("WITH w AS ({statement}) SELECT {}.guard((SELECT count(*) FROM w) = ${count})", sql.schema)
        };
        (sql.update_version_checked, sql.insert_absent_checked, sql.delete_version_checked) = (
            checked(&sql.update_version_many, 11),
            checked(&sql.insert_absent_many, 10),
            checked(&sql.delete_version_many, 3),
        );
        sql
    }

    /// The history statement for a filter kind (0 all, 1 user keys, 2 exact, 3 prefix).
    pub(super) fn history(&self, filter: usize, descending: bool) -> &str {
        &self.history[filter + if descending { 4 } else { 0 }]
    }
}

/// A schema name as a quoted identifier, so any name is safe to splice into SQL.
pub(super) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn truncated(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
