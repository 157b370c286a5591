//! A small certificate authority for a Roster site (`roster serve ca`).
//!
//! `init` makes a self-signed CA (ECDSA P-256) in a directory: `ca.pem`
//! (give it to every node and client) and `ca.key` (mode 0600, keep it on
//! the admin host).  `issue` signs one certificate per name: subject
//! `CN=NAME, OU=ROLE`, a DNS subject alternative name `NAME` (an IP
//! address SAN when the name is an address), usable both as a TLS server
//! and as a TLS client certificate, written as `NAME.pem` and `NAME.key`
//! (mode 0600).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};

/// File names inside a CA directory.
pub const CA_CERT: &str = "ca.pem";
pub const CA_KEY: &str = "ca.key";

/// The roles `issue` writes (the subject's OU).
pub const ROLES: &[&str] = &["agent", "user", "scheduler", "admin", "owner"];

#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("{}: {}", path.display(), crate::io_text(.source))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} exists already: not overwriting a certificate authority", .0.display())]
    Exists(PathBuf),
    #[error("{}: {msg}", path.display())]
    Bad { path: PathBuf, msg: String },
    #[error("unknown role '{0}': expected one of agent, user, scheduler, admin, owner")]
    Role(String),
    #[error("invalid certificate name '{0}': {1}")]
    Name(String, String),
    #[error("cannot make the certificate: {0}")]
    Gen(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CaError + '_ {
    move |source| CaError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn gen(e: rcgen::Error) -> CaError {
    CaError::Gen(e.to_string())
}

/// Validity of an issued certificate.
#[derive(Debug, Clone, Copy)]
pub struct Validity {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

impl Validity {
    /// From an hour ago (clock skew) for `days` days.
    pub fn days(days: u32) -> Validity {
        let now = SystemTime::now();
        Validity {
            not_before: now - Duration::from_secs(3600),
            not_after: now + Duration::from_secs(86_400 * u64::from(days.max(1))),
        }
    }
}

/// One issued certificate.
#[derive(Debug, Clone)]
pub struct Issued {
    pub name: String,
    pub cert: PathBuf,
    pub key: PathBuf,
}

fn random_serial() -> Result<SerialNumber, CaError> {
    let mut b = [0u8; 16];
    rustls::crypto::ring::default_provider()
        .secure_random
        .fill(&mut b)
        .map_err(|_| CaError::Gen("no random numbers available".into()))?;
    b[0] &= 0x7f; // positive
    b[0] |= 0x01; // and of full length
    Ok(SerialNumber::from_slice(&b))
}

/// Write `data` to `path` (mode `mode`) through a temporary file and a
/// rename, so a reader never sees half a key.
fn write_file(path: &Path, data: &[u8], mode: u32, exclusive: bool) -> Result<(), CaError> {
    if exclusive && path.exists() {
        return Err(CaError::Exists(path.to_path_buf()));
    }
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io(&tmp))?;
    f.write_all(data).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io(path))
}

/// Make a CA in `dir` (created if missing): `ca.pem`, `ca.key`.  Refuses
/// to overwrite an existing one.
pub fn init(dir: &Path, common_name: &str, days: u32) -> Result<PathBuf, CaError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let cert_path = dir.join(CA_CERT);
    let key_path = dir.join(CA_KEY);
    for p in [&cert_path, &key_path] {
        if p.exists() {
            return Err(CaError::Exists(p.clone()));
        }
    }
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn.push(DnType::OrganizationName, "Roster");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let v = Validity::days(days);
    params.not_before = v.not_before.into();
    params.not_after = v.not_after.into();
    params.serial_number = Some(random_serial()?);
    let key = KeyPair::generate().map_err(gen)?;
    let cert = params.self_signed(&key).map_err(gen)?;
    write_file(&key_path, key.serialize_pem().as_bytes(), 0o600, true)?;
    write_file(&cert_path, cert.pem().as_bytes(), 0o644, true)?;
    Ok(cert_path)
}

/// Sign one certificate per name with the CA in `ca_dir`, written to
/// `out_dir` as `NAME.pem`/`NAME.key` (replacing older ones); `role` is
/// written as the subject's OU; `extra_sans` (DNS names or IP addresses)
/// are added to every certificate.
pub fn issue(
    ca_dir: &Path,
    out_dir: &Path,
    names: &[String],
    role: &str,
    extra_sans: &[String],
    days: u32,
) -> Result<Vec<Issued>, CaError> {
    issue_with(
        ca_dir,
        out_dir,
        names,
        role,
        extra_sans,
        Validity::days(days),
    )
}

