//! A small certificate authority for a Roster site (`roster serve ca`).
//!
//! `init` makes a self-signed CA (ECDSA P-256) in a directory: `ca.pem`
//! (give it to every node and client) and `ca.key` (mode 0600, keep it on
//! the admin host).  `issue` signs one certificate per name: subject
//! `CN=NAME, OU=ROLE`, a DNS subject alternative name `NAME` (an IP
//! address SAN when the name is an address), key usage
//! `digitalSignature`, extended key usage `clientAuth` (and `serverAuth`
//! for the roles that may serve TLS: agent, relay, owner), written as
//! `NAME.pem` and `NAME.key` (mode 0600).  An existing `NAME.pem` or
//! `NAME.key` is replaced only when asked (`force`), and never the CA's
//! own files.  `revoke` adds a certificate's serial number to the CA's
//! revocation list, `ca.crl` (what `[serve] tls-crl` reads).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};

/// File names inside a CA directory.
pub const CA_CERT: &str = "ca.pem";
pub const CA_KEY: &str = "ca.key";
pub const CA_CRL: &str = "ca.crl";

/// The roles `issue` writes (the subject's OU).
pub const ROLES: &[&str] = &["agent", "relay", "user", "scheduler", "admin", "owner"];

/// The roles whose certificates may also serve TLS (a relay's or the
/// service's listener): they get `serverAuth` besides `clientAuth`.
const SERVING_ROLES: &[&str] = &["agent", "relay", "owner"];

#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("{}: {}", path.display(), crate::io_text(.source))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Write(#[from] store::EventLogError),
    #[error("{} exists already: not overwriting a certificate authority", .0.display())]
    Exists(PathBuf),
    #[error("{} exists already: not overwriting it (--force replaces it)", .0.display())]
    CertExists(PathBuf),
    #[error("'{0}' would overwrite the certificate authority's own {1}: choose another name")]
    CaName(String, &'static str),
    #[error("{}: no certificate issued to '{name}' there (NAME.pem)", dir.display())]
    NoCert { dir: PathBuf, name: String },
    #[error("{}: {msg}", path.display())]
    Bad { path: PathBuf, msg: String },
    #[error("unknown role '{0}': expected one of agent, relay, user, scheduler, admin, owner")]
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

/// Write `data` to `path` with the store's atomic write (a temporary file
/// of mode 0600, fsynced, renamed, the directory fsynced), so a reader
/// never sees half a key; then give it `mode`.
fn write_file(path: &Path, data: &[u8], mode: u32, exclusive: bool) -> Result<(), CaError> {
    if exclusive && path.exists() {
        return Err(CaError::Exists(path.to_path_buf()));
    }
    store::write_file_atomic(&store::RealFs, path, data)?;
    if mode != 0o600 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io(path))?;
    }
    Ok(())
}

/// Create `dir` if missing, mode 0700 whatever the umask (it will hold
/// keys); an existing directory is left as it is.
fn private_dir(dir: &Path) -> Result<(), CaError> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))
}

/// Make a CA in `dir` (created if missing): `ca.pem`, `ca.key`.  Refuses
/// to overwrite an existing one.
pub fn init(dir: &Path, common_name: &str, days: u32) -> Result<PathBuf, CaError> {
    private_dir(dir)?;
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
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
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
/// `out_dir` as `NAME.pem`/`NAME.key` (refusing to replace existing
/// ones: [`issue_opts`] with `force` does); `role` is
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
    issue_opts(ca_dir, out_dir, names, role, extra_sans, validity, false)
}

/// The CA in `ca_dir`: its certificate (re-signed in memory: rcgen needs
/// a `Certificate` for the issuer name and key identifier; nothing is
/// written) and its key.
pub(crate) fn load_ca(ca_dir: &Path) -> Result<(rcgen::Certificate, KeyPair), CaError> {
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
    let ca = ca_params.self_signed(&ca_key).map_err(gen)?;
    Ok((ca, ca_key))
}

/// Check every name before anything is written: a usable file name, not
/// the CA's own files, and (unless `force`) no existing certificate or
/// key.
fn check_names(
    ca_dir: &Path,
    out_dir: &Path,
    names: &[String],
    force: bool,
) -> Result<(), CaError> {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let same_dir = canon(ca_dir) == canon(out_dir);
    for name in names {
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(CaError::Name(
                name.clone(),
                "expected a host name or an address".into(),
            ));
        }
        if same_dir {
            for (file, what) in [(CA_CERT, "certificate"), (CA_KEY, "key"), (CA_CRL, "CRL")] {
                if file == format!("{name}.pem") || file == format!("{name}.key") {
                    return Err(CaError::CaName(name.clone(), what));
                }
            }
        }
        if !force {
            for ext in ["pem", "key"] {
                let p = out_dir.join(format!("{name}.{ext}"));
                if p.exists() {
                    return Err(CaError::CertExists(p));
                }
            }
        }
    }
    Ok(())
}

