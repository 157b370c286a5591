//! Roster's TLS plumbing, shared by the listeners (`transport`), the
//! clients (`client`), the agent (`agent`) and `roster serve ca`.
//!
//! * rustls with the `ring` provider (no OpenSSL, no cmake): TLS 1.3 and
//!   1.2 with rustls's safe defaults.
//! * [`server_config`]: the service's certificate chain and key, and
//!   optionally the CA that signs client certificates (clients without a
//!   certificate may still connect and authenticate with a bearer token).
//! * [`client_config`]: the CA that signs the service's certificate, and
//!   optionally the client's own certificate and key.
//! * [`PeerCert`]: what Roster reads from a verified client certificate:
//!   its name (first DNS subject alternative name, else the common name)
//!   and the organizational units of its subject (where `roster serve ca
//!   issue --role` writes the role); [`RoleMap`] turns that into an
//!   [`rpc::Role`].
//! * [`ca`]: the certificate authority helper behind `roster serve ca`.

pub mod ca;
pub mod enrol;
mod roles;
pub mod served;
pub mod verify;

pub use roles::{RoleMap, RoleMapError};
pub use rustls;
pub use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
pub use served::{Expiry, ServerCert};
pub use tokio_rustls::{client, server, TlsAcceptor, TlsConnector};
pub use verify::{ClientVerifier, ServerVerifier};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, ServerConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Errors loading TLS material or building a configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {what} {}: {}", path.display(), io_text(.source))]
    Read {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} {}: {msg}", path.display())]
    Pem {
        what: &'static str,
        path: PathBuf,
        msg: String,
    },
    #[error("invalid TLS configuration: {0}")]
    Config(String),
}

use rpc::errno::io_text;

/// The crypto provider Roster uses everywhere (`ring`): its default cipher
/// suites, AES-128-GCM with SHA-256 preferred (both sides are Roster, so
/// this is what is negotiated). SHA-256 runs on the CPU's SHA extensions
/// where SHA-384 has none: a handshake's key schedule was the largest
/// single cost of a 16,384-agent join (bench/tls.sh); AES-128 is TLS 1.3's
/// mandatory suite.
pub fn provider() -> Arc<CryptoProvider> {
    use rustls::CipherSuite as C;
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites.sort_by_key(|s| {
        let tls12 = s.tls13().is_none();
        let preferred = matches!(
            s.suite(),
            C::TLS13_AES_128_GCM_SHA256 | C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        );
        (tls12, !preferred)
    });
    Arc::new(p)
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

/// Every certificate of a PEM file (a chain: the leaf first).
pub fn load_certs(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    load_pem(
        what,
        path,
        "certificate (expected PEM \"BEGIN CERTIFICATE\")",
    )
}

/// Every object of type `T` in a PEM file; none is an error naming
/// `expected`.
pub(crate) fn load_pem<T: PemObject>(
    what: &'static str,
    path: &Path,
    expected: &str,
) -> Result<Vec<T>, TlsError> {
    let pem = read(what, path)?;
    let bad = |msg: String| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        msg,
    };
    let items = T::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not a valid PEM file: {e}")))?;
    if items.is_empty() {
        return Err(bad(format!("contains no {expected}")));
    }
    Ok(items)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let what = "private key";
    let pem = read(what, path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        msg: match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "contains no private key (expected PEM \"BEGIN PRIVATE KEY\")".into()
            }
            e => format!("not a valid PEM private key: {e}"),
        },
    })
}

/// The service's TLS configuration: its certificate chain and key, and,
/// with `client_ca`, verification of client certificates signed by that
/// CA (a client without a certificate is still accepted: it must then
/// present a bearer token).
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let verifier = client_ca
        .map(|ca| ClientVerifier::new(ca, None))
        .transpose()?;
    server_config_with(cert, key, verifier)
}

/// [`server_config`] with a client verifier the caller keeps (to reload
/// its CRL on SIGHUP).
pub fn server_config_with(
    cert: &Path,
    key: &Path,
    verifier: Option<Arc<ClientVerifier>>,
) -> Result<Arc<ServerConfig>, TlsError> {
    server_config_reloadable(ServerCert::load(cert, key)?, verifier)
}

/// [`server_config_with`] answering with `cert`, which the caller keeps
/// (to read it again on SIGHUP: [`ServerCert::reload`]).
pub fn server_config_reloadable(
    cert: Arc<ServerCert>,
    verifier: Option<Arc<ClientVerifier>>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match verifier {
        Some(v) => builder.with_client_cert_verifier(v),
        None => builder.with_no_client_auth(),
    };
    let mut cfg = builder.with_cert_resolver(cert);
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    // No session resumption: Roster's clients are long-lived agent
    // sessions or one-shot commands, neither keeps a ticket it could use
    // (see `client_config`), so tickets were pure cost at every handshake.
    cfg.send_tls13_tickets = 0;
    cfg.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    Ok(Arc::new(cfg))
}

/// A client's TLS configuration: trust `ca` (the CA that signed the
/// service's certificate); present `identity` (certificate chain, key)
/// when given.
pub fn client_config(
    ca: &Path,
    identity: Option<(&Path, &Path)>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .dangerous()
        // Not a weaker verifier: rustls's WebPkiServerVerifier, plus the
        // checks webpki leaves out (see `verify`).
        .with_custom_certificate_verifier(ServerVerifier::new(ca)?);
    let mut cfg = match identity {
        Some((cert, key)) => {
            let chain = load_certs("certificate", cert)?;
            let key = load_key(key)?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                TlsError::Config(format!(
                    "certificate {} and its key do not go together: {e}",
                    cert.display()
                ))
            })?
        }
        None => builder.with_no_client_auth(),
    };
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Every connection makes a full handshake: what a real agent does when
    // it first joins, and what the simulator's virtual agents (sharing
    // this configuration) must do to stand for real ones.
    cfg.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(cfg))
}

