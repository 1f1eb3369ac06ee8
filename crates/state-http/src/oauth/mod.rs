//! state-http as an OAuth 2.1 resource server (MCP's authorization, RFC 9728, RFC 8707): it
//! publishes which issuer signs its tokens, points unauthenticated callers there, and turns an
//! issuer's access token into a [`Principal`] through the file's grants. JWTs are verified
//! against the issuer's keys; other (opaque) tokens are introspected (RFC 7662) when the file
//! says how.
//!
//! The rules of what a principal may do are `state_api::auth`'s, as for a tokens file; this
//! module only establishes who the caller is.

mod claims;
pub(crate) mod config;
pub(crate) mod fetch;
mod keys;

use std::sync::Arc;

use axum::http::{HeaderValue, Uri};
use jsonwebtoken::Validation;
use serde_json::{Value, json};
use state_api::auth::Principal;

pub use config::{OAuthConfig, OAuthConfigError};
use fetch::{FetchError, Fetcher};
use keys::KeyRing;

const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// Longest access token taken: identity providers' are a few kilobytes at most.
pub(crate) const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Introspections at once, and how long a token waits for its turn before it is answered 503.
const MAX_INTROSPECTIONS: usize = 16;
const INTROSPECTION_QUEUE: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error(transparent)]
    Config(#[from] OAuthConfigError),
    #[error("cannot reach the issuer {issuer}: {source}")]
    Issuer { issuer: String, source: FetchError },
    #[error(
        "the issuer {0} publishes no metadata (tried RFC 8414's and OpenID Connect's well-known paths); give jwks_uri in the OAuth file"
    )]
    NoMetadata(String),
    #[error("the issuer's metadata names no {0}; give it in the OAuth file")]
    Missing(&'static str),
}

/// Why a presented token lets no one in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not a token of this issuer for this resource, or no longer good: 401 `invalid_token`.
    Invalid(String),
    /// A good token that no grant covers: 403 `insufficient_scope`.
    NoGrant,
    /// The issuer could not be asked (introspection failed): 503.
    IssuerUnreachable(String),
}

/// The resource server: its configuration, the issuer's keys, and how to ask the issuer.
pub struct ResourceServer {
    config: OAuthConfig,
    keys: Option<Arc<KeyRing>>,
    introspection_endpoint: Option<String>,
    /// Introspections in flight at once: tokens nobody issued cannot make this server flood
    /// the issuer with its own credentials.
    introspecting: tokio::sync::Semaphore,
    fetcher: Fetcher,
    /// The full URL of this resource's metadata, as `WWW-Authenticate` gives it.
    metadata_url: String,
    /// Where this server serves it: the path RFC 9728 derives from the resource, and the bare
    /// well-known path clients that ignore the header try.
    metadata_paths: Vec<String>,
}

impl std::fmt::Debug for ResourceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceServer")
            .field("issuer", &self.config.issuer)
            .field("resource", &self.config.resource)
            .finish()
    }
}

impl ResourceServer {
    /// Reads the issuer's metadata (unless the file names every endpoint) and its keys.
    pub async fn start(config: OAuthConfig) -> Result<ResourceServer, OAuthError> {
        let fetcher = Fetcher::new(config.ca_file.as_deref())
            .map_err(|source| OAuthError::Issuer { issuer: config.issuer.clone(), source })?;
        let needs_metadata =
            config.jwks_uri.is_none() || config.introspection.as_ref().is_some_and(|i| i.endpoint.is_none());
        let metadata = if needs_metadata { Some(discover(&fetcher, &config.issuer).await?) } else { None };
        let from_metadata =
            |field: &str| metadata.as_ref().and_then(|m| m.get(field)).and_then(Value::as_str).map(str::to_owned);
        // Plain http to loopback is for an issuer on this machine (a test, a sidecar): a remote
        // issuer's metadata may not send its keys or tokens there.
        let from_metadata = |field: &str| -> Result<Option<String>, OAuthError> {
            let url = from_metadata(field);
            if url.as_deref().is_some_and(|u| u.starts_with("http://")) && !config.issuer.starts_with("http://") {
                return Err(OAuthError::Issuer {
                    issuer: config.issuer.clone(),
                    source: FetchError::Setup(format!(
                        "its metadata names a plain-http {field}; an https issuer's must be https"
                    )),
                });
            }
            Ok(url)
        };
        let jwks_uri = match config.jwks_uri.clone() {
            Some(uri) => Some(uri),
            None => from_metadata("jwks_uri")?,
        };
        let introspection_endpoint = match &config.introspection {
            None => None,
            Some(i) => Some(match i.endpoint.clone() {
                Some(endpoint) => endpoint,
                None => {
                    from_metadata("introspection_endpoint")?.ok_or(OAuthError::Missing("introspection_endpoint"))?
                }
            }),
        };
        for url in jwks_uri.iter().chain(introspection_endpoint.iter()) {
            fetch::check_url(url).map_err(|why| OAuthError::Issuer {
                issuer: config.issuer.clone(),
                source: FetchError::Setup(format!("its metadata names {why}")),
            })?;
        }
        let keys = match jwks_uri {
            Some(uri) => {
                let ring = Arc::new(KeyRing::new(uri, fetcher.clone()));
                let count =
                    ring.load().await.map_err(|source| OAuthError::Issuer { issuer: config.issuer.clone(), source })?;
                tracing::info!(issuer = %config.issuer, keys = count, "OAuth: read the issuer's signing keys");
                Some(ring)
            }
            None if introspection_endpoint.is_some() => None,
            None => return Err(OAuthError::Missing("jwks_uri")),
        };
        let (metadata_url, metadata_paths) = metadata_location(&config.resource);
        Ok(ResourceServer {
            config,
            keys,
            introspection_endpoint,
            introspecting: tokio::sync::Semaphore::new(MAX_INTROSPECTIONS),
            fetcher,
            metadata_url,
            metadata_paths,
        })
    }