/// [`issue_with`]; `force` replaces existing `NAME.pem`/`NAME.key`.
pub fn issue_opts(
    ca_dir: &Path,
    out_dir: &Path,
    names: &[String],
    role: &str,
    extra_sans: &[String],
    validity: Validity,
    force: bool,
) -> Result<Vec<Issued>, CaError> {
    if !ROLES.contains(&role) {
        return Err(CaError::Role(role.to_string()));
    }
    check_names(ca_dir, out_dir, names, force)?;
    let (ca, ca_key) = load_ca(ca_dir)?;
    private_dir(out_dir)?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
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
        // ECDSA keys sign (the TLS handshake): digitalSignature only.
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if SERVING_ROLES.contains(&role) {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
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

/// What [`revoke`] did.
#[derive(Debug, Clone)]
pub struct Revoked {
    /// The CRL written (`ca_dir/ca.crl`).
    pub crl: PathBuf,
    /// The serial number revoked, in hexadecimal.
    pub serial: String,
    /// Serial numbers the CRL lists now (this one included).
    pub count: usize,
    /// The certificate was on the list already.
    pub already: bool,
}

/// Revoke the certificate `cert_dir/NAME.pem`: add its serial number to
/// the CA's list `ca_dir/ca.crl` (made if missing; the entries already
/// there are kept), signed by the CA, next update in `days` days.  The
/// file is replaced atomically, so a service reading it on SIGHUP sees
/// the old list or the new one.
pub fn revoke(ca_dir: &Path, cert_dir: &Path, name: &str, days: u32) -> Result<Revoked, CaError> {
    use rcgen::{CertificateRevocationListParams, RevokedCertParams};
    use time::OffsetDateTime;
    let cert_path = cert_dir.join(format!("{name}.pem"));
    if name.is_empty() || name.contains('/') || !cert_path.is_file() {
        return Err(CaError::NoCert {
            dir: cert_dir.to_path_buf(),
            name: name.to_string(),
        });
    }
    let bad = |path: &Path, msg: String| CaError::Bad {
        path: path.to_path_buf(),
        msg,
    };
    let der =
        crate::load_certs("certificate", &cert_path).map_err(|e| bad(&cert_path, e.to_string()))?;
    let (_, x) = x509_parser::parse_x509_certificate(&der[0])
        .map_err(|e| bad(&cert_path, format!("cannot be parsed: {e}")))?;
    let serial = x.raw_serial().to_vec();
    let (ca, ca_key) = load_ca(ca_dir)?;
    let crl_path = ca_dir.join(CA_CRL);
    let now = OffsetDateTime::now_utc();
    let mut revoked = Vec::new();
    let mut number: u128 = 0;
    if crl_path.exists() {
        let old = crate::verify::load_crls(&crl_path).map_err(|e| bad(&crl_path, e.to_string()))?;
        let (_, crl) = x509_parser::parse_x509_crl(&old[0])
            .map_err(|e| bad(&crl_path, format!("cannot be parsed: {e}")))?;
        number = crl
            .crl_number()
            .and_then(|n| u128::try_from(n.clone()).ok())
            .unwrap_or(0);
        for r in crl.iter_revoked_certificates() {
            revoked.push(RevokedCertParams {
                serial_number: SerialNumber::from_slice(r.raw_serial()),
                revocation_time: OffsetDateTime::from_unix_timestamp(r.revocation_date.timestamp())
                    .unwrap_or(now),
                reason_code: None,
                invalidity_date: None,
            });
        }
    }
    let target = SerialNumber::from_slice(&serial);
    let already = revoked.iter().any(|r| r.serial_number == target);
    if !already {
        revoked.push(RevokedCertParams {
            serial_number: target,
            revocation_time: now,
            reason_code: None,
            invalidity_date: None,
        });
    }
    let count = revoked.len();
    let params = CertificateRevocationListParams {
        this_update: now - time::Duration::hours(1),
        next_update: now + time::Duration::days(i64::from(days.max(1))),
        crl_number: SerialNumber::from_slice(&(number + 1).to_be_bytes()),
        issuing_distribution_point: None,
        revoked_certs: revoked,
        key_identifier_method: ca.params().key_identifier_method.clone(),
    };
    let crl = params.signed_by(&ca, &ca_key).map_err(gen)?;
    write_file(&crl_path, crl.pem().map_err(gen)?.as_bytes(), 0o644, false)?;
    Ok(Revoked {
        crl: crl_path,
        serial: serial.iter().map(|b| format!("{b:02x}")).collect(),
        count,
        already,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let fresh = dir.path().join("new/pki");
        init(&fresh, "Site CA", 10).unwrap();
        let dmode = std::fs::metadata(&fresh).unwrap().permissions().mode();
        assert_eq!(dmode & 0o777, 0o700);
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

    #[test]
    fn issue_keeps_the_ca_and_existing_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        init(d, "Site CA", 10).unwrap();
        let before = std::fs::read(d.join(CA_KEY)).unwrap();
        let e = issue(d, d, &["ca".into()], "agent", &[], 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "'ca' would overwrite the certificate authority's own certificate: choose another name"
        );
        assert_eq!(std::fs::read(d.join(CA_KEY)).unwrap(), before);
        // elsewhere, "ca" is just a name
        issue(d, &d.join("out"), &["ca".into()], "agent", &[], 1).unwrap();
        issue(d, d, &["n1".into()], "agent", &[], 1).unwrap();
        let pem = std::fs::read(d.join("n1.pem")).unwrap();
        let e = issue(d, d, &["n2".into(), "n1".into()], "agent", &[], 1).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("n1.pem exists already: not overwriting it (--force replaces it)"),
            "{e}"
        );
        // nothing written, not even n2
        assert!(!d.join("n2.pem").exists());
        assert_eq!(std::fs::read(d.join("n1.pem")).unwrap(), pem);
        let v = Validity::days(1);
        issue_opts(d, d, &["n1".into()], "relay", &[], v, true).unwrap();
        assert_ne!(std::fs::read(d.join("n1.pem")).unwrap(), pem);
        let der = crate::load_certs("certificate", &d.join("n1.pem")).unwrap();
        assert_eq!(
            crate::PeerCert::parse(&der[0]).unwrap().units,
            vec!["relay".to_string()]
        );
    }
}
