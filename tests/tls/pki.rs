//! Certificates made at test time with rcgen: a CA, server certificates for 127.0.0.1 and
//! localhost, client certificates, and self-signed ones; written to a scratch directory as
//! PEM files for strata's config, and turned into rustls configs for the test's own peers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SerialNumber,
};
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A test certificate authority.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Ca { issuer }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for 127.0.0.1 and localhost with serial number `serial`.
    pub fn server(&self, serial: u64) -> Leaf {
        let mut params = leaf_params("strata test server", ExtendedKeyUsagePurpose::ServerAuth);
        params.serial_number = Some(SerialNumber::from_slice(&serial.to_be_bytes()));
        self.sign(params)
    }

    /// A client certificate.
    pub fn client(&self, name: &str) -> Leaf {
        self.sign(leaf_params(name, ExtendedKeyUsagePurpose::ClientAuth))
    }

    fn sign(&self, params: CertificateParams) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf::new(cert.pem(), cert.der().clone(), &key)
    }

    /// Trusts this CA alone.
    pub fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.issuer.der().clone()).unwrap();
        roots
    }
}

/// A self-signed server certificate for 127.0.0.1 and localhost (no CA vouches for it).
pub fn self_signed() -> Leaf {
    let key = KeyPair::generate().unwrap();
    let params = leaf_params("self-signed", ExtendedKeyUsagePurpose::ServerAuth);
    let cert = params.self_signed(&key).unwrap();
    Leaf::new(cert.pem(), cert.der().clone(), &key)
}

fn leaf_params(name: &str, usage: ExtendedKeyUsagePurpose) -> CertificateParams {
    // rcgen turns a name that parses as an IP address into an iPAddress SAN.
    let mut params =
        CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![usage];
    params
}

impl Leaf {
    fn new(cert_pem: String, der: CertificateDer<'static>, key: &KeyPair) -> Leaf {
        Leaf {
            cert_pem,
            key_pem: key.serialize_pem(),
            der,
            key_der: key.serialize_der(),
        }
    }

    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        vec![self.der.clone()]
    }

    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()))
    }

    /// Writes `<stem>.crt` and `<stem>.key` into `dir`.
    pub fn write(&self, dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
        let cert = dir.join(format!("{stem}.crt"));
        let key = dir.join(format!("{stem}.key"));
        std::fs::write(&cert, &self.cert_pem).unwrap();
        std::fs::write(&key, &self.key_pem).unwrap();
        (cert, key)
    }
}

/// A fresh directory for one test's files.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("tls")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The `ring` provider, as strata uses (no process-wide default is installed).
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
