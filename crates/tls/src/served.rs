//! The service's own certificate, replaceable while it runs (SIGHUP after
//! `roster serve ca renew`), and the expiry dates of the TLS files in
//! force (the `roster_tls_expiry_timestamp_seconds` metric).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::pki_types::CertificateDer;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::TlsError;

/// A certificate chain and key read from two files, answered to every
/// handshake; [`ServerCert::reload`] reads them again (new handshakes get
/// the new pair, open connections keep theirs).
#[derive(Debug)]
pub struct ServerCert {
    cert: PathBuf,
    key: PathBuf,
    current: RwLock<Arc<CertifiedKey>>,
}

fn certified(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain = crate::load_certs("certificate", cert)?;
    let der = crate::load_key(key)?;
    CertifiedKey::from_der(chain, der, &crate::provider())
        .map(Arc::new)
        .map_err(|e| {
            TlsError::Config(format!(
                "certificate {} and its key do not go together: {e}",
                cert.display()
            ))
        })
}

impl ServerCert {
    pub fn load(cert: &Path, key: &Path) -> Result<Arc<ServerCert>, TlsError> {
        Ok(Arc::new(ServerCert {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            current: RwLock::new(certified(cert, key)?),
        }))
    }

    /// Read both files again; on an error the pair in force stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let new = certified(&self.cert, &self.key)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = new;
        Ok(())
    }

    pub fn cert_path(&self) -> &Path {
        &self.cert
    }

    /// The leaf certificate in force.
    pub fn leaf(&self) -> CertificateDer<'static> {
        let cur = self.current.read().unwrap_or_else(|e| e.into_inner());
        cur.cert[0].clone()
    }
}

impl ResolvesServerCert for ServerCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.current.read().unwrap_or_else(|e| e.into_inner()),
        ))
    }
}

/// When one TLS object stops being valid.
#[derive(Debug, Clone, PartialEq)]
pub struct Expiry {
    /// The subject's common name (a CRL: its issuer's), else the whole
    /// subject.
    pub name: String,
    /// notAfter (a CRL: nextUpdate), seconds since the epoch.
    pub at: i64,
}

fn cn_of(name: &x509_parser::x509::X509Name<'_>) -> String {
    name.iter_common_name()
        .next()
        .and_then(|c| c.as_str().ok())
        .map(str::to_string)
        .unwrap_or_else(|| name.to_string())
}

/// The expiry of one certificate.
pub fn cert_expiry(der: &CertificateDer<'_>) -> Result<Expiry, String> {
    let (_, x) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("certificate cannot be parsed: {e}"))?;
    Ok(Expiry {
        name: cn_of(x.subject()),
        at: x.validity().not_after.timestamp(),
    })
}

/// The expiry of every certificate of a PEM file (the CAs of
/// `tls-client-ca`).
pub fn certs_expiry(path: &Path) -> Result<Vec<Expiry>, TlsError> {
    let bad = |msg: String| TlsError::Pem {
        what: "certificate",
        path: path.to_path_buf(),
        msg,
    };
    crate::load_certs("certificate", path)?
        .iter()
        .map(|c| cert_expiry(c).map_err(bad))
        .collect()
}

/// The next update of every CRL of a PEM file (a CRL without one never
/// expires and is left out).
pub fn crls_expiry(path: &Path) -> Result<Vec<Expiry>, TlsError> {
    let bad = |msg: String| TlsError::Pem {
        what: "certificate revocation list",
        path: path.to_path_buf(),
        msg,
    };
    let mut out = Vec::new();
    for der in crate::verify::load_crls(path)? {
        let (_, crl) =
            x509_parser::parse_x509_crl(&der).map_err(|e| bad(format!("cannot be parsed: {e}")))?;
        if let Some(next) = crl.next_update() {
            out.push(Expiry {
                name: cn_of(crl.issuer()),
                at: next.timestamp(),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ca;

    #[test]
    fn reload_swaps_the_pair_and_expiries_are_read() {
        let dir = ca::tests::site_ca();
        let d = dir.path();
        ca::issue(d, d, &["head".into()], "owner", &[], 5).unwrap();
        let sc = ServerCert::load(&d.join("head.pem"), &d.join("head.key")).unwrap();
        let first = cert_expiry(&sc.leaf()).unwrap();
        assert_eq!(first.name, "head");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        assert!((first.at - now - 5 * 86_400).abs() < 60, "{first:?}");
        ca::renew(d, d, "head", ca::Validity::days(60), false).unwrap();
        // not in force until reloaded
        assert_eq!(cert_expiry(&sc.leaf()).unwrap(), first);
        sc.reload().unwrap();
        let second = cert_expiry(&sc.leaf()).unwrap();
        assert!(second.at - first.at > 50 * 86_400, "{second:?}");
        // a broken key file: the pair in force stays
        std::fs::write(d.join("head.key"), "nothing").unwrap();
        assert!(sc.reload().is_err());
        assert_eq!(cert_expiry(&sc.leaf()).unwrap(), second);
        let cas = certs_expiry(&d.join(ca::CA_CERT)).unwrap();
        assert_eq!(cas.len(), 1);
        assert_eq!(cas[0].name, "Site CA");
        assert!((cas[0].at - now - 10 * 86_400).abs() < 60, "{cas:?}");
        ca::revoke(d, d, "head", 3).unwrap();
        let crls = crls_expiry(&d.join(ca::CA_CRL)).unwrap();
        assert_eq!(crls.len(), 1);
        assert_eq!(crls[0].name, "Site CA");
        assert!((crls[0].at - now - 3 * 86_400).abs() < 60, "{crls:?}");
    }
}