    /// The principal `token` stands for.
    pub(crate) async fn authenticate(&self, token: &str) -> Result<Principal, Refusal> {
        let jwt = token.split('.').count() == 3;
        let claims = if jwt {
            self.verify(token).await?
        } else if self.introspection_endpoint.is_some() {
            self.introspect(token).await?
        } else {
            return Err(Refusal::Invalid("the token is not a JWT, and this server introspects no tokens".into()));
        };
        let expected = claims::Expected {
            issuer: &self.config.issuer,
            resource: &self.config.resource,
            leeway_seconds: self.config.leeway_seconds,
            groups_claim: &self.config.groups_claim,
            self_contained: jwt,
        };
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let identity = claims::identity(&claims, &expected, now).map_err(|refused| Refusal::Invalid(refused.0))?;
        self.config.grants.principal(&identity).ok_or(Refusal::NoGrant)
    }

    /// A JWT's payload, once its signature verifies with one of the issuer's keys under an
    /// accepted algorithm.
    async fn verify(&self, token: &str) -> Result<Value, Refusal> {
        let invalid = |why: &str| Refusal::Invalid(why.to_owned());
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| invalid("the token is not a well-formed JWT, or names an algorithm no one may sign with"))?;
        if !self.config.algorithms.contains(&header.alg) {
            return Err(Refusal::Invalid(format!("tokens signed with {:?} are not accepted here", header.alg)));
        }
        let Some(keys) = &self.keys else {
            return Err(invalid("this server checks tokens by introspection only; a JWT was presented"));
        };
        let mut validation = Validation::new(header.alg);
        // The claims are checked by `claims::identity`, against this server's clock and rules.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        validation.required_spec_claims.clear();
        let verified = keys
            .with_key(header.kid.as_deref(), header.alg, |key| jsonwebtoken::decode::<Value>(token, key, &validation))
            .await
            .ok_or_else(|| invalid("no signing key of the issuer fits the token"))?;
        verified.map(|data| data.claims).map_err(|_| invalid("the token's signature does not verify"))
    }

    /// The issuer's answer about an opaque token, once it says the token is active.
    async fn introspect(&self, token: &str) -> Result<Value, Refusal> {
        let (Some(endpoint), Some(client)) = (&self.introspection_endpoint, &self.config.introspection) else {
            return Err(Refusal::Invalid("this server introspects no tokens".into()));
        };
        let busy = || Refusal::IssuerUnreachable("too many tokens are being checked with the issuer; try again".into());
        let _turn = tokio::time::timeout(INTROSPECTION_QUEUE, self.introspecting.acquire())
            .await
            .map_err(|_| busy())?
            .map_err(|_| busy())?;
        let answer = self
            .fetcher
            .post_form(
                endpoint,
                (&client.client_id, &client.client_secret),
                &[("token", token), ("token_type_hint", "access_token")],
            )
            .await
            .map_err(|error| {
                tracing::warn!(%error, "OAuth: token introspection failed");
                Refusal::IssuerUnreachable("cannot check the token with its issuer now; try again".into())
            })?;
        if answer.get("active") != Some(&Value::Bool(true)) {
            return Err(Refusal::Invalid("the issuer says the token is not active (expired or revoked)".into()));
        }
        Ok(answer)
    }

    /// `WWW-Authenticate` for a request refused for `refusal` (`None`: no token at all).
    pub(crate) fn challenge(&self, refusal: Option<&Refusal>) -> HeaderValue {
        let mut parts = vec![format!("resource_metadata=\"{}\"", self.metadata_url)];
        let scopes = self.config.grants.scopes().join(" ");
        match refusal {
            Some(Refusal::Invalid(why)) => {
                parts.insert(0, "error=\"invalid_token\"".into());
                parts.insert(1, format!("error_description=\"{}\"", quotable(why)));
            }
            Some(Refusal::NoGrant) => {
                parts.insert(0, "error=\"insufficient_scope\"".into());
                parts.insert(
                    1,
                    "error_description=\"no grant of this server covers the token's subject, scopes or groups\"".into(),
                );
            }
            Some(Refusal::IssuerUnreachable(_)) | None => {}
        }
        if !scopes.is_empty() {
            parts.push(format!("scope=\"{}\"", quotable(&scopes)));
        }
        let value = format!("Bearer {}", parts.join(", "));
        HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
    }

    /// This resource's metadata (RFC 9728).
    pub(crate) fn metadata(&self) -> Value {
        let mut metadata = json!({
            "resource": self.config.resource,
            "authorization_servers": [self.config.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "state",
        });
        let scopes = self.config.grants.scopes();
        if !scopes.is_empty() {
            metadata["scopes_supported"] = json!(scopes);
        }
        metadata
    }

    /// The paths the metadata is served at.
    pub(crate) fn metadata_paths(&self) -> &[String] {
        &self.metadata_paths
    }
}