/// [`issue`] with an explicit validity period (tests make expired
/// certificates with it).
pub fn issue_with(
    ca_dir: &Path,
    out_dir: &Path,
    names: &[String],
    role: &str,
    extra_sans: &[String],
    validity: Validity,
) -> Result<Vec<Issued>, CaError> {
    if !ROLES.contains(&role) {
        return Err(CaError::Role(role.to_string()));
    }
    let ca_cert_path = ca_dir.join(CA_CERT);
    let ca_key_path = ca_dir.join(CA_KEY);
    let ca_pem = std::fs::read_to_string(&ca_cert_path).map_err(io(&ca_cert_path))?;
    let ca_key_pem = std::fs::read_to_string(&ca_key_path).map_err(io(&ca_key_path))?;
    let ca_key = KeyPair::from_pem(&ca_key_pem).map_err(|e| CaError::Bad {
        path: ca_key_path.clone(),
        msg: format!("not a usable private key: {e}"),
    })?;
    let ca_params = CertificateParams::from_ca_cert_pem(&ca_pem).map_err(|e| CaError::Bad {
        path: ca_cert_path.clone(),
        msg: format!("not a usable CA certificate: {e}"),
    })?;
    // Re-signing the CA's own parameters gives rcgen the issuer name and
    // key identifier; the result is not written anywhere.
    let ca = ca_params.self_signed(&ca_key).map_err(gen)?;
    std::fs::create_dir_all(out_dir).map_err(io(out_dir))?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(CaError::Name(
                name.clone(),
                "expected a host name or an address".into(),
            ));
        }
        let mut sans: Vec<String> = vec![name.clone()];
        sans.extend(extra_sans.iter().filter(|s| *s != name).cloned());
        let mut params =
            CertificateParams::new(sans).map_err(|e| CaError::Name(name.clone(), e.to_string()))?;
        // An IP address first makes CN the name an agent is known by.
        params
            .subject_alt_names
            .sort_by_key(|s| !matches!(s, SanType::DnsName(_)));
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name.as_str());
        dn.push(DnType::OrganizationalUnitName, role);
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        params.not_before = validity.not_before.into();
        params.not_after = validity.not_after.into();
        params.serial_number = Some(random_serial()?);
        let key = KeyPair::generate().map_err(gen)?;
        let cert = params.signed_by(&key, &ca, &ca_key).map_err(gen)?;
        let cert_path = out_dir.join(format!("{name}.pem"));
        let key_path = out_dir.join(format!("{name}.key"));
        write_file(&key_path, key.serialize_pem().as_bytes(), 0o600, false)?;
        write_file(&cert_path, cert.pem().as_bytes(), 0o644, false)?;
        out.push(Issued {
            name: name.clone(),
            cert: cert_path,
            key: key_path,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn init_refuses_to_overwrite_and_keys_are_private() {
        let dir = tempfile::tempdir().unwrap();
        init(dir.path(), "Site CA", 10).unwrap();
        let e = init(dir.path(), "Site CA", 10).unwrap_err().to_string();
        assert!(e.contains("exists already"), "{e}");
        let mode = std::fs::metadata(dir.path().join(CA_KEY))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let issued = issue(
            dir.path(),
            &dir.path().join("out"),
            &["n1".into(), "127.0.0.1".into()],
            "admin",
            &["localhost".into()],
            5,
        )
        .unwrap();
        assert_eq!(issued.len(), 2);
        let mode = std::fs::metadata(&issued[0].key)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // the address-named certificate is known by its DNS SAN
        let der = crate::load_certs("certificate", &issued[1].cert).unwrap();
        let p = crate::PeerCert::parse(&der[0]).unwrap();
        assert_eq!(p.name, "localhost");
        assert_eq!(p.units, vec!["admin".to_string()]);
    }

    #[test]
    fn bad_role_and_missing_ca() {
        let dir = tempfile::tempdir().unwrap();
        let e = issue(dir.path(), dir.path(), &["a".into()], "root", &[], 1).unwrap_err();
        assert!(e.to_string().starts_with("unknown role 'root'"), "{e}");
        let e = issue(dir.path(), dir.path(), &["a".into()], "agent", &[], 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("ca.pem: No such file or directory"), "{e}");
    }
}
