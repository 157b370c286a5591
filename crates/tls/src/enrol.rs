//! Per-agent enrolment (`roster agent --enrol`): the agent makes its key
//! and a certificate signing request for its own host name; the service,
//! holding the site CA (`[serve] enrol-ca`), signs it as `ca issue` would
//! (`CN=HOST, OU=agent`, DNS name HOST, `digitalSignature`, `clientAuth`
//! and `serverAuth`) and keeps a copy as `HOST.pem` in the CA directory,
//! so that `roster serve ca revoke` and `renew` work on it as on any
//! issued certificate.
//!
//! A name whose certificate there is still valid and not revoked is not
//! signed again: a second enrolment needs an admin to revoke the first
//! certificate (`roster serve ca revoke`) or to remove `HOST.pem`.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rcgen::{
    CertificateParams, CertificateSigningRequestParams, DistinguishedName, DnType, KeyPair,
};

use crate::ca::{self, CaError, Validity};

/// Why an enrolment was refused (or failed).
#[derive(Debug, thiserror::Error)]
pub enum EnrolError {
    #[error("not a usable certificate signing request: {0}")]
    Csr(String),
    #[error("the request names '{found}', not the host '{host}' it enrols")]
    Name { host: String, found: String },
    #[error("{host} is enrolled already (certificate {}, valid until {until}): an admin allows a new enrolment by revoking it (roster serve ca revoke) or removing that file", path.display())]
    Enrolled {
        host: String,
        path: PathBuf,
        until: String,
    },
    #[error(transparent)]
    Ca(#[from] CaError),
}

/// A new key and a signing request for `host` (PEM texts): the agent's
/// half.
pub fn request(host: &str) -> Result<(String, String), CaError> {
    let key = KeyPair::generate().map_err(|e| CaError::Gen(e.to_string()))?;
    let mut params = CertificateParams::new(vec![host.to_string()])
        .map_err(|e| CaError::Name(host.to_string(), e.to_string()))?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, host);
    params.distinguished_name = dn;
    let csr = params
        .serialize_request(&key)
        .map_err(|e| CaError::Gen(e.to_string()))?;
    let pem = csr.pem().map_err(|e| CaError::Gen(e.to_string()))?;
    Ok((key.serialize_pem(), pem))
}

/// What the service hands back.
#[derive(Debug, Clone)]
pub struct Enrolled {
    /// The agent's certificate (PEM).
    pub cert: String,
    /// The CA certificate (PEM): what the agent checks the service with.
    pub ca: String,
    /// Its serial number, in hexadecimal.
    pub serial: String,
    /// Where the copy was written (`ca_dir/HOST.pem`).
    pub path: PathBuf,
}

/// Sign `csr` (PEM) for `host` with the CA in `ca_dir`, valid for
/// `validity`: the request's subject common name must be `host` and its
/// subject alternative names (if any) `host` only; nothing else of the
/// request is used but its public key.  Refuses a host already holding a
/// valid, unrevoked certificate in `ca_dir`.
pub fn sign(
    ca_dir: &Path,
    host: &str,
    csr: &str,
    validity: Validity,
) -> Result<Enrolled, EnrolError> {
    ca::check_name(host, true)?;
    let req = CertificateSigningRequestParams::from_pem(csr)
        .map_err(|e| EnrolError::Csr(e.to_string()))?;
    let found: Vec<String> = req
        .params
        .distinguished_name
        .iter()
        .filter(|(t, _)| **t == DnType::CommonName)
        .map(|(_, v)| match v {
            rcgen::DnValue::PrintableString(s) => s.to_string(),
            rcgen::DnValue::Utf8String(s) => s.clone(),
            other => format!("{other:?}"),
        })
        .collect();
    let wrong = |found: String| EnrolError::Name {
        host: host.to_string(),
        found,
    };
    if found.as_slice() != [host.to_string()] {
        return Err(wrong(found.join(",")));
    }
    for san in &req.params.subject_alt_names {
        match san {
            rcgen::SanType::DnsName(n) if n.as_str() == host => {}
            other => return Err(wrong(format!("{other:?}"))),
        }
    }
    let path = ca_dir.join(format!("{host}.pem"));
    if let Some(until) = still_valid(ca_dir, &path)? {
        return Err(EnrolError::Enrolled {
            host: host.to_string(),
            path,
            until,
        });
    }
    let (cert, serial) = ca::sign_public_key(ca_dir, host, "agent", &[], validity, req.public_key)?;
    ca::write_file(&path, cert.as_bytes(), 0o644, false)?;
    let ca_path = ca_dir.join(ca::CA_CERT);
    let ca_pem = std::fs::read_to_string(&ca_path).map_err(|source| CaError::Io {
        path: ca_path,
        source,
    })?;
    Ok(Enrolled {
        cert,
        ca: ca_pem,
        serial,
        path,
    })
}

