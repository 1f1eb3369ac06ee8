//! The OAuth file (`--oauth`): which issuer's tokens are accepted, for which resource, and
//! the grants that turn them into prefixes and rights.

use std::path::{Path, PathBuf};

use jsonwebtoken::Algorithm;
use serde::Deserialize;
use state_api::auth::{GrantEntry, Grants};
use state_core::rate::Rate;

/// Algorithms accepted unless the file names others: the asymmetric ones identity providers
/// sign with. HMAC is never accepted: its key is a shared secret, and a verifier that took
/// one would take the issuer's public key as that secret.
const DEFAULT_ALGORITHMS: [Algorithm; 4] = [Algorithm::RS256, Algorithm::PS256, Algorithm::ES256, Algorithm::EdDSA];

/// The longest clock skew the file may allow.
const MAX_LEEWAY_SECONDS: u64 = 300;

#[derive(Debug, thiserror::Error)]
pub enum OAuthConfigError {
    #[error("cannot read the OAuth file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("OAuth file {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    issuer: String,
    resource: String,
    #[serde(default)]
    jwks_uri: Option<String>,
    #[serde(default)]
    algorithms: Option<Vec<String>>,
    #[serde(default)]
    leeway_seconds: Option<u64>,
    #[serde(default)]
    groups_claim: Option<String>,
    #[serde(default)]
    ca_file: Option<PathBuf>,
    #[serde(default)]
    introspection: Option<IntrospectionFile>,
    #[serde(default)]
    grant: Vec<GrantEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IntrospectionFile {
    #[serde(default)]
    endpoint: Option<String>,
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    client_secret_env: Option<String>,
}

/// A checked OAuth file.
#[derive(Debug)]
pub struct OAuthConfig {
    /// The issuer tokens must name (`iss`), exactly as its metadata gives it.
    pub issuer: String,
    /// This server as a resource: the audience tokens must name (`aud`).
    pub resource: String,
    /// Where the issuer's keys are; read from its metadata when not given.
    pub jwks_uri: Option<String>,
    pub algorithms: Vec<Algorithm>,
    pub leeway_seconds: u64,
    pub groups_claim: String,
    /// Certificates to trust for the issuer instead of the built-in roots.
    pub ca_file: Option<PathBuf>,
    pub introspection: Option<Introspection>,
    pub grants: Grants,
}

/// How opaque tokens are checked: RFC 7662 introspection as a client of the issuer.
#[derive(Debug)]
pub struct Introspection {
    /// Read from the issuer's metadata when not given.
    pub endpoint: Option<String>,
    pub client_id: String,
    pub client_secret: String,
}

impl OAuthConfig {
    pub fn load(path: &Path, default_rate: Option<Rate>) -> Result<OAuthConfig, OAuthConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| OAuthConfigError::Read { path: path.into(), source })?;
        OAuthConfig::parse(&text, default_rate, &|name| std::env::var(name).ok())
            .map_err(|message| OAuthConfigError::Invalid { path: path.into(), message })
    }

    /// Parses the file's text; `env` reads the variable a client secret may be kept in.
    pub fn parse(
        text: &str,
        default_rate: Option<Rate>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<OAuthConfig, String> {
        let file: File = state_api::auth::parse_secret_toml(text)?;
        for (what, url) in
            [("issuer", Some(&file.issuer)), ("resource", Some(&file.resource)), ("jwks_uri", file.jwks_uri.as_ref())]
        {
            if let Some(url) = url {
                super::fetch::check_url(url).map_err(|why| format!("{what}: {why}"))?;
            }
        }
        if file.resource.contains('#') {
            return Err("resource: a resource identifier has no fragment (RFC 8707)".into());
        }
        let algorithms = match file.algorithms {
            None => DEFAULT_ALGORITHMS.to_vec(),
            Some(names) if names.is_empty() => return Err("algorithms is empty; leave it out for the defaults".into()),
            Some(names) => names.iter().map(|name| algorithm(name)).collect::<Result<_, _>>()?,
        };
        let leeway_seconds = file.leeway_seconds.unwrap_or(30);
        if leeway_seconds > MAX_LEEWAY_SECONDS {
            return Err(format!("leeway_seconds is {leeway_seconds}; at most {MAX_LEEWAY_SECONDS} is allowed"));
        }
        let introspection = match file.introspection {
            None => None,
            Some(i) => {
                let client_secret = match (i.client_secret, i.client_secret_env) {
                    (Some(secret), None) => secret,
                    (None, Some(name)) => env(&name)
                        .filter(|secret| !secret.is_empty())
                        .ok_or_else(|| format!("introspection: the environment variable {name} is not set"))?,
                    _ => return Err("introspection: give exactly one of client_secret and client_secret_env".into()),
                };
                if let Some(endpoint) = &i.endpoint {
                    super::fetch::check_url(endpoint).map_err(|why| format!("introspection endpoint: {why}"))?;
                }
                Some(Introspection { endpoint: i.endpoint, client_id: i.client_id, client_secret })
            }
        };
        Ok(OAuthConfig {
            issuer: file.issuer,
            resource: file.resource,
            jwks_uri: file.jwks_uri,
            algorithms,
            leeway_seconds,
            groups_claim: file.groups_claim.unwrap_or_else(|| "groups".into()),
            ca_file: file.ca_file,
            introspection,
            grants: Grants::new(file.grant, default_rate)?,
        })
    }
}

