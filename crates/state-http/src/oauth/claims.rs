//! What a token's claims must say before its bearer is anyone here: this issuer, this
//! resource, within its lifetime. The same rules for a verified JWT's payload and for an
//! introspection answer. Time is an argument, so expiry is tested without waiting.

use serde_json::Value;
use state_api::auth::Identity;

/// Why a token's claims are refused: said to the caller as `error_description`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimsRefused(pub(crate) String);

/// What the claims are checked against.
#[derive(Debug, Clone)]
pub(crate) struct Expected<'a> {
    pub(crate) issuer: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) leeway_seconds: u64,
    pub(crate) groups_claim: &'a str,
    /// Whether the claims are a JWT's, which must name its issuer and expiry itself; an
    /// introspection answer is the issuer's own word and may leave them out.
    pub(crate) self_contained: bool,
}

/// The identity `claims` state, once every rule holds at `now` (seconds since the epoch).
pub(crate) fn identity(claims: &Value, expected: &Expected<'_>, now: u64) -> Result<Identity, ClaimsRefused> {
    let refuse = |why: &str| Err(ClaimsRefused(why.to_owned()));
    match claims.get("iss").and_then(Value::as_str) {
        Some(issuer) if issuer == expected.issuer => {}
        Some(_) => return refuse("the token was issued by another issuer"),
        None if expected.self_contained => return refuse("the token names no issuer"),
        None => {}
    }
    let audiences: Vec<&str> = match claims.get("aud") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let ours = |aud: &&str| aud.trim_end_matches('/') == expected.resource.trim_end_matches('/');
    if !audiences.iter().any(ours) {
        return refuse("the token is not for this resource (its audience names another, or none)");
    }
    let seconds = |name: &str| claims.get(name).and_then(Value::as_f64).map(|s| s.max(0.0) as u64);
    match seconds("exp") {
        Some(expiry) if expiry.saturating_add(expected.leeway_seconds) <= now => {
            return refuse("the token has expired");
        }
        Some(_) => {}
        None if expected.self_contained => return refuse("the token has no expiry"),
        None => {}
    }
    if seconds("nbf").is_some_and(|not_before| not_before > now.saturating_add(expected.leeway_seconds)) {
        return refuse("the token is not valid yet");
    }
    // A token bound to its sender's key (DPoP, mTLS: `cnf`) is only good with proof of that
    // key, which this server does not check: taken as a plain bearer token it would lose the
    // very protection it was issued with.
    if claims.get("cnf").is_some() {
        return refuse("the token is bound to a key (cnf: DPoP or mTLS), which this server does not check");
    }
    // A token no user took part in (the client-credentials grant) is its client's: RFC 9068
    // says `sub` then names the client, and an introspection answer may give only `client_id`.
    let named = |claim: &str| claims.get(claim).and_then(Value::as_str).filter(|s| !s.is_empty());
    let Some(subject) = named("sub").or_else(|| named("client_id")) else {
        return refuse("the token names no subject");
    };
    let scopes = match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(scope)), _) => scope.split_whitespace().map(str::to_owned).collect(),
        (_, Some(Value::Array(scopes))) => strings(scopes),
        (_, Some(Value::String(scp))) => scp.split_whitespace().map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    let groups = match claims.get(expected.groups_claim) {
        Some(Value::Array(groups)) => strings(groups),
        Some(Value::String(group)) => vec![group.clone()],
        _ => Vec::new(),
    };
    Ok(Identity { subject: subject.to_owned(), scopes, groups })
}

fn strings(values: &[Value]) -> Vec<String> {
    values.iter().filter_map(Value::as_str).map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: u64 = 1_800_000_000;

    fn expected() -> Expected<'static> {
        Expected {
            issuer: "https://idp.example",
            resource: "https://state.example",
            leeway_seconds: 30,
            groups_claim: "groups",
            self_contained: true,
        }
    }

    fn good() -> Value {
        json!({"iss": "https://idp.example", "aud": ["other", "https://state.example/"], "sub": "alice",
               "exp": NOW + 60, "nbf": NOW - 5, "scope": "state:read state:write", "groups": ["team-a"]})
    }

    fn refusal(change: impl FnOnce(&mut serde_json::Map<String, Value>)) -> String {
        let mut claims = good();
        change(claims.as_object_mut().unwrap());
        identity(&claims, &expected(), NOW).unwrap_err().0
    }

    #[test]
    fn a_good_token_names_its_subject_scopes_and_groups() {
        let identity = identity(&good(), &expected(), NOW).unwrap();
        assert_eq!(identity.subject, "alice");
        assert_eq!(identity.scopes, ["state:read", "state:write"]);
        assert_eq!(identity.groups, ["team-a"]);
    }

    #[test]
    fn another_issuer_another_audience_and_no_subject_are_refused() {
        assert!(refusal(|c| drop(c.insert("iss".into(), json!("https://evil.example")))).contains("another issuer"));
        assert!(refusal(|c| drop(c.remove("iss"))).contains("no issuer"));
        assert!(refusal(|c| drop(c.insert("aud".into(), json!("https://state.example.evil")))).contains("resource"));
        assert!(refusal(|c| drop(c.remove("aud"))).contains("resource"));
        assert!(refusal(|c| drop(c.remove("sub"))).contains("no subject"));
        let mut machine = good();
        machine.as_object_mut().unwrap().remove("sub");
        machine["client_id"] = json!("robot");
        assert_eq!(identity(&machine, &expected(), NOW).unwrap().subject, "robot");
    }

    #[test]
    fn expiry_and_not_before_hold_within_the_leeway_and_not_past_it() {
        let at = |exp: u64, nbf: u64, now: u64| {
            let mut claims = good();
            claims["exp"] = json!(exp);
            claims["nbf"] = json!(nbf);
            identity(&claims, &expected(), now).map(|_| ()).map_err(|e| e.0)
        };
        assert_eq!(at(NOW - 29, NOW - 100, NOW), Ok(()));
        assert!(at(NOW - 30, NOW - 100, NOW).unwrap_err().contains("expired"));
        assert_eq!(at(NOW + 100, NOW + 30, NOW), Ok(()));
        assert!(at(NOW + 100, NOW + 31, NOW).unwrap_err().contains("not valid yet"));
        assert!(refusal(|c| drop(c.remove("exp"))).contains("no expiry"));
    }

    #[test]
    fn a_sender_bound_token_is_refused_not_taken_as_a_bearer_token() {
        assert!(refusal(|c| drop(c.insert("cnf".into(), json!({"jkt": "abc"})))).contains("bound to a key"));
    }

    #[test]
    fn scopes_come_from_scp_too() {
        let mut claims = good();
        claims.as_object_mut().unwrap().remove("scope");
        claims["scp"] = json!(["a", "b"]);
        assert_eq!(identity(&claims, &expected(), NOW).unwrap().scopes, ["a", "b"]);
    }
}
