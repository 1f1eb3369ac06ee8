//! What an identity provider's access token may do here: grants turn an identity (the
//! token's subject, scopes and groups, already verified by the frontend) into the same
//! [`Principal`] a tokens file gives, so every rule of this module applies to it unchanged.
//!
//! Grants are tried in the order written and the first that matches decides: an organisation
//! lists its narrow grants before its broad ones, as with firewall rules.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use state_core::rate::Rate;

use super::{Principal, Right, StorageLimits, StorageQuota, WriteQuota, rate_of};

/// Subjects whose write allowance is remembered at once; past it every allowance starts over
/// (only verified tokens add subjects, so reaching it takes that many real identities).
const REMEMBERED_SUBJECTS: usize = 65_536;

/// Who a verified access token says its bearer is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// The token's `sub`: the name its principal goes by.
    pub subject: String,
    /// Its scopes (`scope`, space-separated, or `scp`).
    pub scopes: Vec<String>,
    /// Its groups (the claim the configuration names; `groups` by default).
    pub groups: Vec<String>,
}

/// One `[[grant]]` of the OAuth configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantEntry {
    /// Matches a token whose scopes include this one.
    #[serde(default)]
    scope: Option<String>,
    /// Matches a token whose groups include this one.
    #[serde(default)]
    group: Option<String>,
    /// Matches the token of exactly this subject.
    #[serde(default)]
    subject: Option<String>,
    /// The prefixes granted; `{sub}` in one stands for the token's subject.
    prefixes: Vec<String>,
    rights: Vec<Right>,
    #[serde(default)]
    writes_per_second: Option<f64>,
    #[serde(default)]
    write_burst: Option<f64>,
    /// Most live keys under the prefixes, for each set of prefixes the grant gives out.
    #[serde(default)]
    max_keys: Option<u64>,
    #[serde(default)]
    max_bytes: Option<u64>,
}

#[derive(Debug)]
struct Grant {
    scope: Option<String>,
    group: Option<String>,
    subject: Option<String>,
    prefixes: Vec<String>,
    right: Right,
    rate: Option<Rate>,
    storage: Option<StorageLimits>,
    /// The characters that follow `{sub}` in the prefixes: a subject holding one could name a
    /// prefix inside another subject's (`bob/x` in `users/{sub}/` lies inside bob's).
    separators: Vec<char>,
}

impl Grant {
    /// Every condition the grant states holds for `identity`, and its subject fits the
    /// grant's prefixes without reaching into another's.
    fn matches(&self, identity: &Identity) -> bool {
        self.scope.as_ref().is_none_or(|scope| identity.scopes.contains(scope))
            && self.group.as_ref().is_none_or(|group| identity.groups.contains(group))
            && self.subject.as_ref().is_none_or(|subject| *subject == identity.subject)
            && !identity.subject.contains(self.separators.as_slice())
    }
}

/// What a principal made from an identity is named: apart from every tokens-file name, which
/// may not start so, so the two never share limits, request ids or an audit name.
pub const OAUTH_NAME_PREFIX: &str = "oauth:";

/// Allowances made on first use, by who they are for.
type Allowances<K, T> = Mutex<HashMap<K, Arc<T>>>;

/// The grants of an OAuth configuration, and the write allowance of each subject they let in.
#[derive(Debug)]
pub struct Grants {
    grants: Vec<Grant>,
    /// Per (grant, subject): every request of one subject draws on one allowance, as every
    /// request of one file token does.
    quotas: Allowances<(usize, String), WriteQuota>,
    /// Per (grant, prefixes): subjects given the same prefixes (a team's) share one storage
    /// allowance, since they share what lies under them.
    storage: Allowances<(usize, Vec<String>), StorageQuota>,
}

