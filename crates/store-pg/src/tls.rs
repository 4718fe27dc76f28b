//! TLS for the connections: rustls on ring. With a CA file the server's certificate must
//! chain to it and name the host; without one, the connection is encrypted without checking
//! the certificate (libpq's `sslmode=require`), which is what a default Debian server with
//! its self-signed certificate needs.

use std::sync::Arc;

use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::{PgSettings, StoreError};

/// The TLS connector the pool's connections use.
pub(crate) fn connector(settings: &PgSettings) -> Result<MakeRustlsConnect, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Settings(format!("TLS cannot be set up: {e}")))?;
    let config = match &settings.ca_file {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| StoreError::Settings(format!("ca_file {}: {e}", path.display())))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StoreError::Settings(format!("ca_file {}: {e}", path.display())))?;
            if certs.is_empty() {
                return Err(StoreError::Settings(format!(
                    "ca_file {} holds no PEM certificate",
                    path.display()
                )));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| {
                    StoreError::Settings(format!("ca_file {}: {e}", path.display()))
                })?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
            .with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

/// Accepts any certificate, but still checks the handshake's signatures (the connection is
/// encrypted to whoever holds the certificate's key).
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
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
