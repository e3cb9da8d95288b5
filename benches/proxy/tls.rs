//! TLS for the paths part: one certificate for 127.0.0.1 (ECDSA P-256, signed by a CA made at
//! start) that strata and nginx both serve, and the load generator's client config, which
//! offers one protocol version, one cipher suite and one key-exchange group, so every proxy's
//! handshake and records are the same work whichever server library they run on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::crypto::{CryptoProvider, ring};

/// What every TLS connection of the part negotiates (the agents' side and the upstream's).
pub(crate) const SUITE: &str = "TLS 1.3, TLS_AES_128_GCM_SHA256, X25519, ECDSA P-256";

/// The certificate's files, for strata's `tls:` and nginx's `ssl_certificate`.
pub(crate) struct Cert {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    /// The certificate and key in one file, as HAProxy's `crt` takes them.
    pub(crate) bundle: PathBuf,
    ca_der: rustls::pki_types::CertificateDer<'static>,
}

/// Makes the CA and the server certificate and writes the PEM files into `dir`.
pub(crate) fn cert(dir: &Path) -> anyhow::Result<Cert> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "bench CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let issuer = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
    // rcgen makes a name that parses as an IP address an iPAddress SAN.
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()])?;
    leaf.distinguished_name.push(DnType::CommonName, "bench");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate()?;
    let signed = leaf.signed_by(&key, &issuer)?;
    let (cert, key_path, bundle) = (
        dir.join("bench.crt"),
        dir.join("bench.key"),
        dir.join("bench.pem"),
    );
    std::fs::write(&cert, signed.pem())?;
    std::fs::write(&key_path, key.serialize_pem())?;
    std::fs::write(&bundle, format!("{}{}", signed.pem(), key.serialize_pem()))?;
    Ok(Cert {
        cert,
        key: key_path,
        bundle,
        ca_der: issuer.der().clone(),
    })
}

/// The one suite and group of [`SUITE`], on `ring` (strata's provider).
pub(crate) fn provider() -> CryptoProvider {
    let mut p = ring::default_provider();
    p.cipher_suites = vec![ring::cipher_suite::TLS13_AES_128_GCM_SHA256];
    p.kx_groups = vec![ring::kx_group::X25519];
    p
}

impl Cert {
    /// A client config trusting the CA alone, offering `alpn` (`h2`, `http/1.1`).
    pub(crate) fn client(&self, alpn: &[u8]) -> anyhow::Result<Arc<rustls::ClientConfig>> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der.clone())?;
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        Ok(Arc::new(config))
    }
}