impl Grants {
    /// Checks the entries; `default_rate` is the write quota of grants without their own
    /// (`--writes-per-second-per-token`).
    pub fn new(entries: Vec<GrantEntry>, default_rate: Option<Rate>) -> Result<Grants, String> {
        if entries.is_empty() {
            return Err("defines no [[grant]]: no token would be let in".into());
        }
        let mut grants = Vec::with_capacity(entries.len());
        for (n, entry) in entries.into_iter().enumerate() {
            let name = format!("grant {}", n + 1);
            if entry.scope.is_none() && entry.group.is_none() && entry.subject.is_none() {
                return Err(format!(
                    "{name}: give at least one of scope, group and subject (a grant for every token the issuer signs is too easy to write by mistake)"
                ));
            }
            let Some(right) = entry.rights.iter().copied().max() else {
                return Err(format!("{name}: rights is empty; give read, write or admin"));
            };
            if entry.prefixes.is_empty() {
                return Err(format!("{name}: prefixes is empty; \"\" covers everything"));
            }
            let rate = rate_of(&name, entry.writes_per_second, entry.write_burst)?.or(default_rate);
            let storage = StorageLimits::of(&name, entry.max_keys, entry.max_bytes)?;
            let mut separators = Vec::new();
            for prefix in &entry.prefixes {
                for (at, _) in prefix.match_indices("{sub}") {
                    match prefix[at + "{sub}".len()..].chars().next() {
                        Some(next) => separators.push(next),
                        None => {
                            return Err(format!(
                                "{name}: prefix `{prefix}` ends with {{sub}}: end it with a separator (`users/{{sub}}/`), or subject `bob` would reach `bobby`'s keys"
                            ));
                        }
                    }
                }
            }
            grants.push(Grant {
                scope: entry.scope,
                group: entry.group,
                subject: entry.subject,
                prefixes: entry.prefixes,
                right,
                rate,
                storage,
                separators,
            });
        }
        Ok(Grants { grants, quotas: Mutex::new(HashMap::new()), storage: Mutex::new(HashMap::new()) })
    }

    /// The principal `identity` is, or `None` when no grant matches it.
    pub fn principal(&self, identity: &Identity) -> Option<Principal> {
        let (index, grant) = self.grants.iter().enumerate().find(|(_, grant)| grant.matches(identity))?;
        let prefixes: Vec<String> = grant.prefixes.iter().map(|p| p.replace("{sub}", &identity.subject)).collect();
        let write_quota = grant.rate.map(|rate| self.quota(index, &identity.subject, rate));
        let storage_quota = grant.storage.map(|limits| self.storage_quota(index, &prefixes, limits));
        let name = format!("{OAUTH_NAME_PREFIX}{}", identity.subject);
        Some(Principal { name, prefixes, right: grant.right, write_quota, storage_quota })
    }