/// The name a client checks the service's certificate against: the host
/// of the URI (a DNS name or an IP address).
pub fn server_name(host: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(host.to_string())
        .map_err(|_| TlsError::Config(format!("'{host}' is not a valid DNS name or IP address")))
}

/// The client side of a TLS session over `io` (a connected stream) to
/// `host`, whose certificate must be valid for that name.  `cfg`: the
/// client configuration; without one the error says which option gives
/// the CA (`ca_hint`, e.g. "--ca" or "--ca or ROSTER_CA").  Shared by the
/// client library and the agent.
pub async fn connect<IO>(
    io: IO,
    host: &str,
    cfg: Option<&Arc<ClientConfig>>,
    ca_hint: &str,
) -> std::io::Result<client::TlsStream<IO>>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use std::io::{Error, ErrorKind};
    let Some(cfg) = cfg else {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("tls:// needs a CA certificate ({ca_hint})"),
        ));
    };
    let name = server_name(host).map_err(|e| Error::new(ErrorKind::InvalidInput, e.to_string()))?;
    TlsConnector::from(Arc::clone(cfg)).connect(name, io).await
}

/// What Roster reads from a (verified) client certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCert {
    /// The first DNS subject alternative name, else the subject's common
    /// name: the host an agent with this certificate speaks for.
    pub name: String,
    /// The subject's organizational units (`OU=`), in order.
    pub units: Vec<String>,
}

impl PeerCert {
    /// Read a DER certificate; `None` if it has neither a DNS name nor a
    /// common name (or cannot be parsed, which cannot happen after
    /// rustls verified it).
    pub fn parse(der: &[u8]) -> Option<PeerCert> {
        let (_, x) = x509_parser::parse_x509_certificate(der).ok()?;
        let dns = x.subject_alternative_name().ok().flatten().and_then(|san| {
            san.value.general_names.iter().find_map(|g| match g {
                x509_parser::extensions::GeneralName::DNSName(s) => Some(s.to_string()),
                _ => None,
            })
        });
        let cn = || {
            x.subject()
                .iter_common_name()
                .find_map(|a| a.as_str().ok().map(str::to_string))
        };
        let name = dns.or_else(cn).filter(|n| !n.is_empty())?;
        let units = x
            .subject()
            .iter_organizational_unit()
            .filter_map(|a| a.as_str().ok().map(str::to_string))
            .collect();
        Some(PeerCert { name, units })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_empty_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("none.pem");
        let e = load_certs("CA certificate", &p).unwrap_err().to_string();
        assert!(e.starts_with("cannot read CA certificate"), "{e}");
        assert!(e.ends_with("No such file or directory"), "{e}");
        std::fs::write(&p, "hello\n").unwrap();
        let e = load_certs("certificate", &p).unwrap_err().to_string();
        assert!(e.contains("contains no certificate"), "{e}");
        let e = load_key(&p).unwrap_err().to_string();
        assert!(e.contains("contains no private key"), "{e}");
    }

    #[test]
    fn aes_128_gcm_sha256_is_preferred() {
        use rustls::CipherSuite as C;
        let p = provider();
        let suites: Vec<C> = p.cipher_suites.iter().map(|s| s.suite()).collect();
        assert_eq!(suites[0], C::TLS13_AES_128_GCM_SHA256);
        // Nothing dropped: the defaults, reordered.
        let mut all: Vec<C> = rustls::crypto::ring::default_provider()
            .cipher_suites
            .iter()
            .map(|s| s.suite())
            .collect();
        let mut ours = suites.clone();
        all.sort_by_key(|c| u16::from(*c));
        ours.sort_by_key(|c| u16::from(*c));
        assert_eq!(ours, all);
        // TLS 1.3 suites still come before TLS 1.2 ones, and the first
        // TLS 1.2 one is AES-128-GCM with SHA-256 too.
        let first12 = suites
            .iter()
            .position(|c| format!("{c:?}").starts_with("TLS_ECDHE"))
            .unwrap();
        assert!(suites[..first12]
            .iter()
            .all(|c| format!("{c:?}").starts_with("TLS13_")));
        assert!(suites[first12..]
            .iter()
            .all(|c| format!("{c:?}").starts_with("TLS_ECDHE")));
        assert_eq!(suites[first12], C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256);
    }

    #[test]
    fn configs_from_issued_files() {
        let dir = tempfile::tempdir().unwrap();
        ca::init(dir.path(), "Test CA", 30).unwrap();
        let issued =
            ca::issue(dir.path(), dir.path(), &["node1".into()], "agent", &[], 10).unwrap();
        assert_eq!(issued.len(), 1);
        let (cert, key) = (&issued[0].cert, &issued[0].key);
        let ca = dir.path().join(ca::CA_CERT);
        let srv = server_config(cert, key, Some(&ca)).unwrap();
        // No session tickets, no session cache (nobody could resume).
        assert_eq!(srv.send_tls13_tickets, 0);
        assert!(!srv.session_storage.can_cache());
        client_config(&ca, Some((cert, key))).unwrap();
        client_config(&ca, None).unwrap();
        // a key that does not match the certificate
        let other = ca::issue(dir.path(), dir.path(), &["node2".into()], "agent", &[], 10).unwrap();
        let e = server_config(cert, &other[0].key, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("do not go together"), "{e}");
        let der = load_certs("certificate", cert).unwrap();
        let p = PeerCert::parse(&der[0]).unwrap();
        assert_eq!(p.name, "node1");
        assert_eq!(p.units, vec!["agent".to_string()]);
    }
}