/// The notAfter of `path` when it is a certificate still valid and not in
/// the CA's revocation list (`ca.crl`); `None` when it is missing,
/// expired, revoked or unreadable as a certificate.
fn still_valid(ca_dir: &Path, path: &Path) -> Result<Option<String>, CaError> {
    if !path.exists() {
        return Ok(None);
    }
    let Ok(der) = crate::load_certs("certificate", path) else {
        return Ok(None);
    };
    let Ok((_, x)) = x509_parser::parse_x509_certificate(&der[0]) else {
        return Ok(None);
    };
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    if x.validity().not_after.timestamp() <= now {
        return Ok(None);
    }
    let crl = ca_dir.join(ca::CA_CRL);
    if crl.exists() {
        let lists =
            crate::verify::load_crls(&crl).map_err(|e| crate::ca::bad(&crl, e.to_string()))?;
        for der in lists {
            if let Ok((_, l)) = x509_parser::parse_x509_crl(&der) {
                if l.iter_revoked_certificates()
                    .any(|r| r.raw_serial() == x.raw_serial())
                {
                    return Ok(None);
                }
            }
        }
    }
    Ok(Some(x.validity().not_after.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_checks_the_name_and_refuses_a_second_enrolment() {
        let dir = ca::tests::site_ca();
        let d = dir.path();
        let (key, csr) = request("node1").unwrap();
        // another host's request
        let e = sign(d, "node2", &csr, Validity::days(5)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the request names 'node1', not the host 'node2' it enrols"
        );
        let e = sign(d, "node1", "garbage", Validity::days(5)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("not a usable certificate signing request"),
            "{e}"
        );
        let e = sign(d, "ca", &csr, Validity::days(5)).unwrap_err();
        assert!(e.to_string().contains("certificate authority's own"), "{e}");
        let got = sign(d, "node1", &csr, Validity::days(5)).unwrap();
        assert_eq!(got.path, d.join("node1.pem"));
        // the certificate is an agent's for node1, with the agent's key
        let der = crate::load_certs("certificate", &got.path).unwrap();
        let p = crate::PeerCert::parse(&der[0]).unwrap();
        assert_eq!(p.name, "node1");
        assert_eq!(p.units, vec!["agent".to_string()]);
        let kp = KeyPair::from_pem(&key).unwrap();
        let (_, x) = x509_parser::parse_x509_certificate(&der[0]).unwrap();
        assert_eq!(
            kp.public_key_raw(),
            x.public_key().subject_public_key.data.as_ref()
        );
        // a second enrolment is refused until the first is revoked
        let (_, csr2) = request("node1").unwrap();
        let e = sign(d, "node1", &csr2, Validity::days(5)).unwrap_err();
        assert!(
            e.to_string().starts_with("node1 is enrolled already"),
            "{e}"
        );
        ca::revoke(d, d, "node1", 5).unwrap();
        sign(d, "node1", &csr2, Validity::days(5)).unwrap();
    }
}
