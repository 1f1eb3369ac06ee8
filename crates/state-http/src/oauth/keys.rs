//! The issuer's signing keys (its JWKS), fetched, kept, and fetched again when a token names a
//! key not seen yet (the issuer rotated) or the set is old (the issuer withdrew one) — never
//! more often than once per [`MIN_REFETCH`], so tokens with made-up key ids cannot make this
//! server hammer the issuer.

use std::time::{Duration, Instant};

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;

use super::fetch::{FetchError, Fetcher};

/// Shortest time between two fetches of the key set.
pub(crate) const MIN_REFETCH: Duration = Duration::from_secs(5);

/// Age after which the set is fetched again before use, so a withdrawn key stops working.
const MAX_AGE: Duration = Duration::from_secs(300);

/// One signing key of the set.
pub(crate) struct Key {
    kid: Option<String>,
    /// The algorithm the set pins the key to, if it does.
    alg: Option<Algorithm>,
    /// `RSA`, `EC` or `OKP`: which algorithms could use it at all.
    kty: String,
    pub(crate) decoding: DecodingKey,
}

impl Key {
    /// Whether a token signed with `alg` and naming `kid` may be checked with this key.
    fn fits(&self, kid: Option<&str>, alg: Algorithm) -> bool {
        let family = match alg {
            Algorithm::RS256
            | Algorithm::RS384
            | Algorithm::RS512
            | Algorithm::PS256
            | Algorithm::PS384
            | Algorithm::PS512 => "RSA",
            Algorithm::ES256 | Algorithm::ES384 => "EC",
            Algorithm::EdDSA => "OKP",
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => return false,
        };
        self.kty == family
            && self.alg.is_none_or(|pinned| pinned == alg)
            && (kid.is_none() || self.kid.as_deref() == kid)
    }
}

/// The signing keys of a JWKS document; keys for encryption and of kinds this server cannot
/// verify with are left out.
pub(crate) fn parse_set(document: &Value) -> Vec<Key> {
    let Some(keys) = document.get("keys").and_then(Value::as_array) else { return Vec::new() };
    keys.iter()
        .filter(|key| key.get("use").and_then(Value::as_str).is_none_or(|u| u == "sig"))
        .filter_map(|key| {
            let jwk: Jwk = serde_json::from_value(key.clone()).ok()?;
            let decoding = DecodingKey::from_jwk(&jwk).ok()?;
            // A key pinned to an algorithm this server does not sign with (`RSA-OAEP`, say) is
            // for something else: left out, not taken as unpinned.
            let alg = match key.get("alg").and_then(Value::as_str) {
                Some(name) => Some(name.parse::<Algorithm>().ok()?),
                None => None,
            };
            Some(Key {
                kid: key.get("kid").and_then(Value::as_str).map(str::to_owned),
                alg,
                kty: key.get("kty").and_then(Value::as_str)?.to_owned(),
                decoding,
            })
        })
        .collect()
}

/// Whether to fetch the set before looking a key up at `now`.
pub(crate) fn should_fetch(fetched: Option<Instant>, last_attempt: Option<Instant>, known: bool, now: Instant) -> bool {
    let fresh = fetched.is_some_and(|at| now.saturating_duration_since(at) < MAX_AGE);
    if known && fresh {
        return false;
    }
    last_attempt.is_none_or(|at| now.saturating_duration_since(at) >= MIN_REFETCH)
}

#[derive(Default)]
struct Held {
    keys: Vec<Key>,
    fetched: Option<Instant>,
    last_attempt: Option<Instant>,
}

impl Held {
    fn knows(&self, kid: Option<&str>, alg: Algorithm) -> bool {
        self.keys.iter().any(|k| k.fits(kid, alg))
    }

    /// Whether to fetch now; if so, the attempt is claimed, so no other request makes it too.
    fn claim_fetch(&mut self, known: bool, now: Instant) -> bool {
        let fetch = should_fetch(self.fetched, self.last_attempt, known, now);
        if fetch {
            self.last_attempt = Some(now);
        }
        fetch
    }
}

/// The issuer's keys as this server knows them.
pub(crate) struct KeyRing {
    uri: String,
    fetcher: Fetcher,
    held: std::sync::Mutex<Held>,
    /// Held by the request fetching for an unknown key: others looking for one wait for that
    /// fetch rather than being refused before it lands.
    fetching: tokio::sync::Mutex<()>,
}

