//! The TLS settings of every connection pool: rustls with the system's trust (through
//! rustls-platform-verifier), or with a client's CA bundle alone (`ca_bundle`, or
//! `SSL_CERT_FILE`), offering h2 and HTTP/1.1 by ALPN.
//!
//! Building that configuration reads and parses the system's root certificates, a few
//! milliseconds of CPU. An application may make many clients, so it is built once per process
//! and set of extra roots, and shared. Sharing it also shares its TLS session cache: a
//! client's pool resumes the sessions the others opened instead of making a full handshake.
//!
//! A client without a certificate of its own notes when a server asks it for one
//! ([`client_cert_asked`]): the server then closes the connection, and on a multi-threaded
//! runtime the connection's task may see that before the request is handed to it, so the
//! request's error would only say that the connection closed.
//!
//! The configurations are per process: a forked child builds its own on first use, because
//! a thread of the parent may have held the session cache's lock (or this module's) at the
//! fork, and nobody would ever release it in the child.
use crate::error::{Error, Result};
use crate::runtime::fork::PerProcess;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

type Built = Mutex<Vec<(Vec<CertificateDer<'static>>, Arc<rustls::ClientConfig>)>>;

/// The configurations this process has built, by their extra roots (few: one per CA bundle
/// in use).
static BUILT: PerProcess<Built> = PerProcess::empty();

fn configs() -> &'static Built {
    BUILT.get_or_make(|| Mutex::new(Vec::new()))
}

/// Set once a server asked a client of this process that has no certificate for one.
static CLIENT_CERT_ASKED: AtomicBool = AtomicBool::new(false);

/// Whether a server asked a client of this process that has no certificate for one, in a
/// TLS handshake: the likely cause of a connection it then closed.
pub(crate) fn client_cert_asked() -> bool {
    CLIENT_CERT_ASKED.load(Ordering::Relaxed)
}

/// The client-certificate side of a client without one: sends none, and notes the asking.
#[derive(Debug)]
struct NoClientCert;

impl rustls::client::ResolvesClientCert for NoClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        CLIENT_CERT_ASKED.store(true, Ordering::Relaxed);
        None
    }

    fn has_certs(&self) -> bool {
        false
    }
}

/// The most a PEM file given as `ca_bundle`, `client_cert` or `client_key` may hold. A
/// system's whole CA bundle is about 220 KB.
pub(crate) const PEM_LIMIT: u64 = 4 * 1024 * 1024;

/// The bytes of the PEM file `path`, given as `what`. Only a regular file of at most
/// [`PEM_LIMIT`] bytes is read: a FIFO (which would block the caller until a writer came,
/// Ctrl-C or not), a device (`/dev/zero` never ends) or a directory is refused at once.
pub(crate) fn read_pem_file(what: &str, path: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let cannot = |e: std::io::Error| Error::config(format!("cannot read {what} {path:?}: {e}"));
    // Opened without blocking (a FIFO with no writer would block `open` itself), then
    // checked on the open file, so what is checked is what is read.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        let kind = kind_of(&meta.file_type());
        return Err(Error::config(format!(
            "{what} {path:?} is {kind}, not a regular file: give the path of a PEM file"
        )));
    }
    if meta.len() > PEM_LIMIT {
        return Err(too_large(what, path));
    }
    let mut pem = Vec::with_capacity(meta.len() as usize);
    file.take(PEM_LIMIT + 1)
        .read_to_end(&mut pem)
        .map_err(cannot)?;
    if pem.len() as u64 > PEM_LIMIT {
        return Err(too_large(what, path));
    }
    Ok(pem)
}

fn too_large(what: &str, path: &str) -> Error {
    Error::config(format!(
        "{what} {path:?} is larger than {} MiB: it is not a PEM file of certificates or a key",
        PEM_LIMIT / (1024 * 1024)
    ))
}

/// What a file that is not a regular file is, in words.
fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Whether a PEM holds an encrypted private key (PKCS#8 `ENCRYPTED PRIVATE KEY`, or a
/// traditional key with `Proc-Type: 4,ENCRYPTED`), which fxpay cannot use: it has no
/// passphrase to ask for.
fn is_encrypted_key(pem: &[u8]) -> bool {
    let has = |needle: &[u8]| pem.windows(needle.len()).any(|w| w == needle);
    has(b"-----BEGIN ENCRYPTED PRIVATE KEY-----") || has(b"Proc-Type: 4,ENCRYPTED")
}

/// The certificates of a PEM bundle (`ca_bundle`), refused if unreadable or empty.
pub(crate) fn read_roots(path: &str) -> Result<Vec<CertificateDer<'static>>> {
    let pem = read_pem_file("ca_bundle", path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::config(format!("ca_bundle {path:?} is not a PEM bundle: {e}")))?;
    if certs.is_empty() {
        return Err(Error::config(format!(
            "ca_bundle {path:?} holds no certificate"
        )));
    }
    Ok(certs)
}

/// A TLS client identity (`client_cert`/`client_key`): a certificate chain and its key.
#[derive(Debug)]
pub(crate) struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Identity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