/// Whether `path` is one anyone may read because it describes how to authenticate.
pub(crate) fn is_metadata_path(path: &str) -> bool {
    path == WELL_KNOWN || path.strip_prefix(WELL_KNOWN).is_some_and(|rest| rest.starts_with('/'))
}

/// Where RFC 9728 puts a resource's metadata: the well-known path inserted between the
/// resource's origin and its path.
fn metadata_location(resource: &str) -> (String, Vec<String>) {
    let uri: Uri = resource.parse().unwrap_or_default();
    let origin = match (uri.scheme_str(), uri.authority()) {
        (Some(scheme), Some(authority)) => format!("{scheme}://{authority}"),
        _ => String::new(),
    };
    let path = uri.path().trim_end_matches('/');
    let own = format!("{WELL_KNOWN}{path}");
    let mut paths = vec![own.clone()];
    if !path.is_empty() {
        paths.push(WELL_KNOWN.to_owned());
    }
    (format!("{origin}{own}"), paths)
}

/// The issuer's metadata: RFC 8414's well-known path first, then OpenID Connect's; the
/// document must name the same issuer (RFC 8414 §3.3), or it is someone else's.
async fn discover(fetcher: &Fetcher, issuer: &str) -> Result<Value, OAuthError> {
    let uri: Uri = issuer.parse().map_err(|_| OAuthError::NoMetadata(issuer.to_owned()))?;
    let origin = format!("{}://{}", uri.scheme_str().unwrap_or("https"), uri.authority().map_or("", |a| a.as_str()));
    let path = uri.path().trim_end_matches('/');
    let candidates = [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/')),
    ];
    let mut last_error = None;
    for url in candidates {
        match fetcher.get_json(&url).await {
            Ok(document) if document.get("issuer").and_then(Value::as_str) == Some(issuer) => return Ok(document),
            Ok(_) => tracing::warn!(%url, "the issuer's metadata names another issuer; ignored"),
            Err(error) => last_error = Some(error),
        }
    }
    Err(match last_error {
        Some(source @ FetchError::Failed { .. }) if source.to_string().contains("cannot connect") => {
            OAuthError::Issuer { issuer: issuer.to_owned(), source }
        }
        _ => OAuthError::NoMetadata(issuer.to_owned()),
    })
}

/// `text` fit for a quoted-string in a header: no quotes, backslashes or control characters.
fn quotable(text: &str) -> String {
    text.chars().filter(|c| !matches!(c, '"' | '\\') && !c.is_control()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_lives_where_rfc_9728_derives_it_from_the_resource() {
        let (url, paths) = metadata_location("https://state.example.com");
        assert_eq!(url, "https://state.example.com/.well-known/oauth-protected-resource");
        assert_eq!(paths, ["/.well-known/oauth-protected-resource"]);
        let (url, paths) = metadata_location("https://example.com:8443/state/");
        assert_eq!(url, "https://example.com:8443/.well-known/oauth-protected-resource/state");
        assert_eq!(paths, ["/.well-known/oauth-protected-resource/state", "/.well-known/oauth-protected-resource"]);
        assert!(is_metadata_path("/.well-known/oauth-protected-resource/state"));
        assert!(!is_metadata_path("/.well-known/oauth-protected-resourcex"));
    }
}
