//! Certificate verification: rustls's standard verifiers
//! ([`WebPkiClientVerifier`], [`WebPkiServerVerifier`]) do the work
//! (chain and signatures, validity period, the CA flag and path length of
//! every intermediate, extended key usage when present, revocation
//! against CRLs); [`ClientVerifier`] and [`ServerVerifier`] wrap them
//! with the three checks webpki leaves out, each read from the
//! certificates with `x509-parser`:
//!
//! * **the trust anchor's path length**: webpki keeps only the subject,
//!   key and name constraints of a trust anchor, so a `pathlen:0` site CA
//!   does not stop a CA certificate it signed from minting more
//!   certificates.  A chain is refused when it carries more intermediate
//!   certificates than the most permissive CA of the file allows.
//! * **key usage**: webpki ignores the keyUsage extension (as browsers
//!   do); Roster requires it, with `digitalSignature` (what a TLS 1.3
//!   handshake signature is).
//! * **extended key usage required**: webpki accepts a certificate
//!   without the extension; Roster requires it to name `clientAuth` for a
//!   client and `serverAuth` for a service.
//!
//! [`ClientVerifier`] also re-reads its CRL file on [`ClientVerifier::reload`]
//! (SIGHUP): the inner webpki verifier is rebuilt and swapped, so the
//! next handshake checks the new list.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, OtherError, RootCertStore,
    SignatureScheme,
};

use crate::TlsError;

/// What a certificate is for (its required extended key usage).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A client (`clientAuth`).
    Client,
    /// A service, or a relay's listener (`serverAuth`).
    Server,
}

/// Why a certificate the webpki verifier accepted is still refused.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("the certificate cannot be parsed")]
    Parse,
    #[error("the certificate has no key usage extension (digitalSignature is required)")]
    NoKeyUsage,
    #[error("the certificate's key usage does not include digitalSignature")]
    NoDigitalSignature,
    #[error("the certificate has no extended key usage extension ({0} is required)")]
    NoExtendedKeyUsage(&'static str),
    #[error("the certificate's extended key usage does not include {0}")]
    WrongPurpose(&'static str),
    #[error(
        "the chain has {got} intermediate CA certificate(s) but the CA's path length allows {allowed}"
    )]
    PathLength { got: usize, allowed: usize },
}

/// rustls shows a custom error with `Debug`: let that be the message.
impl std::fmt::Debug for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl From<PolicyError> for rustls::Error {
    fn from(e: PolicyError) -> rustls::Error {
        rustls::Error::InvalidCertificate(match e {
            PolicyError::Parse => CertificateError::BadEncoding,
            e => CertificateError::Other(OtherError(Arc::new(e))),
        })
    }
}

/// The end entity's key usage and extended key usage, and the chain's
/// length under the anchors' path length (`max_intermediates`: `None`
/// when some anchor has no limit).
pub fn check_policy(
    end_entity: &[u8],
    intermediates: usize,
    max_intermediates: Option<usize>,
    purpose: Purpose,
) -> Result<(), PolicyError> {
    if let Some(allowed) = max_intermediates {
        if intermediates > allowed {
            return Err(PolicyError::PathLength {
                got: intermediates,
                allowed,
            });
        }
    }
    let (_, x) = x509_parser::parse_x509_certificate(end_entity).map_err(|_| PolicyError::Parse)?;
    let ku = x
        .key_usage()
        .map_err(|_| PolicyError::Parse)?
        .ok_or(PolicyError::NoKeyUsage)?;
    if !ku.value.digital_signature() {
        return Err(PolicyError::NoDigitalSignature);
    }
    let name = match purpose {
        Purpose::Client => "clientAuth",
        Purpose::Server => "serverAuth",
    };
    let eku = x
        .extended_key_usage()
        .map_err(|_| PolicyError::Parse)?
        .ok_or(PolicyError::NoExtendedKeyUsage(name))?;
    let ok = match purpose {
        Purpose::Client => eku.value.client_auth,
        Purpose::Server => eku.value.server_auth,
    };
    if !ok {
        return Err(PolicyError::WrongPurpose(name));
    }
    Ok(())
}