/// Reads a client identity: the certificate chain from `cert`, the key from `key`, or from
/// `cert` too when `key` is `None` (one PEM holding both). A file that is missing or
/// unreadable, or that holds no certificate or no key, is a `ConfigurationError`.
pub(crate) fn read_identity(cert: &str, key: Option<&str>) -> Result<Identity> {
    let read = read_pem_file;
    let cert_pem = read("client_cert", cert)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::config(format!("client_cert {cert:?} is not PEM: {e}")))?;
    if chain.is_empty() {
        return Err(Error::config(format!(
            "client_cert {cert:?} holds no certificate"
        )));
    }
    let (key_pem, key_path, what) = match key {
        Some(k) => (read("client_key", k)?, k, "client_key"),
        None => (cert_pem.clone(), cert, "client_cert"),
    };
    if is_encrypted_key(&key_pem) {
        return Err(Error::config(format!(
            "{what} {key_path:?} holds an encrypted private key, which fxpay cannot use (it \
             has no passphrase to ask for): give the key decrypted, for example written by \
             `openssl pkey -in {key_path} -out key.pem`, in a file only you can read"
        )));
    }
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| {
        Error::config(format!(
            "{what} {key_path:?} holds no private key (PEM: PKCS#8, PKCS#1 or SEC1)"
        ))
    })?;
    Ok(Identity { chain, key })
}

/// The configuration of a client with an identity: the shared one's trust and ALPN, plus the
/// certificate (made for that client, not shared).
pub(crate) fn client_config_with_identity(
    extra: &[CertificateDer<'static>],
    identity: &Identity,
) -> Result<Arc<rustls::ClientConfig>> {
    let (provider, verifier) = trust(extra)?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config(format!("cannot set up TLS: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(identity.chain.clone(), identity.key.clone_key())
        .map_err(|e| {
            Error::config(format!(
                "the client certificate and key do not go together: {e}"
            ))
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The configuration that trusts the system's roots and `extra`: built on first use, then
/// the same one for every pool of this process.
pub(crate) fn client_config(
    extra: &[CertificateDer<'static>],
) -> Result<Arc<rustls::ClientConfig>> {
    if let Some(found) = find(extra) {
        return Ok(found);
    }
    // Built without the lock held, which is only ever held for a lookup.
    let built = Arc::new(build(extra)?);
    let mut all = configs().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, first)) = all.iter().find(|(roots, _)| roots.as_slice() == extra) {
        return Ok(first.clone()); // another thread built the same one meanwhile
    }
    all.push((extra.to_vec(), built.clone()));
    Ok(built)
}

fn find(extra: &[CertificateDer<'static>]) -> Option<Arc<rustls::ClientConfig>> {
    configs()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .find(|(roots, _)| roots.as_slice() == extra)
        .map(|(_, config)| config.clone())
}

/// What reqwest builds by default with its `rustls` feature, made once: the process's
/// default crypto provider (aws-lc-rs unless the application installed another), the
/// verifier (see [`trust`]), and ALPN offering h2, then HTTP/1.1.
fn build(extra: &[CertificateDer<'static>]) -> Result<rustls::ClientConfig> {
    let (provider, verifier) = trust(extra)?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config(format!("cannot set up TLS: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_cert_resolver(Arc::new(NoClientCert));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The crypto provider and the verifier: with a CA bundle (`extra`), the bundle's roots
/// alone, as `curl --cacert` and requests' `verify=path` do (the system's store is never
/// read: a cold start that makes one call over TLS parsed every certificate of the system,
/// about 10 ms, twice where `SSL_CERT_FILE` names the system's bundle); without one, the
/// system's trust through rustls-platform-verifier (a company CA installed in the system
/// store is trusted).
fn trust(
    extra: &[CertificateDer<'static>],
) -> Result<(
    Arc<rustls::crypto::CryptoProvider>,
    Arc<dyn rustls::client::danger::ServerCertVerifier>,
)> {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    if extra.is_empty() {
        let verifier = rustls_platform_verifier::Verifier::new(provider.clone()).map_err(|e| {
            Error::config(format!("cannot load the system's root certificates: {e}"))
        })?;
        return Ok((provider, Arc::new(verifier)));
    }
    let mut roots = rustls::RootCertStore::empty();
    for cert in extra {
        roots.add(cert.clone()).map_err(|e| {
            Error::config(format!(
                "the CA bundle holds a certificate that cannot be a root: {e}"
            ))
        })?;
    }
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| Error::config(format!("cannot set up TLS with the CA bundle: {e}")))?;
    let verifier: Arc<dyn rustls::client::danger::ServerCertVerifier> = verifier;
    Ok((provider, verifier))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate, made for the test.
    fn cert() -> CertificateDer<'static> {
        let key = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
        key.cert.der().clone()
    }

    #[test]
    fn one_configuration_per_set_of_extra_roots() {
        let a = cert();
        let b = cert();
        let with_a = client_config(std::slice::from_ref(&a)).expect("config");
        let again = client_config(std::slice::from_ref(&a)).expect("config");
        assert!(Arc::ptr_eq(&with_a, &again), "built once, then shared");
        let with_b = client_config(std::slice::from_ref(&b)).expect("config");
        assert!(
            !Arc::ptr_eq(&with_a, &with_b),
            "other roots, another configuration"
        );
        let system = client_config(&[]).expect("config");
        assert!(!Arc::ptr_eq(&with_a, &system));
        assert_eq!(
            system.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
    }

    #[test]
    fn a_bundle_without_certificates_is_refused() {
        let dir = std::env::temp_dir().join(format!("fxpay-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").expect("write");
        let path = empty.to_str().expect("utf-8 path");
        let err = read_roots(path).expect_err("refused").to_string();
        assert!(err.contains("holds no certificate"), "{err}");
        let missing = dir.join("missing.pem");
        let err = read_roots(missing.to_str().expect("utf-8 path"))
            .expect_err("refused")
            .to_string();
        assert!(err.contains("cannot read ca_bundle"), "{err}");
        let pem = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            "not base64!"
        );
        std::fs::write(&empty, pem).expect("write");
        let err = read_roots(path).expect_err("refused").to_string();
        assert!(err.contains("is not a PEM bundle"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