impl KeyRing {
    pub(crate) fn new(uri: String, fetcher: Fetcher) -> KeyRing {
        KeyRing { uri, fetcher, held: std::sync::Mutex::default(), fetching: tokio::sync::Mutex::new(()) }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        // A poisoned lock only interrupted a replacement of the whole set: what it holds is whole.
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Fetches the set now (at startup, so a wrong `jwks_uri` is said at once).
    pub(crate) async fn load(&self) -> Result<usize, FetchError> {
        self.held().last_attempt = Some(Instant::now());
        self.refresh().await?;
        Ok(self.held().keys.len())
    }

    /// Runs `check` with the key for a token signed with `alg` naming `kid`, fetching the
    /// set first when the rules above say so. `None` when no key fits.
    pub(crate) async fn with_key<T>(
        self: &std::sync::Arc<Self>,
        kid: Option<&str>,
        alg: Algorithm,
        check: impl FnOnce(&DecodingKey) -> T,
    ) -> Option<T> {
        let (known, fetch) = {
            let mut held = self.held();
            let known = held.knows(kid, alg);
            (known, known && held.claim_fetch(true, Instant::now()))
        };
        if fetch {
            // An old set still verifies while a new one is fetched: no request waits on it.
            let ring = std::sync::Arc::clone(self);
            tokio::spawn(async move { ring.refresh_or_warn().await });
        } else if !known {
            let _only_one = self.fetching.lock().await;
            let fetch = {
                let mut held = self.held();
                !held.knows(kid, alg) && held.claim_fetch(false, Instant::now())
            };
            if fetch {
                self.refresh_or_warn().await;
            }
        }
        // Verified outside the lock: checks of different tokens run side by side.
        let key = self.held().keys.iter().find(|k| k.fits(kid, alg)).map(|key| key.decoding.clone())?;
        Some(check(&key))
    }

    async fn refresh_or_warn(&self) {
        if let Err(error) = self.refresh().await {
            tracing::warn!(%error, "cannot fetch the issuer's keys; using the ones fetched before");
        }
    }

    async fn refresh(&self) -> Result<(), FetchError> {
        let document = self.fetcher.get_json(&self.uri).await?;
        let keys = parse_set(&document);
        tracing::debug!(keys = keys.len(), uri = %self.uri, "fetched the issuer's keys");
        let mut held = self.held();
        held.keys = keys;
        held.fetched = Some(Instant::now());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_fresh_key_is_used_as_it_is() {
        let start = Instant::now();
        assert!(!should_fetch(Some(start), Some(start), true, start + Duration::from_secs(60)));
    }

    #[test]
    fn an_unknown_key_is_fetched_for_at_most_once_per_interval() {
        let start = Instant::now();
        assert!(should_fetch(None, None, false, start), "the first lookup fetches");
        assert!(!should_fetch(Some(start), Some(start), false, start + Duration::from_secs(1)));
        assert!(!should_fetch(Some(start), Some(start), false, start + MIN_REFETCH - Duration::from_millis(1)));
        assert!(should_fetch(Some(start), Some(start), false, start + MIN_REFETCH));
        // A failed fetch counts as an attempt too: a down issuer is not asked on every request.
        assert!(!should_fetch(None, Some(start), false, start + Duration::from_secs(1)));
    }

    #[test]
    fn an_old_set_is_fetched_again_even_for_a_known_key() {
        let start = Instant::now();
        assert!(should_fetch(Some(start), Some(start), true, start + MAX_AGE));
    }

    #[test]
    fn keys_fit_only_their_own_family_and_pinned_algorithm() {
        let set = serde_json::json!({"keys": [
            {"kty": "EC", "crv": "P-256", "kid": "ec", "alg": "ES256", "use": "sig",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "EC", "crv": "P-256", "kid": "enc", "use": "enc",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            {"kty": "EC", "crv": "P-256", "kid": "wrapping", "alg": "ECDH-ES",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}
        ]});
        let keys = parse_set(&set);
        assert_eq!(
            keys.len(),
            2,
            "the encryption keys are left out (by `use`, and by an `alg` no one signs with); the HMAC key parses but fits nothing"
        );
        let ec = &keys[0];
        assert!(ec.fits(Some("ec"), Algorithm::ES256));
        assert!(ec.fits(None, Algorithm::ES256));
        assert!(!ec.fits(Some("other"), Algorithm::ES256));
        assert!(!ec.fits(Some("ec"), Algorithm::ES384), "pinned to ES256");
        assert!(!ec.fits(Some("ec"), Algorithm::RS256));
        assert!(!ec.fits(Some("ec"), Algorithm::HS256));
        assert!(!keys[1].fits(Some("hmac"), Algorithm::HS256), "HMAC is never verified with");
    }
}