/// The trust anchors of a CA file and how many intermediates the most
/// permissive of them allows (`None`: no limit).
pub(crate) fn anchors(path: &Path) -> Result<(RootCertStore, Option<usize>), TlsError> {
    let bad = |msg: String| TlsError::Pem {
        what: "CA certificate",
        path: path.to_path_buf(),
        msg,
    };
    let mut roots = RootCertStore::empty();
    let mut max: Option<Option<usize>> = None;
    for c in crate::load_certs("CA certificate", path)? {
        let (_, x) = x509_parser::parse_x509_certificate(&c)
            .map_err(|e| bad(format!("cannot be parsed: {e}")))?;
        let limit = match x.basic_constraints() {
            Ok(Some(bc)) if bc.value.ca => bc.value.path_len_constraint.map(|n| n as usize),
            Ok(_) => {
                return Err(bad(
                    "is not a CA certificate (basicConstraints CA:FALSE or absent)".into(),
                ))
            }
            Err(e) => return Err(bad(format!("bad basicConstraints: {e}"))),
        };
        max = Some(match (max, limit) {
            (None, l) => l,
            (Some(None), _) | (_, None) => None,
            (Some(Some(a)), Some(b)) => Some(a.max(b)),
        });
        roots
            .add(c)
            .map_err(|e| bad(format!("unusable as a trust anchor: {e}")))?;
    }
    Ok((roots, max.flatten()))
}

/// Every CRL of a PEM file (`roster serve ca revoke` writes one).
pub fn load_crls(path: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, TlsError> {
    crate::load_pem(
        "certificate revocation list",
        path,
        "CRL (expected PEM \"BEGIN X509 CRL\")",
    )
}

/// The service's verifier of client certificates (see the module
/// documentation).  A client without a certificate is let through (it
/// must then present a bearer token).
#[derive(Debug)]
pub struct ClientVerifier {
    roots: Arc<RootCertStore>,
    max_intermediates: Option<usize>,
    crl: Option<PathBuf>,
    hints: Vec<DistinguishedName>,
    inner: RwLock<Arc<dyn ClientCertVerifier>>,
}

/// The signature checks of a verifier, left to its webpki verifier
/// (`self.$inner`): only the certificate checks add Roster's policy.
macro_rules! signatures_by_inner {
    ($($inner:tt)+) => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.$($inner)+.verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.$($inner)+.verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.$($inner)+.supported_verify_schemes()
        }
    };
}

fn build_client(
    roots: &Arc<RootCertStore>,
    crl: Option<&Path>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut b = WebPkiClientVerifier::builder_with_provider(Arc::clone(roots), crate::provider())
        .allow_unauthenticated();
    if let Some(p) = crl {
        // Only end entities: intermediates are refused by the path
        // length of Roster's own CA anyway, and a site CA's CRL covers
        // the certificates it signed.
        b = b
            .with_crls(load_crls(p)?)
            .only_check_end_entity_revocation();
    }
    b.build()
        .map_err(|e| TlsError::Config(format!("client verifier: {e}")))
}

impl ClientVerifier {
    /// Trust the CA certificates of `ca`; refuse the certificates listed
    /// in the CRLs of `crl`.
    pub fn new(ca: &Path, crl: Option<&Path>) -> Result<Arc<ClientVerifier>, TlsError> {
        let (roots, max_intermediates) = anchors(ca)?;
        let roots = Arc::new(roots);
        let inner = build_client(&roots, crl)?;
        Ok(Arc::new(ClientVerifier {
            hints: inner.root_hint_subjects().to_vec(),
            roots,
            max_intermediates,
            crl: crl.map(Path::to_path_buf),
            inner: RwLock::new(inner),
        }))
    }

    /// Read the CRL file again (SIGHUP): handshakes from now on check the
    /// new list.  On an error the old list stays in force.  Returns the
    /// number of CRLs read (0 without a CRL file).
    pub fn reload(&self) -> Result<usize, TlsError> {
        let Some(p) = &self.crl else { return Ok(0) };
        let n = load_crls(p)?.len();
        let inner = build_client(&self.roots, Some(p))?;
        *self.inner.write().unwrap_or_else(|e| e.into_inner()) = inner;
        Ok(n)
    }

    /// The CRL file, if any.
    pub fn crl(&self) -> Option<&Path> {
        self.crl.as_deref()
    }

    fn inner(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::clone(&self.inner.read().unwrap_or_else(|e| e.into_inner()))
    }
}

impl ClientCertVerifier for ClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let ok = self
            .inner()
            .verify_client_cert(end_entity, intermediates, now)?;
        check_policy(
            end_entity,
            intermediates.len(),
            self.max_intermediates,
            Purpose::Client,
        )?;
        Ok(ok)
    }

    signatures_by_inner!(inner());
}

