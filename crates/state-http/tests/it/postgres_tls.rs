//! TLS to PostgreSQL: `sslmode=require` encrypts every connection a replica makes, and a CA
//! bundle makes a replica check the server's certificate, refusing one that does not name
//! the host it dialled. Runs where the test database serves TLS (Debian's PostgreSQL does,
//! with its snakeoil certificate); says SKIPPED elsewhere.

use std::process::Command;

use state_e2e::{HttpServer, run_to_exit};

use crate::replicas::Store;
use crate::{binary, expect};

/// `psql -tA` on the test database: the one value a query returns.
fn psql(url: &str, query: &str) -> String {
    let output = Command::new("psql").args(["-qtA", url, "-c", query]).output().unwrap();
    assert!(output.status.success(), "psql: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// The server's certificate file, when it serves TLS and the file is readable here.
fn server_certificate(store: &Store) -> Option<String> {
    if psql(&store.url, "SHOW ssl") != "on" {
        eprintln!("SKIPPED: the test database does not serve TLS");
        return None;
    }
    let file = psql(&store.url, "SHOW ssl_cert_file");
    let file = if file.starts_with('/') { file } else { psql(&store.url, "SHOW data_directory") + "/" + &file };
    if std::fs::metadata(&file).is_err() {
        eprintln!("SKIPPED: the server's certificate {file} is not readable here");
        return None;
    }
    Some(file)
}

/// The test URL with more query parameters.
fn with_params(url: &str, params: &str) -> String {
    format!("{url}{}{params}", if url.contains('?') { '&' } else { '?' })
}

#[test]
fn sslmode_require_encrypts_every_connection_of_a_replica() {
    let Some(store) = Store::new("tls") else { return };
    if server_certificate(&store).is_none() {
        return;
    }
    let name = format!("state_tls_{}", std::process::id());
    let url = with_params(&store.url, &format!("sslmode=require&application_name={name}"));
    let replica = HttpServer::start(binary(), &store.args(&url, &[]), &[]).unwrap();
    expect(&replica.client().request("PUT", "/v1/kv/secret", &[], Some(b"1")).unwrap(), 200);
    let seen = psql(
        &store.url,
        &format!(
            "SELECT count(*) || ' ' || bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = '{name}'"
        ),
    );
    let (count, all_encrypted) = seen.split_once(' ').unwrap();
    assert!(count.parse::<u32>().unwrap() >= 2, "the pool and the listener are connected: {seen}");
    assert_eq!(all_encrypted, "true", "every connection is encrypted: {seen}");
}

#[test]
fn a_ca_bundle_makes_a_replica_check_the_servers_certificate() {
    let Some(store) = Store::new("tls_ca") else { return };
    let Some(certificate) = server_certificate(&store) else { return };
    let holds = |check: &str, name: &str| {
        Command::new("openssl")
            .args(["x509", "-noout", "-in", &certificate, check, name])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("does match"))
    };
    // Dialled by an address the certificate does not name, the server is refused.
    if holds("-checkip", "127.0.0.1") {
        eprintln!("SKIPPED (first half): the server's certificate names 127.0.0.1");
    } else {
        let by_address = store.url.replace("@localhost", "@127.0.0.1");
        let args = store.args(&by_address, &["--postgres-tls-ca", &certificate, "--listen", "127.0.0.1:0"]);
        let (status, stderr) = run_to_exit(binary(), &args, &[]).unwrap();
        assert!(!status.success());
        assert!(stderr.contains("certificate not valid for name"), "{stderr}");
    }
    // Dialled by a name it holds, it is accepted.
    if !holds("-checkhost", "localhost") {
        eprintln!("SKIPPED (second half): the server's certificate does not name localhost");
        return;
    }
    let right = store.url.replace("@127.0.0.1", "@localhost");
    let replica = HttpServer::start(binary(), &store.args(&right, &["--postgres-tls-ca", &certificate]), &[]).unwrap();
    expect(&replica.client().request("PUT", "/v1/kv/checked", &[], Some(b"1")).unwrap(), 200);
}