fn algorithm(name: &str) -> Result<Algorithm, String> {
    let refused = |why: &str| Err(format!("algorithm `{name}` {why}"));
    match name {
        "none" => refused("signs nothing: a token signed with it proves nothing"),
        "HS256" | "HS384" | "HS512" => refused("is HMAC: its key is a shared secret, never an issuer's public key"),
        _ => name.parse::<Algorithm>().map_err(|_| {
            format!("algorithm `{name}` is not one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA")
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
        issuer = "https://login.example.com"
        resource = "https://state.example.com"
        [[grant]]
        scope = "state"
        prefixes = [""]
        rights = ["write"]
    "#;

    fn parse(text: &str) -> Result<OAuthConfig, String> {
        OAuthConfig::parse(text, None, &|name| (name == "SECRET").then(|| "s3cret".to_owned()))
    }

    #[test]
    fn a_minimal_file_gets_safe_defaults() {
        let config = parse(MINIMAL).unwrap();
        assert_eq!(config.algorithms, DEFAULT_ALGORITHMS);
        assert_eq!(config.leeway_seconds, 30);
        assert_eq!(config.groups_claim, "groups");
        assert!(config.introspection.is_none());
    }

    #[test]
    fn none_hmac_and_unknown_algorithms_are_refused() {
        for (name, why) in [("none", "signs nothing"), ("HS256", "is HMAC"), ("XX1", "is not one of")] {
            let text = format!("algorithms = [\"{name}\"]\n{MINIMAL}");
            assert!(parse(&text).unwrap_err().contains(why), "{name}");
        }
        let text = format!("algorithms = [\"ES384\", \"RS512\"]\n{MINIMAL}");
        assert_eq!(parse(&text).unwrap().algorithms, [Algorithm::ES384, Algorithm::RS512]);
    }

    #[test]
    fn an_issuer_reached_without_tls_off_this_machine_is_refused() {
        let text = MINIMAL.replace("https://login.example.com", "http://login.example.com");
        assert!(parse(&text).unwrap_err().contains("https"));
        let text = MINIMAL.replace("https://login.example.com", "http://127.0.0.1:9000");
        parse(&text).unwrap();
    }

    #[test]
    fn an_introspection_secret_comes_from_the_file_or_a_variable_and_must_be_there() {
        let with = |lines: &str| format!("{MINIMAL}\n[introspection]\nclient_id = \"state\"\n{lines}\n");
        let config = parse(&with("client_secret_env = \"SECRET\"")).unwrap();
        assert_eq!(config.introspection.unwrap().client_secret, "s3cret");
        assert!(parse(&with("client_secret_env = \"UNSET\"")).unwrap_err().contains("UNSET is not set"));
        assert!(parse(&with("")).unwrap_err().contains("exactly one of"));
    }

    #[test]
    fn the_documented_oauth_file_is_a_valid_one() {
        let doc = include_str!("../../../../docs/oauth.md");
        let start = doc.find("```toml\n# oauth.toml").expect("docs/oauth.md shows an OAuth file");
        let block = &doc[start + "```toml\n".len()..];
        let block = &block[..block.find("```").unwrap()];
        let config = OAuthConfig::parse(block, None, &|name| (name == "STATE_OAUTH_CLIENT_SECRET").then(|| "x".into()))
            .unwrap_or_else(|e| panic!("the OAuth file of docs/oauth.md: {e}"));
        assert_eq!(config.grants.scopes(), ["state:write"]);
        assert_eq!(config.introspection.unwrap().client_id, "state-http");
    }

    #[test]
    fn a_wide_skew_and_a_misspelt_field_are_refused() {
        assert!(parse(&format!("leeway_seconds = 3600\n{MINIMAL}")).unwrap_err().contains("at most 300"));
        assert!(parse(&format!("isuer = \"x\"\n{MINIMAL}")).unwrap_err().contains("unknown field `isuer`"));
    }
}