/// A client's verifier of the service's certificate (see the module
/// documentation).
#[derive(Debug)]
pub struct ServerVerifier {
    max_intermediates: Option<usize>,
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerVerifier {
    /// Trust the CA certificates of `ca`.
    pub fn new(ca: &Path) -> Result<Arc<ServerVerifier>, TlsError> {
        let (roots, max_intermediates) = anchors(ca)?;
        let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), crate::provider())
            .build()
            .map_err(|e| TlsError::Config(format!("server verifier: {e}")))?;
        Ok(Arc::new(ServerVerifier {
            max_intermediates,
            inner,
        }))
    }
}

impl ServerCertVerifier for ServerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let ok = self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        check_policy(
            end_entity,
            intermediates.len(),
            self.max_intermediates,
            Purpose::Server,
        )?;
        Ok(ok)
    }

    signatures_by_inner!(inner);

    fn root_hint_subjects(&self) -> Option<&[DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ca;
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair, KeyUsagePurpose,
    };
    use std::io::Write;

    /// `ca::issue` of `names` with `role` and `sans`, valid 5 days, in
    /// the CA directory `dir`.
    fn issue(dir: &Path, names: &[&str], role: &str, sans: &[&str]) {
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        ca::issue(dir, dir, &strings(names), role, &strings(sans), 5).unwrap();
    }

    /// Sign `name` (OU `role`) with the given issuer; `ku`/`eku` as given.
    fn mint(
        issuer: &rcgen::Certificate,
        issuer_key: &KeyPair,
        name: &str,
        role: &str,
        ku: Vec<KeyUsagePurpose>,
        eku: Vec<ExtendedKeyUsagePurpose>,
        is_ca: IsCa,
    ) -> (rcgen::Certificate, KeyPair) {
        let mut p = CertificateParams::new(vec![name.to_string()]).unwrap();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        dn.push(DnType::OrganizationalUnitName, role);
        p.distinguished_name = dn;
        p.key_usages = ku;
        p.extended_key_usages = eku;
        p.is_ca = is_ca;
        p.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, issuer, issuer_key).unwrap();
        (cert, key)
    }

    fn write(dir: &Path, name: &str, chain: &[&rcgen::Certificate], key: &KeyPair) {
        let mut f = std::fs::File::create(dir.join(format!("{name}.pem"))).unwrap();
        for c in chain {
            f.write_all(c.pem().as_bytes()).unwrap();
        }
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
    }

    /// A TLS 1.3 handshake over an in-memory pipe; the server's verdict
    /// on the client certificate (TLS 1.3: the client finishes first).
    fn handshake(
        server: Arc<rustls::ServerConfig>,
        client: Arc<rustls::ClientConfig>,
    ) -> Result<(), String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let (a, b) = tokio::io::duplex(64 * 1024);
            let srv = tokio::spawn(async move {
                crate::TlsAcceptor::from(server)
                    .accept(a)
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
            let cli = crate::connect(b, "localhost", Some(&client), "--ca").await;
            let s = srv.await.unwrap();
            s.and(cli.map(|_| ()).map_err(|e| format!("client: {e}")))
        })
    }

    struct Site {
        dir: tempfile::TempDir,
    }

    impl Site {
        fn new() -> Site {
            let dir = ca::tests::site_ca();
            issue(dir.path(), &["localhost"], "agent", &[]);
            Site { dir }
        }
        fn p(&self, f: &str) -> PathBuf {
            self.dir.path().join(f)
        }
        fn server(&self, crl: Option<&Path>) -> (Arc<rustls::ServerConfig>, Arc<ClientVerifier>) {
            let v = ClientVerifier::new(&self.p("ca.pem"), crl).unwrap();
            let cfg = crate::server_config_with(
                &self.p("localhost.pem"),
                &self.p("localhost.key"),
                Some(Arc::clone(&v)),
            )
            .unwrap();
            (cfg, v)
        }
        fn client(&self, name: &str) -> Arc<rustls::ClientConfig> {
            crate::client_config(
                &self.p("ca.pem"),
                Some((
                    &self.p(&format!("{name}.pem")),
                    &self.p(&format!("{name}.key")),
                )),
            )
            .unwrap()
        }
    }

    #[test]
    fn issued_certificates_pass() {
        let site = Site::new();
        issue(site.dir.path(), &["alice"], "admin", &[]);
        let (srv, _) = site.server(None);
        handshake(srv, site.client("alice")).unwrap();
    }

    #[test]
    fn sub_ca_under_a_pathlen_0_ca_is_refused() {
        let site = Site::new();
        let (ca, ca_key) = ca::load_ca(site.dir.path()).unwrap();
        let (sub, sub_key) = mint(
            &ca,
            &ca_key,
            "sub",
            "owner",
            vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::DigitalSignature,
            ],
            vec![],
            IsCa::Ca(BasicConstraints::Unconstrained),
        );
        let (leaf, leaf_key) = mint(
            &sub,
            &sub_key,
            "mallory",
            "owner",
            vec![KeyUsagePurpose::DigitalSignature],
            vec![ExtendedKeyUsagePurpose::ClientAuth],
            IsCa::ExplicitNoCa,
        );
        write(site.dir.path(), "mallory", &[&leaf, &sub], &leaf_key);
        let (srv, _) = site.server(None);
        let e = handshake(srv, site.client("mallory")).unwrap_err();
        assert!(e.contains("path length allows 0"), "{e}");
    }

    #[test]
    fn key_usage_and_purpose_are_required() {
        let site = Site::new();
        let (ca, ca_key) = ca::load_ca(site.dir.path()).unwrap();
        let cases = [
            (
                "kenc",
                vec![KeyUsagePurpose::KeyEncipherment],
                vec![ExtendedKeyUsagePurpose::ClientAuth],
                "does not include digitalSignature",
            ),
            (
                "noku",
                vec![],
                vec![ExtendedKeyUsagePurpose::ClientAuth],
                "no key usage extension",
            ),
            (
                "noeku",
                vec![KeyUsagePurpose::DigitalSignature],
                vec![],
                "no extended key usage extension (clientAuth is required)",
            ),
            (
                "server",
                vec![KeyUsagePurpose::DigitalSignature],
                vec![ExtendedKeyUsagePurpose::ServerAuth],
                // webpki's own check (the extension is present)
                "",
            ),
        ];
        for (name, ku, eku, text) in cases {
            let (c, k) = mint(&ca, &ca_key, name, "admin", ku, eku, IsCa::ExplicitNoCa);
            write(site.dir.path(), name, &[&c], &k);
            let (srv, _) = site.server(None);
            let e = handshake(srv, site.client(name)).unwrap_err();
            assert!(e.contains(text), "{name}: {e}");
        }
    }

    #[test]
    fn a_client_only_certificate_cannot_serve() {
        let site = Site::new();
        issue(site.dir.path(), &["sched"], "scheduler", &["localhost"]);
        let srv = crate::server_config(&site.p("sched.pem"), &site.p("sched.key"), None).unwrap();
        let cli = crate::client_config(&site.p("ca.pem"), None).unwrap();
        // the client refuses it (webpki: the extension is present
        // without serverAuth) and says so in its alert
        let e = handshake(srv, cli).unwrap_err();
        assert!(e.contains("UnsupportedCertificate"), "{e}");
    }

    #[test]
    fn revoked_after_reload() {
        let site = Site::new();
        issue(site.dir.path(), &["node1", "node2"], "agent", &[]);
        // An empty list to start with: revoke, then revoke into a copy
        // kept aside.
        let r = ca::revoke(site.dir.path(), site.dir.path(), "node2", 30).unwrap();
        assert_eq!(r.count, 1);
        assert!(!r.already);
        let crl = site.p("ca.crl");
        let (srv, v) = site.server(Some(&crl));
        handshake(Arc::clone(&srv), site.client("node1")).unwrap();
        let e = handshake(Arc::clone(&srv), site.client("node2")).unwrap_err();
        assert!(e.to_lowercase().contains("revoked"), "{e}");
        let r = ca::revoke(site.dir.path(), site.dir.path(), "node1", 30).unwrap();
        assert_eq!(r.count, 2);
        // Not yet re-read: still accepted.
        handshake(Arc::clone(&srv), site.client("node1")).unwrap();
        assert_eq!(v.reload().unwrap(), 1);
        let e = handshake(Arc::clone(&srv), site.client("node1")).unwrap_err();
        assert!(e.to_lowercase().contains("revoked"), "{e}");
        // Again: nothing new; a broken file keeps the old list.
        assert!(
            ca::revoke(site.dir.path(), site.dir.path(), "node1", 30)
                .unwrap()
                .already
        );
        std::fs::write(&crl, "junk\n").unwrap();
        let e = v.reload().unwrap_err().to_string();
        assert!(e.contains("contains no CRL"), "{e}");
        assert!(handshake(srv, site.client("node1")).is_err());
        let e = ca::revoke(site.dir.path(), site.dir.path(), "nobody", 30).unwrap_err();
        assert!(
            e.to_string().contains("no certificate issued to 'nobody'"),
            "{e}"
        );
    }
}