    /// The scopes the grants name, for the resource's metadata (`scopes_supported`).
    pub fn scopes(&self) -> Vec<String> {
        let mut scopes: Vec<String> = Vec::new();
        for scope in self.grants.iter().filter_map(|g| g.scope.clone()) {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        scopes
    }

    fn quota(&self, grant: usize, subject: &str, rate: Rate) -> Arc<WriteQuota> {
        remembered(&self.quotas, (grant, subject.to_owned()), || WriteQuota::new(rate))
    }

    fn storage_quota(&self, grant: usize, prefixes: &[String], limits: StorageLimits) -> Arc<StorageQuota> {
        remembered(&self.storage, (grant, prefixes.to_vec()), || StorageQuota::new(limits))
    }
}

/// The allowance `map` holds for `key`, made on first use. Past `REMEMBERED_SUBJECTS` keys every
/// allowance starts over.
fn remembered<K: std::hash::Hash + Eq, T>(map: &Allowances<K, T>, key: K, make: impl FnOnce() -> T) -> Arc<T> {
    // A poisoned map only lost an insertion: the allowances in it are still sound.
    let mut map = map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if map.len() >= REMEMBERED_SUBJECTS && !map.contains_key(&key) {
        map.clear();
    }
    map.entry(key).or_insert_with(|| Arc::new(make())).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(toml_text: &str) -> Result<Grants, String> {
        #[derive(Deserialize)]
        struct File {
            grant: Vec<GrantEntry>,
        }
        let file: File = toml::from_str(toml_text).map_err(|e| e.to_string())?;
        Grants::new(file.grant, None)
    }

    fn identity(subject: &str, scopes: &[&str], groups: &[&str]) -> Identity {
        Identity {
            subject: subject.into(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            groups: groups.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    const ORGANISATION: &str = r#"
        [[grant]]
        group = "platform"
        prefixes = [""]
        rights = ["admin"]

        [[grant]]
        scope = "state:write"
        prefixes = ["users/{sub}/", "shared/"]
        rights = ["write"]
        writes_per_second = 5

        [[grant]]
        scope = "state:read"
        prefixes = ["shared/"]
        rights = ["read"]
    "#;

    #[test]
    fn the_first_matching_grant_decides_and_sub_fills_the_prefix() {
        let grants = grants(ORGANISATION).unwrap();
        let admin = grants.principal(&identity("ops", &["state:write"], &["platform"])).unwrap();
        assert_eq!((admin.prefixes(), admin.right()), (&[String::new()][..], Right::Admin));
        let alice = grants.principal(&identity("alice", &["state:read", "state:write"], &[])).unwrap();
        assert_eq!(alice.prefixes(), ["users/alice/", "shared/"]);
        assert_eq!(alice.right(), Right::Write);
        assert!(alice.covers("users/alice/notes", Right::Write));
        assert!(!alice.covers("users/bob/notes", Right::Read));
        let reader = grants.principal(&identity("carol", &["state:read"], &[])).unwrap();
        assert_eq!((reader.prefixes(), reader.right()), (&["shared/".to_owned()][..], Right::Read));
        assert!(grants.principal(&identity("mallory", &["email"], &["guests"])).is_none());
        assert_eq!(grants.scopes(), ["state:write", "state:read"]);
        assert_eq!(alice.name, "oauth:alice", "never the name of a tokens-file entry");
    }

    #[test]
    fn a_subject_that_would_reach_into_anothers_prefix_gets_no_grant_that_names_it() {
        let grants = grants(ORGANISATION).unwrap();
        // `users/bob/x/` lies inside bob's `users/bob/`: the {sub} grant is passed over, and
        // the next that matches decides.
        let sneaky = grants.principal(&identity("bob/x", &["state:write", "state:read"], &[])).unwrap();
        assert_eq!((sneaky.prefixes(), sneaky.right()), (&["shared/".to_owned()][..], Right::Read));
        let open_ended = "[[grant]]\nscope = \"s\"\nprefixes = [\"users/{sub}\"]\nrights = [\"write\"]\n";
        assert!(self::grants(open_ended).unwrap_err().contains("end it with a separator"));
    }

    #[test]
    fn one_subject_draws_on_one_allowance_and_each_subject_has_its_own() {
        let grants = grants(ORGANISATION).unwrap();
        let first = grants.principal(&identity("alice", &["state:write"], &[])).unwrap();
        let again = grants.principal(&identity("alice", &["state:write"], &[])).unwrap();
        let other = grants.principal(&identity("bob", &["state:write"], &[])).unwrap();
        for _ in 0..5 {
            first.take_write().unwrap();
        }
        assert!(again.take_write().is_err(), "a second token of the same subject shares the allowance");
        other.take_write().unwrap();
    }

    #[test]
    fn subjects_given_the_same_prefixes_share_one_storage_quota() {
        let file = "[[grant]]\ngroup = \"search\"\nprefixes = [\"search/\"]\nrights = [\"write\"]\nmax_keys = 10\n\n\
                    [[grant]]\nscope = \"s\"\nprefixes = [\"users/{sub}/\"]\nrights = [\"write\"]\nmax_bytes = 99\n";
        let grants = grants(file).unwrap();
        let storage = |subject: &str, scopes: &[&str], groups: &[&str]| {
            let principal = grants.principal(&identity(subject, scopes, groups)).unwrap();
            let quota = principal.storage_quota.clone().unwrap();
            (quota.limits(), Arc::as_ptr(&quota))
        };
        let (team_limits, alice) = storage("alice", &[], &["search"]);
        let (_, bob) = storage("bob", &[], &["search"]);
        assert_eq!(team_limits.max_keys, Some(10));
        assert_eq!(alice, bob, "one team, one allowance for what lies under search/");
        let (own_limits, carol) = storage("carol", &["s"], &[]);
        let (_, dave) = storage("dave", &["s"], &[]);
        assert_eq!(own_limits.max_bytes, Some(99));
        assert_ne!(carol, dave, "users/carol/ and users/dave/ are measured apart");
        assert!(
            self::grants("[[grant]]\nscope = \"s\"\nprefixes = [\"a/\"]\nrights = [\"write\"]\nmax_keys = 0\n")
                .unwrap_err()
                .contains("at least 1")
        );
    }

    #[test]
    fn grants_that_would_let_in_too_much_or_nothing_are_refused() {
        let everyone = "[[grant]]\nprefixes = [\"\"]\nrights = [\"read\"]\n";
        assert!(grants(everyone).unwrap_err().contains("at least one of scope, group and subject"));
        let no_rights = "[[grant]]\nscope = \"s\"\nprefixes = [\"\"]\nrights = []\n";
        assert!(grants(no_rights).unwrap_err().contains("rights is empty"));
        let burst_only = "[[grant]]\nscope = \"s\"\nprefixes = [\"\"]\nrights = [\"read\"]\nwrite_burst = 3\n";
        assert!(grants(burst_only).unwrap_err().contains("write_burst needs writes_per_second"));
        assert!(Grants::new(Vec::new(), None).unwrap_err().contains("no [[grant]]"));
    }
}
