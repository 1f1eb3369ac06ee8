//! The few requests a resource server makes to its issuer (metadata, keys, introspection):
//! HTTP/1.1 over TLS, one connection per request, bounded in time and size. Plain HTTP only
//! to this machine, where a test or a sidecar runs the issuer.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, Request, Uri, header};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

/// Longest time one request may take, connecting included.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Largest answer read: a key set or a metadata document is a few kilobytes.
const MAX_ANSWER_BYTES: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{url}: {message}")]
    Failed { url: String, message: String },
    #[error("{0}")]
    Setup(String),
}

/// A URL the server may fetch from: `https`, or `http` to a loopback address.
pub(crate) fn check_url(url: &str) -> Result<Uri, String> {
    let uri: Uri = url.parse().map_err(|_| format!("`{url}` is not a URL"))?;
    let host = uri.host().ok_or_else(|| format!("`{url}` names no host"))?;
    match uri.scheme_str() {
        Some("https") => Ok(uri),
        Some("http") if is_loopback(host) => Ok(uri),
        _ => Err(format!("`{url}` must be https (plain http only to this machine's loopback)")),
    }
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Makes requests to the issuer.
#[derive(Clone)]
pub(crate) struct Fetcher {
    tls: tokio_rustls::TlsConnector,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fetcher")
    }
}

impl Fetcher {
    /// Trusts the built-in web roots, or only the certificates of `ca_file`.
    pub(crate) fn new(ca_file: Option<&Path>) -> Result<Fetcher, FetchError> {
        let mut roots = rustls::RootCertStore::empty();
        match ca_file {
            Some(path) => {
                let unreadable = |e: &dyn std::fmt::Display| {
                    FetchError::Setup(format!("cannot read the CA bundle {}: {e}", path.display()))
                };
                let certificates = CertificateDer::pem_file_iter(path)
                    .map_err(|e| unreadable(&e))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| unreadable(&e))?;
                if roots.add_parsable_certificates(certificates).0 == 0 {
                    return Err(FetchError::Setup(format!("{} holds no CA certificate (PEM)", path.display())));
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| FetchError::Setup(format!("cannot set up TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Fetcher { tls: tokio_rustls::TlsConnector::from(Arc::new(config)) })
    }

    pub(crate) async fn get_json(&self, url: &str) -> Result<Value, FetchError> {
        self.send(url, Method::GET, None, Bytes::new()).await
    }

    /// POSTs `form`, authenticated as client `basic` (RFC 6749 §2.3.1).
    pub(crate) async fn post_form(
        &self,
        url: &str,
        basic: (&str, &str),
        form: &[(&str, &str)],
    ) -> Result<Value, FetchError> {
        let failed = |message: String| FetchError::Failed { url: url.to_owned(), message };
        let body = serde_urlencoded::to_string(form).map_err(|e| failed(e.to_string()))?;
        let encode = |s: &str| serde_urlencoded::to_string([("", s)]).map(|s| s[1..].to_owned());
        let user = encode(basic.0).map_err(|e| failed(e.to_string()))?;
        let password = encode(basic.1).map_err(|e| failed(e.to_string()))?;
        use base64::Engine as _;
        let credentials = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        self.send(url, Method::POST, Some(format!("Basic {credentials}")), Bytes::from(body)).await
    }

    async fn send(
        &self,
        url: &str,
        method: Method,
        authorization: Option<String>,
        body: Bytes,
    ) -> Result<Value, FetchError> {
        let failed = |message: String| FetchError::Failed { url: url.to_owned(), message };
        let exchange = async {
            let uri = check_url(url).map_err(&failed)?;
            let host = uri.host().unwrap_or_default().to_owned();
            let tls = uri.scheme_str() == Some("https");
            let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
            let bare_host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
            let stream = tokio::net::TcpStream::connect((bare_host.as_str(), port))
                .await
                .map_err(|e| failed(format!("cannot connect: {e}")))?;
            let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
            let authority = uri.authority().map(|a| a.as_str().to_owned()).unwrap_or(host);
            let mut request = Request::builder()
                .method(method.clone())
                .uri(path)
                .header(header::HOST, authority)
                .header(header::ACCEPT, "application/json")
                .header(header::USER_AGENT, concat!("state-http/", env!("CARGO_PKG_VERSION")));
            if method == Method::POST {
                request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
            }
            if let Some(authorization) = authorization {
                request = request.header(header::AUTHORIZATION, authorization);
            }
            let request = request.body(Full::new(body)).map_err(|e| failed(e.to_string()))?;
            if tls {
                let name = ServerName::try_from(bare_host).map_err(|e| failed(format!("bad host name: {e}")))?;
                let stream =
                    self.tls.connect(name, stream).await.map_err(|e| failed(format!("TLS handshake failed: {e}")))?;
                exchange(stream, request).await.map_err(failed)
            } else {
                exchange(stream, request).await.map_err(failed)
            }
        };
        tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| failed(format!("no answer within {} s", TIMEOUT.as_secs())))?
    }
}

async fn exchange<S>(stream: S, request: Request<Full<Bytes>>) -> Result<Value, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        // The answer is read before this ends; an error here shows in the answer.
        let _ = connection.await;
    });
    let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
        .to_bytes();
    if !status.is_success() {
        return Err(format!("answered {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("the answer is not JSON: {e}"))
}
