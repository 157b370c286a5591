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
//! own files.  `renew` signs an issued certificate again (same subject,
//! names, key usages; a new serial number and validity), keeping its key
//! unless asked for a new one.  `revoke` adds a certificate's serial
//! number to the CA's revocation list, `ca.crl` (what `[serve] tls-crl`
//! reads).

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
    #[error("{}: not signed by this certificate authority (issuer '{issuer}', CA '{ca}')", path.display())]
    Foreign {
        path: PathBuf,
        issuer: String,
        ca: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CaError + '_ {
    move |source| CaError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn bad(path: &Path, msg: String) -> CaError {
    CaError::Bad {
        path: path.to_path_buf(),
        msg,
    }
}

/// The certificates in the PEM file `path`.
fn read_certs(path: &Path) -> Result<Vec<crate::CertificateDer<'static>>, CaError> {
    crate::load_certs("certificate", path).map_err(|e| bad(path, e.to_string()))
}

/// `der` (read from `path`) parsed.
fn parsed<'a>(
    der: &'a [u8],
    path: &Path,
) -> Result<x509_parser::certificate::X509Certificate<'a>, CaError> {
    let (_, x) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| bad(path, format!("cannot be parsed: {e}")))?;
    Ok(x)
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
pub fn write_file(path: &Path, data: &[u8], mode: u32, exclusive: bool) -> Result<(), CaError> {
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
pub fn private_dir(dir: &Path) -> Result<(), CaError> {
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
    let validity = Validity::days(days);
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
    let ca_key = KeyPair::from_pem(&ca_key_pem)
        .map_err(|e| bad(&ca_key_path, format!("not a usable private key: {e}")))?;
    let ca_params = CertificateParams::from_ca_cert_pem(&ca_pem)
        .map_err(|e| bad(&ca_cert_path, format!("not a usable CA certificate: {e}")))?;
    let ca = ca_params.self_signed(&ca_key).map_err(gen)?;
    Ok((ca, ca_key))
}

/// A usable file name, and (when certificates are written to the CA's
/// own directory) not one of the CA's files.
pub(crate) fn check_name(name: &str, same_dir: bool) -> Result<(), CaError> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(CaError::Name(
            name.to_string(),
            "expected a host name or an address".into(),
        ));
    }
    if same_dir {
        for (file, what) in [(CA_CERT, "certificate"), (CA_KEY, "key"), (CA_CRL, "CRL")] {
            if file == format!("{name}.pem") || file == format!("{name}.key") {
                return Err(CaError::CaName(name.to_string(), what));
            }
        }
    }
    Ok(())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    canon(a) == canon(b)
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
    let in_ca_dir = same_dir(ca_dir, out_dir);
    for name in names {
        check_name(name, in_ca_dir)?;
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

/// [`issue`] with an explicit validity period (tests make expired
/// certificates with it); `force` replaces existing `NAME.pem`/`NAME.key`.
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
        let params = leaf_params(name, role, extra_sans, validity)?;
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

/// The certificate `issue` makes for `name` (without its key): subject
/// `CN=NAME, OU=ROLE`, the names, key usages, validity and a new serial.
fn leaf_params(
    name: &str,
    role: &str,
    extra_sans: &[String],
    validity: Validity,
) -> Result<CertificateParams, CaError> {
    let mut sans: Vec<String> = vec![name.to_string()];
    sans.extend(extra_sans.iter().filter(|s| *s != name).cloned());
    let mut params =
        CertificateParams::new(sans).map_err(|e| CaError::Name(name.to_string(), e.to_string()))?;
    // An IP address first makes CN the name an agent is known by.
    params
        .subject_alt_names
        .sort_by_key(|s| !matches!(s, SanType::DnsName(_)));
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
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
    Ok(params)
}

/// Sign the certificate `issue` would make for `name` over a public key
/// the CA never saw the private half of (a signing request's): its PEM
/// and serial number (hexadecimal).
pub(crate) fn sign_public_key(
    ca_dir: &Path,
    name: &str,
    role: &str,
    extra_sans: &[String],
    validity: Validity,
    public_key: rcgen::PublicKey,
) -> Result<(String, String), CaError> {
    if !ROLES.contains(&role) {
        return Err(CaError::Role(role.to_string()));
    }
    let params = leaf_params(name, role, extra_sans, validity)?;
    let serial = params
        .serial_number
        .as_ref()
        .map(|s| hex(s.as_ref()))
        .unwrap_or_default();
    let (ca, ca_key) = load_ca(ca_dir)?;
    let cert = rcgen::CertificateSigningRequestParams { params, public_key }
        .signed_by(&ca, &ca_key)
        .map_err(gen)?;
    Ok((cert.pem(), serial))
}

/// What [`renew`] did.
#[derive(Debug, Clone)]
pub struct Renewed {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The new certificate's serial number, in hexadecimal.
    pub serial: String,
    /// The serial number it replaces.
    pub old_serial: String,
    /// A new key was made (else the key file is untouched).
    pub new_key: bool,
    pub not_after: SystemTime,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// Sign `cert_dir/NAME.pem` again with the CA in `ca_dir`: the same
/// subject (CN and OU: the role), subject alternative names, key usage
/// and extended key usages, a new serial number and `validity`.  The key
/// `NAME.key` is kept (the certificate is made for it) unless `new_key`,
/// which makes a new one.  Each file is replaced atomically (write and
/// rename; with `new_key`, the key first).  Refuses a name that is one
/// of the CA's own files, a CA certificate, and a certificate another CA
/// signed.  The old certificate stays valid until it expires: revoke it
/// if it must not.
pub fn renew(
    ca_dir: &Path,
    cert_dir: &Path,
    name: &str,
    validity: Validity,
    new_key: bool,
) -> Result<Renewed, CaError> {
    check_name(name, same_dir(ca_dir, cert_dir))?;
    let cert_path = cert_dir.join(format!("{name}.pem"));
    let key_path = cert_dir.join(format!("{name}.key"));
    if !cert_path.is_file() {
        return Err(CaError::NoCert {
            dir: cert_dir.to_path_buf(),
            name: name.to_string(),
        });
    }
    let der = read_certs(&cert_path)?;
    let x = parsed(&der[0], &cert_path)?;
    let old_serial = hex(x.raw_serial());
    let ca_pem_path = ca_dir.join(CA_CERT);
    let ca_der = read_certs(&ca_pem_path)?;
    let ca_x = parsed(&ca_der[0], &ca_pem_path)?;
    if x.issuer().as_raw() != ca_x.subject().as_raw() {
        return Err(CaError::Foreign {
            path: cert_path,
            issuer: x.issuer().to_string(),
            ca: ca_x.subject().to_string(),
        });
    }
    let mut params = CertificateParams::from_ca_cert_der(&der[0].clone())
        .map_err(|e| bad(&cert_path, format!("cannot be renewed: {e}")))?;
    if matches!(params.is_ca, IsCa::Ca(_)) {
        return Err(bad(
            &cert_path,
            "is a CA certificate: not renewing it".into(),
        ));
    }
    params.is_ca = IsCa::ExplicitNoCa;
    // the subject key identifier is the (maybe new) key's
    params.key_identifier_method = CertificateParams::default().key_identifier_method;
    params.use_authority_key_identifier_extension = true;
    params.not_before = validity.not_before.into();
    params.not_after = validity.not_after.into();
    let serial = random_serial()?;
    let serial_hex = hex(serial.as_ref());
    params.serial_number = Some(serial);
    let key = if new_key {
        KeyPair::generate().map_err(gen)?
    } else {
        let pem = std::fs::read_to_string(&key_path).map_err(io(&key_path))?;
        let key = KeyPair::from_pem(&pem)
            .map_err(|e| bad(&key_path, format!("not a usable private key: {e}")))?;
        if key.public_key_raw() != x.public_key().subject_public_key.data.as_ref() {
            return Err(bad(
                &key_path,
                format!("is not the key of {name}.pem (--new-key makes a new one)"),
            ));
        }
        key
    };
    let (ca, ca_key) = load_ca(ca_dir)?;
    let cert = params.signed_by(&key, &ca, &ca_key).map_err(gen)?;
    if new_key {
        write_file(&key_path, key.serialize_pem().as_bytes(), 0o600, false)?;
    }
    write_file(&cert_path, cert.pem().as_bytes(), 0o644, false)?;
    Ok(Renewed {
        cert: cert_path,
        key: key_path,
        serial: serial_hex,
        old_serial,
        new_key,
        not_after: validity.not_after,
    })
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
    let der = read_certs(&cert_path)?;
    let x = parsed(&der[0], &cert_path)?;
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
pub(crate) mod tests {
    use super::*;

    /// A temporary directory holding a new CA.
    pub(crate) fn site_ca() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        init(dir.path(), "Site CA", 10).unwrap();
        dir
    }

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
        let dir = site_ca();
        let d = dir.path();
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

    fn parsed(path: &Path) -> (Vec<u8>, String, Vec<String>, Vec<u8>, i64) {
        let der = crate::load_certs("certificate", path).unwrap();
        let (_, x) = x509_parser::parse_x509_certificate(&der[0]).unwrap();
        let sans = x
            .subject_alternative_name()
            .unwrap()
            .map(|s| {
                s.value
                    .general_names
                    .iter()
                    .map(|g| g.to_string())
                    .collect()
            })
            .unwrap_or_default();
        let eku = x.extended_key_usage().unwrap().unwrap().value;
        let ku = x.key_usage().unwrap().unwrap().value;
        (
            x.raw_serial().to_vec(),
            format!(
                "{} ku={} eku={}{}",
                x.subject(),
                ku,
                eku.client_auth,
                eku.server_auth
            ),
            sans,
            x.public_key().subject_public_key.data.to_vec(),
            x.validity().not_after.timestamp(),
        )
    }

    #[test]
    fn renew_keeps_names_role_and_key_with_a_new_serial_and_validity() {
        let dir = site_ca();
        let d = dir.path();
        let out = d.join("out");
        issue(
            d,
            &out,
            &["n1".into()],
            "relay",
            &["10.0.0.1".into(), "n1.example".into()],
            2,
        )
        .unwrap();
        let key_before = std::fs::read(out.join("n1.key")).unwrap();
        let (serial0, subj0, sans0, pk0, after0) = parsed(&out.join("n1.pem"));
        let r = renew(d, &out, "n1", Validity::days(90), false).unwrap();
        let (serial1, subj1, sans1, pk1, after1) = parsed(&out.join("n1.pem"));
        assert_ne!(serial0, serial1);
        assert_eq!(r.serial, hex(&serial1));
        assert_eq!(r.old_serial, hex(&serial0));
        assert_eq!(subj0, subj1);
        assert!(subj1.contains("OU=relay"), "{subj1}");
        assert_eq!(sans0, sans1);
        assert_eq!(pk0, pk1);
        assert!(after1 - after0 > 80 * 86_400, "{after0} {after1}");
        assert_eq!(std::fs::read(out.join("n1.key")).unwrap(), key_before);
        // the renewed pair still makes a TLS identity the verifier accepts
        let der = crate::load_certs("certificate", &out.join("n1.pem")).unwrap();
        let p = crate::PeerCert::parse(&der[0]).unwrap();
        assert_eq!(p.name, "n1");
        assert_eq!(p.units, vec!["relay".to_string()]);
        {
            use rustls::server::danger::ClientCertVerifier;
            let v = crate::verify::ClientVerifier::new(&d.join(CA_CERT), None).unwrap();
            v.verify_client_cert(&der[0], &[], rustls::pki_types::UnixTime::now())
                .unwrap();
        }
        // a new key on request
        let r = renew(d, &out, "n1", Validity::days(1), true).unwrap();
        assert!(r.new_key);
        let (_, subj2, _, pk2, _) = parsed(&out.join("n1.pem"));
        assert_ne!(pk2, pk1);
        assert_eq!(subj2, subj1);
        assert_ne!(std::fs::read(out.join("n1.key")).unwrap(), key_before);
        let mode = std::fs::metadata(out.join("n1.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // no temporary file left behind
        let names: Vec<_> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }

    #[test]
    fn renew_refuses_ca_names_foreign_and_mismatched() {
        let dir = site_ca();
        let d = dir.path();
        let ca_before = std::fs::read(d.join(CA_CERT)).unwrap();
        let e = renew(d, d, "ca", Validity::days(1), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "'ca' would overwrite the certificate authority's own certificate: choose another name"
        );
        assert_eq!(std::fs::read(d.join(CA_CERT)).unwrap(), ca_before);
        let e = renew(d, d, "nope", Validity::days(1), false).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("no certificate issued to 'nope' there (NAME.pem)"),
            "{e}"
        );
        let e = renew(d, d, "../x", Validity::days(1), false).unwrap_err();
        assert!(
            e.to_string().starts_with("invalid certificate name '../x'"),
            "{e}"
        );
        // signed by another CA
        let other = d.join("other");
        init(&other, "Other CA", 10).unwrap();
        issue(&other, &other, &["n2".into()], "agent", &[], 1).unwrap();
        let before = std::fs::read(other.join("n2.pem")).unwrap();
        let e = renew(d, &other, "n2", Validity::days(1), false).unwrap_err();
        assert!(
            e.to_string()
                .contains("not signed by this certificate authority"),
            "{e}"
        );
        assert_eq!(std::fs::read(other.join("n2.pem")).unwrap(), before);
        // a key that is not the certificate's
        issue(d, d, &["n3".into(), "n4".into()], "agent", &[], 1).unwrap();
        std::fs::copy(d.join("n4.key"), d.join("n3.key")).unwrap();
        let before = std::fs::read(d.join("n3.pem")).unwrap();
        let e = renew(d, d, "n3", Validity::days(1), false).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("n3.key: is not the key of n3.pem (--new-key makes a new one)"),
            "{e}"
        );
        assert_eq!(std::fs::read(d.join("n3.pem")).unwrap(), before);
        // a CA certificate
        std::fs::copy(other.join(CA_CERT), other.join("root.pem")).unwrap();
        std::fs::copy(other.join(CA_KEY), other.join("root.key")).unwrap();
        let e = renew(&other, &other, "root", Validity::days(1), false).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("is a CA certificate: not renewing it"),
            "{e}"
        );
    }
}
