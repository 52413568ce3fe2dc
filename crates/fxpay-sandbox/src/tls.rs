//! https for the sandbox: a CA and a server certificate made at start (rcgen), served with
//! rustls on the aws-lc-rs provider (the one reqwest already uses), offering HTTP/2 and
//! HTTP/1.1 by ALPN. The CA certificate is
//! written as PEM to a fresh temporary directory, removed when the sandbox goes away.
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use tokio_rustls::rustls::crypto::aws_lc_rs;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use crate::ids;

/// The DNS names the server certificate covers besides the bound address: `localhost`, and
/// a name that is not loopback by its spelling, for tests of the https-only rule.
pub const CERT_NAMES: [&str; 2] = ["localhost", "fxpay-sandbox.test"];

/// The sandbox's TLS material. Dropping it removes the CA file.
pub struct Tls {
    pub acceptor: TlsAcceptor,
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// Where `ca_pem` is written.
    pub ca_path: PathBuf,
    /// With client authentication: a client certificate the CA issued, and its key (PEM).
    pub client_cert_path: Option<PathBuf>,
    pub client_key_path: Option<PathBuf>,
    dir: PathBuf,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("ca_path", &self.ca_path)
            .finish_non_exhaustive()
    }
}

impl Drop for Tls {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn other(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("sandbox TLS: {e}"))
}

/// `FXPAY_SANDBOX_ALPN=http/1.1` makes an https sandbox offer only HTTP/1.1: the benchmark's
/// "TLS HTTP/1.1" cells for clients that would choose h2 (fxpay, reqwest). Anything else, or
/// nothing, offers both.
pub const ALPN_ENV: &str = "FXPAY_SANDBOX_ALPN";

/// The protocols offered by ALPN: HTTP/2 first, as servers in production offer it; a client
/// that offers only http/1.1 (or no ALPN at all) gets HTTP/1.1. `server::connection` serves
/// either.
fn alpn(setting: Option<&str>) -> Vec<Vec<u8>> {
    match setting {
        Some("http/1.1") => vec![b"http/1.1".to_vec()],
        _ => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
    }
}

/// Makes a CA, a server certificate for `CERT_NAMES`, loopback and `host`, and the acceptor.
pub fn make(host: IpAddr, client_auth: bool) -> std::io::Result<Tls> {
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(other)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "fxpay sandbox CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().map_err(other)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(other)?;

    let names: Vec<String> = CERT_NAMES.iter().map(|s| (*s).to_owned()).collect();
    let mut leaf = CertificateParams::new(names).map_err(other)?;
    leaf.distinguished_name
        .push(DnType::CommonName, "fxpay sandbox");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    // The CA's key named in the leaf: CPython 3.13's default context verifies with
    // VERIFY_X509_STRICT, which refuses a certificate without it ("Missing Authority Key
    // Identifier"), so Python clients of the https sandbox failed there.
    leaf.use_authority_key_identifier_extension = true;
    let mut ips: Vec<IpAddr> = vec![
        IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
    ];
    if !host.is_unspecified() && !ips.contains(&host) {
        ips.push(host);
    }
    leaf.subject_alt_names
        .extend(ips.into_iter().map(SanType::IpAddress));
    let leaf_key = KeyPair::generate().map_err(other)?;
    let issuer = Issuer::from_params(&ca, &ca_key);
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).map_err(other)?;

    let chain = vec![leaf_cert.der().clone(), ca_cert.der().clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let provider = Arc::new(aws_lc_rs::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(other)?;
    let mut client_pems = None;
    let builder = if client_auth {
        let mut roots = RootCertStore::empty();
        roots.add(ca_cert.der().clone()).map_err(other)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(other)?;
        let mut client = CertificateParams::new(Vec::<String>::new()).map_err(other)?;
        client
            .distinguished_name
            .push(DnType::CommonName, "fxpay sandbox client");
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_key = KeyPair::generate().map_err(other)?;
        let client_cert = client.signed_by(&client_key, &issuer).map_err(other)?;
        client_pems = Some((client_cert.pem(), client_key.serialize_pem()));
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut config = builder.with_single_cert(chain, key).map_err(other)?;
    config.alpn_protocols = alpn(std::env::var(ALPN_ENV).ok().as_deref());

    let ca_pem = ca_cert.pem();
    let dir = std::env::temp_dir().join(format!("fxpay-sandbox-{}", ids::hex_tag(8)));
    std::fs::create_dir(&dir)?;
    let ca_path = dir.join("ca.pem");
    if let Err(e) = std::fs::write(&ca_path, ca_pem.as_bytes()) {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    let (mut client_cert_path, mut client_key_path) = (None, None);
    if let Some((cert, key)) = client_pems {
        let (c, k) = (dir.join("client.pem"), dir.join("client-key.pem"));
        if let Err(e) = std::fs::write(&c, cert).and_then(|()| std::fs::write(&k, key)) {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        (client_cert_path, client_key_path) = (Some(c), Some(k));
    }
    Ok(Tls {
        acceptor: TlsAcceptor::from(Arc::new(config)),
        ca_pem,
        ca_path,
        client_cert_path,
        client_key_path,
        dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_h2_unless_told_http1_only() {
        assert_eq!(alpn(None), vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert_eq!(alpn(Some("h2")), alpn(None));
        assert_eq!(alpn(Some("http/1.1")), vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn makes_a_ca_file_and_removes_it() {
        let tls = make(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), false).expect("tls");
        let path = tls.ca_path.clone();
        let pem = std::fs::read_to_string(&path).expect("ca file");
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(pem, tls.ca_pem);
        drop(tls);
        assert!(!path.exists());
    }
}
