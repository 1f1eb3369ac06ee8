//! TLS to PostgreSQL, with libpq's meaning of `sslmode`: `disable` never encrypts, `prefer`
//! (the default) and `require` encrypt without checking whose certificate it is (as libpq
//! does), and a CA bundle (`--postgres-tls-ca`) makes every connection encrypted and checked:
//! the chain against that bundle and the server's name against the certificate, as libpq's
//! `verify-full`.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::StorageError;

/// The connector for every connection of a backend.
pub(super) fn connector(ca: Option<&Path>) -> Result<MakeRustlsConnect, StorageError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| StorageError::Other(format!("cannot set up TLS: {e}")))?;
    let config = match ca {
        Some(path) => {
            let mut roots = RootCertStore::empty();
            let certificates = CertificateDer::pem_file_iter(path)
                .map_err(|e| unreadable(path, &e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| unreadable(path, &e))?;
            let (added, _) = roots.add_parsable_certificates(certificates);
            if added == 0 {
                return Err(StorageError::Other(format!(
                    "{} holds no CA certificate (PEM) to check PostgreSQL's certificate against",
                    path.display()
                )));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(EncryptOnly(provider))).with_no_client_auth()
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

fn unreadable(path: &Path, error: &dyn std::fmt::Display) -> StorageError {
    StorageError::Other(format!("cannot read the CA bundle {}: {error}", path.display()))
}

/// libpq's `sslmode=require`: the handshake must be sound, the certificate is not checked.
#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
