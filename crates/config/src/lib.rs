//! The TOML configuration of `roster serve --config PATH`.
//!
//! `PATH` is a file, or a directory whose `*.toml` files are read in name
//! order and merged (as a Flux broker's `--config-path` directory is):
//! tables spread over several files merge, but a key defined in two files
//! is an error naming both.  A flux administrator can therefore point
//! Roster at an existing Flux configuration directory.
//!
//! # Tables
//!
//! * `[resource]` ([`ResourceConfig`]): the keys of flux-config-resource(5)
//!   with flux-core's types, defaults and error texts, plus Roster
//!   extensions (below).  Types are checked strictly (a TOML float is not
//!   an integer, `"true"` is not a boolean) and an unknown key is an error.
//! * `[serve]` ([`ServeConfig`]): Roster's own daemon settings.
//! * Tables that Flux configurations commonly contain but Roster does not
//!   use are accepted and ignored, whatever they hold: [`IGNORED_TABLES`]
//!   (`bootstrap`, `systemd`, `exec`, `queues`, ...).  Their names are
//!   kept in [`Config::ignored_tables`].
//! * Any other top-level table or key is an error naming it.
//!
//! # `[resource]` keys
//!
//! | key | type | default | notes |
//! |---|---|---|---|
//! | `path` | string | unset | JSON R file; ignored when `config` is present |
//! | `config` | array of tables | unset | `[[resource.config]]` entries (`hosts`, `cores`, `gpus`, `properties`) |
//! | `scheduling` | string | unset | JSON file stored as R's `scheduling` key; needs `path` or `config` |
//! | `exclude` | string | unset | idset or hostlist, kept raw (resolved against R by the core) |
//! | `norestrict` | boolean | false | |
//! | `noverify` | boolean | false | overrides `verify` |
//! | `verify` | boolean or table | implicit | see [`rset::VerifyConfig`]; absent = [`rset::VerifyConfig::module_default`] |
//! | `rediscover` | boolean | false | |
//! | `journal-max` | integer | 100000 | not range-checked, as in flux-core |
//! | `history` | string (FSD) | `"90d"` | `"inf"` never truncates, `"0"` truncates up to the checkpoint |
//! | `no-update-watch` | boolean | false | test option |
//!
//! Roster extensions (not understood by flux-core, which would reject them):
//!
//! | key | type | default | notes |
//! |---|---|---|---|
//! | `groups` | table of strings | empty | RFC 28 resource groups: group name → idset or hostlist, kept raw in file order |
//! | `torpid-max` | string (FSD) | `"30s"` | a node silent this long is torpid; `"0"` disables |
//! | `offline-timeout` | string (FSD) | `"60s"` | a node silent this long is offline |
//! | `discover-hosts` | string (hostlist) | unset | without a configured or stored R: rank i is the i-th host; R is assembled from the agents' reports (`dynamic-discovery`) |
//!
//! Durations are Flux Standard Durations parsed as flux-core does
//! ([`parse_fsd`]).
//!
//! # `[serve]` keys
//!
//! | key | type | notes |
//! |---|---|---|
//! | `statedir` | string | state directory (default: `$XDG_STATE_HOME/roster`, see [`rpc::uri::Env::default_statedir`]) |
//! | `listen` | array of strings | service URIs, each checked with [`rpc::uri::Uri::parse`]; at least one |
//! | `token-file` | string | bearer token file: the owner role for TLS and loopback TCP clients |
//! | `tls-cert` | string | the service's certificate chain (PEM), for `tls://` listeners |
//! | `tls-key` | string | its private key (PEM) |
//! | `tls-client-ca` | string | CA certificate (PEM) that signs client certificates; without it TLS clients need a token |
//! | `tls-crl` | string | revocation list(s) (PEM CRLs, `roster serve ca revoke` writes one) checked at every TLS handshake; re-read on SIGHUP; needs `tls-client-ca` |
//! | `reload-dir` | string | the directory `resource.reload` may read files from (default: the directory of `[resource] path`) |
//! | `enrol-ca` | string | the CA directory (`ca.pem`, `ca.key`) that signs the certificates of agents enrolled with `[serve.auth] enrol-token-file` |
//!
//! # `[serve.auth]` keys (roles of TLS clients)
//!
//! | key | type | notes |
//! |---|---|---|
//! | `agent`, `relay`, `owner`, `admin`, `scheduler`, `user` | string or array of strings | certificate names (first DNS SAN, else CN) given that role: `*`, `*.DOMAIN` or a hostlist; consulted in that order (`relay`: an agent that may also open a relay session) |
//! | `roles-from-ou` | boolean | default true: otherwise the certificate subject's OU names the role |
//! | `user-token-file`, `scheduler-token-file`, `admin-token-file` | string | bearer token files giving that role |
//! | `monitor-force-up` | boolean | consider every rank up (flux's `monitor-force-up` module argument) |
//! | `parent-R` | string | R of an enclosing allocation (flux's `job-info` inventory source) |
//! | `backend` | string | `"local"` (default: `statedir`) or `"etcd"` (high availability) |
//! | `etcd-endpoints` | array of strings | with `backend = "etcd"`: `http://HOST:PORT` or `https://HOST:PORT` |
//! | `etcd-prefix` | string | key prefix in etcd (default `/roster`) |
//! | `etcd-ca`, `etcd-cert`, `etcd-key` | string | PEM files for TLS to etcd (cert and key together) |
//! | `etcd-lease-ttl` | string (FSD) | the leader's lease (default `"2s"`, 1s – 1h) |
//! | `advertise` | string | URI(s) (comma list) standbys name as the leader's (default: the `listen` URIs) |
//! | `relay-fanout` | integer | fan-out K of the agent relay tree (flux's `tbon.topo = kary:K`; default 128, 1 – 65536): a relay at rank r speaks for the k-ary subtree below r |
//!
//! The listeners' limits ([`ServeLimits`], all optional):
//!
//! | key | type | default | bounds |
//! |---|---|---|---|
//! | `max-connections` | integer | 32768 | per listener, ≥ 1 |
//! | `max-connections-per-peer` | integer | 64 | per non-owner uid (Unix) or IP (TCP), ≥ 1 |
//! | `max-unauthenticated-per-peer` | integer | 8 | per IP (TCP, TLS) before it authenticated, ≥ 1 |
//! | `auth-timeout` | string (FSD) | `"10s"` | TLS handshake and first request head of a TCP/TLS connection, > 0 |
//! | `max-inflight` | integer | 1024 | requests in flight per Flux connection, ≥ 1 |
//! | `max-outbound-bytes` | integer | 8388608 | replies queued per connection, ≥ 4096 |
//! | `max-guest-outbound-bytes` | integer | 1048576 | the same for a guest, ≥ 4096 |
//! | `max-request-bytes` | integer | 16777216 | owner's request, 1024 – 2147483647 |
//! | `max-guest-request-bytes` | integer | 65536 | guest's request, 1024 – `max-request-bytes` |
//! | `max-queued-requests` | integer | 32768 | requests waiting for the service loop, ≥ 1 |
//! | `request-timeout` | string (FSD) | `"30s"` | > 0 |
//! | `idle-timeout` | string (FSD) | `"5m"` | > 0 |
//!
//! `public-read` (boolean, default false): anonymous TLS and TCP clients
//! may read the web routes (`/api/status`, the page); otherwise they need
//! a role, as over RPC.
//!
//! Relative paths are kept as written (relative to the daemon's working
//! directory, as flux-core does).
//!
//! # Building R
//!
//! [`Config::from_path`] only parses and type-checks.  The configured R is
//! built by [`ResourceConfig::inventory`], which reads `path` and
//! `scheduling` and converts `[[resource.config]]`, with flux-core's error
//! texts; `roster serve --check` should call both.
//!
//! # Errors
//!
//! [`ConfigError`]'s `Display` starts with the file the offending key came
//! from; [`ConfigError::flux_text`] gives flux-core's wording.

mod error;
pub mod flux_conf;
mod fsd;
mod load;

use std::path::{Path, PathBuf};

use rpc::uri::Uri;
use rset::{Rset, VerifyConfig};
use serde_json::Value;

pub use error::{ConfigError, ErrorKind};
pub use fsd::{parse_fsd, FsdError};

use error::{jansson_type, toml_type};
use load::Source;

/// Top-level tables of Flux configurations that Roster accepts and ignores.
pub const IGNORED_TABLES: &[&str] = &[
    "bootstrap",
    "systemd",
    "exec",
    "sched-fluxion-qmanager",
    "sched-fluxion-resource",
    "queues",
    "policy",
    "job-manager",
    "kvs",
    "access",
    "tbon",
    "ingest",
    "archive",
    "cron",
    "heartbeat",
];

/// Default `journal-max`.
pub const DEFAULT_JOURNAL_MAX: i64 = 100_000;
/// Default `torpid-max` (Roster extension).
pub const DEFAULT_TORPID_MAX: &str = "30s";
/// Default `offline-timeout` (Roster extension).
pub const DEFAULT_OFFLINE_TIMEOUT: &str = "60s";

/// How much `resource.eventlog` history to keep when truncating at start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum History {
    /// `"inf"`: never truncate.
    Inf,
    /// Keep this many seconds (0: keep nothing older than the checkpoint).
    Seconds(f64),
}

impl History {
    /// Parse an FSD; infinite durations are [`History::Inf`].
    pub fn parse(s: &str) -> Result<History, FsdError> {
        let v = parse_fsd(s)?;
        Ok(if v.is_infinite() {
            History::Inf
        } else {
            History::Seconds(v)
        })
    }

    /// Seconds, or `None` for infinity (the form `store::history_cutoff` takes).
    pub fn seconds(self) -> Option<f64> {
        match self {
            History::Inf => None,
            History::Seconds(s) => Some(s),
        }
    }
}

impl Default for History {
    fn default() -> Self {
        History::Seconds(90.0 * 86400.0)
    }
}

/// The `[resource]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceConfig {
    /// `path`: file holding a JSON R.
    pub path: Option<String>,
    /// `config`: the `[[resource.config]]` array, converted to JSON (an
    /// array; its entries are checked by [`ResourceConfig::inventory`]).
    pub config: Option<Value>,
    /// `scheduling`: JSON file to store as R's `scheduling` key.
    pub scheduling: Option<String>,
    /// `exclude`: idset or hostlist, unparsed.
    pub exclude: Option<String>,
    /// `norestrict`.
    pub norestrict: bool,
    /// `noverify`.
    pub noverify: bool,
    /// `verify`, when given (`None`: the module default applies, see
    /// [`ResourceConfig::verify_config`]).
    pub verify: Option<VerifyConfig>,
    /// `rediscover`.
    pub rediscover: bool,
    /// `journal-max`.
    pub journal_max: i64,
    /// `history`.
    pub history: History,
    /// `no-update-watch`.
    pub no_update_watch: bool,
    /// `groups` (Roster): group name → idset or hostlist, in file order.
    pub groups: Vec<(String, String)>,
    /// `torpid-max` (Roster) in seconds; 0 disables torpid detection.
    pub torpid_max: f64,
    /// `offline-timeout` (Roster) in seconds.
    pub offline_timeout: f64,
    /// `discover-hosts` (Roster): the expected hosts, a hostlist, unparsed.
    pub discover_hosts: Option<String>,
    /// Key → file that set it, for the keys present.
    origins: Vec<(String, String)>,
}

impl Default for ResourceConfig {
    fn default() -> Self {
        ResourceConfig {
            path: None,
            config: None,
            scheduling: None,
            exclude: None,
            norestrict: false,
            noverify: false,
            verify: None,
            rediscover: false,
            journal_max: DEFAULT_JOURNAL_MAX,
            history: History::default(),
            no_update_watch: false,
            groups: Vec::new(),
            torpid_max: 30.0,
            offline_timeout: 60.0,
            discover_hosts: None,
            origins: Vec::new(),
        }
    }
}

/// The `[serve]` table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServeConfig {
    /// `statedir`.
    pub statedir: Option<PathBuf>,
    /// `listen`: service URIs (`None` when not configured).
    pub listen: Option<Vec<Uri>>,
    /// `token-file`.
    pub token_file: Option<PathBuf>,
    /// `monitor-force-up`.
    pub monitor_force_up: bool,
    /// `public-read`: anonymous network clients may read the web routes.
    pub public_read: bool,
    /// `parent-R`.
    pub parent_r: Option<PathBuf>,
    /// The listeners' limits (`max-*`, `*-timeout`).
    pub limits: ServeLimits,
    /// `relay-fanout` (`None`: [`rpc::relay::DEFAULT_FANOUT`]).
    pub relay_fanout: Option<u32>,
    /// `tls-cert`.
    pub tls_cert: Option<PathBuf>,
    /// `tls-key`.
    pub tls_key: Option<PathBuf>,
    /// `tls-client-ca`.
    pub tls_client_ca: Option<PathBuf>,
    /// `tls-crl`.
    pub tls_crl: Option<PathBuf>,
    /// `reload-dir`.
    pub reload_dir: Option<PathBuf>,
    /// `enrol-ca`: the CA directory (ca.pem, ca.key) that signs agents
    /// enrolled with the enrolment token.
    pub enrol_ca: Option<PathBuf>,
    /// `[serve.auth]`.
    pub auth: AuthConfig,
    /// `backend` and the `etcd-*` keys: where the state lives.
    pub backend: Backend,
}

/// `[serve]` `backend`: the local state directory (default) or etcd.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Backend {
    /// `backend = "local"`: `statedir` on the local file system.
    #[default]
    Local,
    /// `backend = "etcd"`: the log, R and checkpoint in etcd, with leader
    /// election (high availability).
    Etcd(EtcdConfig),
}

/// The `etcd-*` keys of `[serve]` (with `backend = "etcd"`).
#[derive(Debug, Clone, PartialEq)]
pub struct EtcdConfig {
    /// `etcd-endpoints`: `http://host:port` or `https://host:port`, at least one.
    pub endpoints: Vec<String>,
    /// `etcd-prefix`: every key lives under it (default `/roster`).
    pub prefix: String,
    /// `etcd-ca`, `etcd-cert`, `etcd-key`: PEM files for TLS to etcd.
    pub ca: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// `etcd-lease-ttl`: the leader's lease, seconds (default 2).
    pub lease_ttl: f64,
    /// `advertise`: the URI(s) clients are redirected to when this server
    /// leads (default: its `listen` URIs).
    pub advertise: Option<String>,
}

/// Default `etcd-prefix`.
pub const DEFAULT_ETCD_PREFIX: &str = "/roster";
/// Default `etcd-lease-ttl`.
pub const DEFAULT_ETCD_LEASE_TTL: &str = "2s";

/// The listeners' limits of `[serve]` (see the crate docs for the keys).
#[derive(Debug, Clone, PartialEq)]
pub struct ServeLimits {
    pub max_connections: u64,
    pub max_connections_per_peer: u64,
    pub max_unauthenticated_per_peer: u64,
    pub max_inflight: u64,
    pub max_outbound_bytes: u64,
    pub max_guest_outbound_bytes: u64,
    pub max_request_bytes: u64,
    pub max_guest_request_bytes: u64,
    pub max_queued_requests: u64,
    /// Seconds.
    pub request_timeout: f64,
    /// Seconds.
    pub idle_timeout: f64,
    /// Seconds.
    pub auth_timeout: f64,
}

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            max_connections: 32768,
            max_connections_per_peer: 64,
            max_unauthenticated_per_peer: 8,
            max_inflight: 1024,
            max_outbound_bytes: 8 << 20,
            max_guest_outbound_bytes: 1 << 20,
            max_request_bytes: 16 << 20,
            max_guest_request_bytes: 64 << 10,
            max_queued_requests: 32768,
            request_timeout: 30.0,
            idle_timeout: 300.0,
            auth_timeout: 10.0,
        }
    }
}

/// The `[serve.auth]` table: how TLS clients get their roles.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthConfig {
    /// `(role, pattern)` pairs from the `agent`, `owner`, `admin`,
    /// `scheduler` and `user` keys, in file order (checked by the
    /// daemon, which knows the pattern syntax).
    pub patterns: Vec<(String, String)>,
    /// `roles-from-ou` (default true).
    pub roles_from_ou: bool,
    /// `(role, path)` from `user-token-file`, `scheduler-token-file`,
    /// `admin-token-file`.
    pub token_files: Vec<(String, PathBuf)>,
}

impl Default for AuthConfig {
    fn default() -> AuthConfig {
        AuthConfig {
            patterns: Vec::new(),
            roles_from_ou: true,
            token_files: Vec::new(),
        }
    }
}

/// A whole configuration.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// `[resource]`.
    pub resource: ResourceConfig,
    /// `[serve]`.
    pub serve: ServeConfig,
    /// Names of the [`IGNORED_TABLES`] present, in file order.
    pub ignored_tables: Vec<String>,
    /// `[queues]`, as JSON (flux's queue configuration, passed through to
    /// `config.get`).
    pub queues: Option<serde_json::Map<String, serde_json::Value>>,
    /// Files read, in order (empty for [`Config::from_str`]).
    pub files: Vec<PathBuf>,
}

impl Config {
    /// Read a TOML file, or all `*.toml` files of a directory (merged).
    pub fn from_path(path: &Path) -> Result<Config, ConfigError> {
        let src = load::load_path(path)?;
        Config::from_source(src)
    }

    /// Parse one TOML document; `origin` names it in error messages.
    pub fn from_str(text: &str, origin: &str) -> Result<Config, ConfigError> {
        let src = load::load_str(text, origin)?;
        Config::from_source(src)
    }

    fn from_source(src: Source) -> Result<Config, ConfigError> {
        let mut cfg = Config {
            files: src.files.clone(),
            ..Config::default()
        };
        for (name, value) in &src.table {
            let origin = src.origin(name);
            match name.as_str() {
                "resource" | "serve" => {
                    let toml::Value::Table(t) = value else {
                        return Err(ConfigError::new(
                            origin,
                            ErrorKind::NotATable {
                                name: name.clone(),
                                got: toml_type(value),
                                jansson_got: jansson_type(value),
                            },
                        ));
                    };
                    let tctx = TableCtx {
                        src: &src,
                        name: name.as_str(),
                        table: t,
                    };
                    if name == "resource" {
                        cfg.resource = parse_resource(&tctx)?;
                    } else {
                        cfg.serve = parse_serve(&tctx)?;
                    }
                }
                n if IGNORED_TABLES.contains(&n) => {
                    if n == "queues" {
                        // Served by `config.get` (flux's `resource list`
                        // and Roster's `show` read it); not checked here.
                        if let Ok(serde_json::Value::Object(q)) = serde_json::to_value(value) {
                            cfg.queues = Some(q);
                        }
                    }
                    cfg.ignored_tables.push(name.clone())
                }
                _ => {
                    let kind = if value.is_table() {
                        ErrorKind::UnknownTable(name.clone())
                    } else {
                        ErrorKind::UnknownTopKey(name.clone())
                    };
                    return Err(ConfigError::new(origin, kind));
                }
            }
        }
        Ok(cfg)
    }
}

/// A table being validated.
struct TableCtx<'a> {
    src: &'a Source,
    name: &'a str,
    table: &'a toml::Table,
}

impl TableCtx<'_> {
    fn origin(&self, key: &str) -> Option<String> {
        self.src
            .origin(&format!("{}.{key}", self.name))
            .map(str::to_string)
    }

    fn err(&self, key: &str, kind: ErrorKind) -> ConfigError {
        ConfigError {
            origin: self.origin(key),
            kind,
        }
    }

    fn type_err(&self, key: &str, expected: &'static str, v: &toml::Value) -> ConfigError {
        self.err(
            key,
            ErrorKind::Type {
                table: self.name.to_string(),
                key: key.to_string(),
                expected,
                got: toml_type(v),
                jansson_got: jansson_type(v),
            },
        )
    }

    fn string(&self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.type_err(key, "a string", v)),
        }
    }

    /// An array of strings.
    fn strings(&self, key: &str) -> Result<Option<Vec<String>>, ConfigError> {
        let a = match self.table.get(key) {
            None => return Ok(None),
            Some(toml::Value::Array(a)) => a,
            Some(v) => return Err(self.type_err(key, "an array of strings", v)),
        };
        let item = |(i, v): (usize, &toml::Value)| match v {
            toml::Value::String(u) => Ok(u.clone()),
            v => Err(self.type_err(&format!("{key}[{i}]"), "a string", v)),
        };
        a.iter()
            .enumerate()
            .map(item)
            .collect::<Result<_, _>>()
            .map(Some)
    }

    fn boolean(&self, key: &str) -> Result<bool, ConfigError> {
        match self.table.get(key) {
            None => Ok(false),
            Some(toml::Value::Boolean(b)) => Ok(*b),
            Some(v) => Err(self.type_err(key, "a boolean", v)),
        }
    }

    fn integer(&self, key: &str, default: i64) -> Result<i64, ConfigError> {
        match self.table.get(key) {
            None => Ok(default),
            Some(toml::Value::Integer(i)) => Ok(*i),
            Some(v) => Err(self.type_err(key, "an integer", v)),
        }
    }

    /// Keys of the table not in `known`, as an error (file order).
    fn check_unknown(&self, known: &[&str]) -> Result<(), ConfigError> {
        let unknown: Vec<String> = self
            .table
            .keys()
            .filter(|k| !known.contains(&k.as_str()))
            .cloned()
            .collect();
        match unknown.first().cloned() {
            None => Ok(()),
            Some(first) => Err(self.err(
                &first,
                ErrorKind::UnknownKeys {
                    table: self.name.to_string(),
                    keys: unknown,
                },
            )),
        }
    }

    fn duration(&self, key: &'static str, default: &str) -> Result<f64, ConfigError> {
        let text = self.string(key)?;
        let text = text.as_deref().unwrap_or(default);
        parse_fsd(text).map_err(|reason| {
            self.err(
                key,
                ErrorKind::Duration {
                    key,
                    value: text.to_string(),
                    reason,
                },
            )
        })
    }
}

/// `[resource]` keys: flux-core's, in the order its `parse_config()`
/// unpacks them (type errors are reported in this order, before unknown
/// keys), then Roster's extensions.
const RESOURCE_KEYS: &[&str] = &[
    "path",
    "scheduling",
    "config",
    "exclude",
    "norestrict",
    "noverify",
    "no-update-watch",
    "rediscover",
    "journal-max",
    "verify",
    "history",
    "groups",
    "torpid-max",
    "offline-timeout",
    "discover-hosts",
];

fn parse_resource(t: &TableCtx) -> Result<ResourceConfig, ConfigError> {
    let mut r = ResourceConfig {
        path: t.string("path")?,
        scheduling: t.string("scheduling")?,
        ..ResourceConfig::default()
    };
    r.config = match t.table.get("config") {
        None => None,
        Some(toml::Value::Array(a)) => Some(crate::flux_conf::toml_to_json(&toml::Value::Array(
            a.clone(),
        ))),
        Some(v) => return Err(t.type_err("config", "an array of tables", v)),
    };
    r.exclude = t.string("exclude")?;
    r.norestrict = t.boolean("norestrict")?;
    r.noverify = t.boolean("noverify")?;
    r.no_update_watch = t.boolean("no-update-watch")?;
    r.rediscover = t.boolean("rediscover")?;
    r.journal_max = t.integer("journal-max", DEFAULT_JOURNAL_MAX)?;
    let history = t.string("history")?;
    let groups = match t.table.get("groups") {
        None => Vec::new(),
        Some(toml::Value::Table(g)) => {
            let mut out = Vec::with_capacity(g.len());
            for (name, v) in g {
                match v {
                    toml::Value::String(s) => out.push((name.clone(), s.clone())),
                    v => {
                        return Err(ConfigError {
                            origin: t.origin(&format!("groups.{name}")),
                            kind: ErrorKind::Type {
                                table: "resource.groups".to_string(),
                                key: name.clone(),
                                expected: "a string",
                                got: toml_type(v),
                                jansson_got: jansson_type(v),
                            },
                        })
                    }
                }
            }
            out
        }
        Some(v) => return Err(t.type_err("groups", "a table", v)),
    };
    r.groups = groups;
    // torpid-max / offline-timeout type checks happen in duration() below,
    // after the unknown-key check; check their types now to keep the order
    // "types, then unknown keys, then values".
    t.string("torpid-max")?;
    t.string("offline-timeout")?;
    r.discover_hosts = t.string("discover-hosts")?;

    t.check_unknown(RESOURCE_KEYS)?;

    if let Some(v) = t.table.get("verify") {
        let json = crate::flux_conf::toml_to_json(v);
        r.verify = Some(
            VerifyConfig::from_json(Some(&json))
                .map_err(|e| t.err("verify", ErrorKind::Verify(e.to_string())))?,
        );
    }
    if let Some(h) = history {
        r.history = match History::parse(&h) {
            Ok(v) => v,
            Err(_) => return Err(t.err("history", ErrorKind::History(h))),
        };
    }
    r.torpid_max = t.duration("torpid-max", DEFAULT_TORPID_MAX)?;
    r.offline_timeout = t.duration("offline-timeout", DEFAULT_OFFLINE_TIMEOUT)?;
    r.origins = t
        .table
        .keys()
        .filter_map(|k| t.origin(k).map(|o| (k.clone(), o)))
        .collect();
    Ok(r)
}

const SERVE_KEYS: &[&str] = &[
    "statedir",
    "listen",
    "token-file",
    "monitor-force-up",
    "parent-R",
    "tls-cert",
    "tls-key",
    "tls-client-ca",
    "tls-crl",
    "reload-dir",
    "enrol-ca",
    "auth",
    "max-connections",
    "max-connections-per-peer",
    "max-inflight",
    "max-outbound-bytes",
    "max-guest-outbound-bytes",
    "max-request-bytes",
    "max-guest-request-bytes",
    "max-queued-requests",
    "request-timeout",
    "idle-timeout",
    "max-unauthenticated-per-peer",
    "auth-timeout",
    "public-read",
    "backend",
    "etcd-endpoints",
    "etcd-prefix",
    "etcd-ca",
    "etcd-cert",
    "etcd-key",
    "etcd-lease-ttl",
    "advertise",
    "relay-fanout",
];

/// Integer limit keys of `[serve]`: (key, smallest, largest).
const SERVE_INT_LIMITS: &[(&str, i64, i64)] = &[
    ("max-connections", 1, i64::MAX),
    ("max-connections-per-peer", 1, i64::MAX),
    ("max-inflight", 1, i64::MAX),
    ("max-outbound-bytes", 4096, i64::MAX),
    ("max-request-bytes", 1024, i32::MAX as i64),
    ("max-guest-request-bytes", 1024, i32::MAX as i64),
    ("max-queued-requests", 1, i64::MAX),
    ("max-guest-outbound-bytes", 4096, i64::MAX),
    ("max-unauthenticated-per-peer", 1, i64::MAX),
];

/// The keys a table allows (`resource`, `serve`, `serve.auth`), and the
/// top-level tables (`""`): for "did you mean" hints on
/// [`ErrorKind::UnknownKeys`] and [`ErrorKind::UnknownTable`].
pub fn known_keys(table: &str) -> Vec<&'static str> {
    match table {
        "" => {
            let mut v = vec!["resource", "serve"];
            v.extend_from_slice(IGNORED_TABLES);
            v
        }
        "resource" => RESOURCE_KEYS.to_vec(),
        "serve" => SERVE_KEYS.to_vec(),
        "serve.auth" => {
            let mut v = AUTH_ROLE_KEYS.to_vec();
            v.extend_from_slice(AUTH_TOKEN_KEYS);
            v.push("roles-from-ou");
            v
        }
        _ => Vec::new(),
    }
}

const AUTH_ROLE_KEYS: &[&str] = &["agent", "relay", "owner", "admin", "scheduler", "user"];
const AUTH_TOKEN_KEYS: &[&str] = &[
    "user-token-file",
    "scheduler-token-file",
    "admin-token-file",
    "enrol-token-file",
];

fn parse_auth(t: &TableCtx) -> Result<AuthConfig, ConfigError> {
    let mut a = AuthConfig::default();
    for (key, v) in t.table {
        if AUTH_ROLE_KEYS.contains(&key.as_str()) {
            match v {
                toml::Value::String(p) => a.patterns.push((key.clone(), p.clone())),
                toml::Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        match item {
                            toml::Value::String(p) => a.patterns.push((key.clone(), p.clone())),
                            v => return Err(t.type_err(&format!("{key}[{i}]"), "a string", v)),
                        }
                    }
                }
                v => return Err(t.type_err(key, "a string or an array of strings", v)),
            }
        } else if let Some(role) = AUTH_TOKEN_KEYS
            .contains(&key.as_str())
            .then(|| key.trim_end_matches("-token-file"))
        {
            if let Some(p) = t.string(key)? {
                a.token_files.push((role.to_string(), PathBuf::from(p)));
            }
        }
    }
    a.roles_from_ou = match t.table.get("roles-from-ou") {
        None => true,
        Some(toml::Value::Boolean(b)) => *b,
        Some(v) => return Err(t.type_err("roles-from-ou", "a boolean", v)),
    };
    let mut known: Vec<&str> = AUTH_ROLE_KEYS.to_vec();
    known.extend_from_slice(AUTH_TOKEN_KEYS);
    known.push("roles-from-ou");
    t.check_unknown(&known)?;
    Ok(a)
}

fn parse_serve(t: &TableCtx) -> Result<ServeConfig, ConfigError> {
    let mut s = ServeConfig {
        statedir: t.string("statedir")?.map(PathBuf::from),
        ..ServeConfig::default()
    };
    let listen_raw = t.strings("listen")?;
    s.token_file = t.string("token-file")?.map(PathBuf::from);
    s.monitor_force_up = t.boolean("monitor-force-up")?;
    s.public_read = t.boolean("public-read")?;
    s.parent_r = t.string("parent-R")?.map(PathBuf::from);
    let fanout = t
        .table
        .get("relay-fanout")
        .map(|_| t.integer("relay-fanout", 0))
        .transpose()?;
    let d = ServeLimits::default();
    let mut ints = Vec::with_capacity(SERVE_INT_LIMITS.len());
    for (key, _, _) in SERVE_INT_LIMITS {
        ints.push(t.table.get(*key).map(|_| t.integer(key, 0)).transpose()?);
    }
    let request_timeout = t.string("request-timeout")?;
    let idle_timeout = t.string("idle-timeout")?;
    let auth_timeout = t.string("auth-timeout")?;
    s.tls_cert = t.string("tls-cert")?.map(PathBuf::from);
    s.tls_key = t.string("tls-key")?.map(PathBuf::from);
    s.tls_client_ca = t.string("tls-client-ca")?.map(PathBuf::from);
    s.tls_crl = t.string("tls-crl")?.map(PathBuf::from);
    s.reload_dir = t.string("reload-dir")?.map(PathBuf::from);
    s.enrol_ca = t.string("enrol-ca")?.map(PathBuf::from);
    match t.table.get("auth") {
        None => {}
        Some(toml::Value::Table(auth)) => {
            s.auth = parse_auth(&TableCtx {
                src: t.src,
                name: "serve.auth",
                table: auth,
            })?;
        }
        Some(v) => return Err(t.type_err("auth", "a table", v)),
    }
    let backend = t.string("backend")?;
    let endpoints = t.strings("etcd-endpoints")?;
    let prefix = t.string("etcd-prefix")?;
    let ca = t.string("etcd-ca")?.map(PathBuf::from);
    let cert = t.string("etcd-cert")?.map(PathBuf::from);
    let key = t.string("etcd-key")?.map(PathBuf::from);
    let lease_ttl = t.duration("etcd-lease-ttl", DEFAULT_ETCD_LEASE_TTL)?;
    let advertise = t.string("advertise")?;

    t.check_unknown(SERVE_KEYS)?;

    let invalid = |key: &str, message: String| {
        t.err(
            key,
            ErrorKind::Invalid {
                table: "serve".to_string(),
                message,
            },
        )
    };
    let mut vals = Vec::with_capacity(ints.len());
    for ((key, lo, hi), v) in SERVE_INT_LIMITS.iter().zip(ints) {
        match v {
            Some(v) if v < *lo => {
                return Err(invalid(
                    key,
                    format!("{key} must be at least {lo}, got {v}"),
                ))
            }
            Some(v) if v > *hi => {
                return Err(invalid(key, format!("{key} must be at most {hi}, got {v}")))
            }
            v => vals.push(v.map(|v| v as u64)),
        }
    }
    if let Some(k) = fanout {
        if !(1..=65536).contains(&k) {
            return Err(invalid(
                "relay-fanout",
                format!("relay-fanout must be between 1 and 65536, got {k}"),
            ));
        }
        s.relay_fanout = Some(k as u32);
    }
    let pick = |i: usize, default: u64| vals[i].unwrap_or(default);
    let mut limits = ServeLimits {
        max_connections: pick(0, d.max_connections),
        max_connections_per_peer: pick(1, d.max_connections_per_peer),
        max_inflight: pick(2, d.max_inflight),
        max_outbound_bytes: pick(3, d.max_outbound_bytes),
        max_request_bytes: pick(4, d.max_request_bytes),
        max_guest_request_bytes: pick(5, d.max_guest_request_bytes),
        max_queued_requests: pick(6, d.max_queued_requests),
        max_guest_outbound_bytes: pick(7, d.max_guest_outbound_bytes),
        max_unauthenticated_per_peer: pick(8, d.max_unauthenticated_per_peer),
        ..d
    };
    if limits.max_guest_request_bytes > limits.max_request_bytes {
        if vals[5].is_none() {
            // Only max-request-bytes was lowered: the guest limit follows.
            limits.max_guest_request_bytes = limits.max_request_bytes;
        } else {
            return Err(invalid(
                "max-guest-request-bytes",
                format!(
                    "max-guest-request-bytes ({}) must not exceed max-request-bytes ({})",
                    limits.max_guest_request_bytes, limits.max_request_bytes
                ),
            ));
        }
    }
    for (key, text, slot) in [
        (
            "request-timeout",
            request_timeout,
            &mut limits.request_timeout,
        ),
        ("idle-timeout", idle_timeout, &mut limits.idle_timeout),
        ("auth-timeout", auth_timeout, &mut limits.auth_timeout),
    ] {
        let Some(text) = text else { continue };
        match parse_fsd(&text) {
            Ok(v) if v > 0.0 && v.is_finite() => *slot = v,
            Ok(_) => {
                return Err(invalid(
                    key,
                    format!("invalid {key} '{text}': must be a finite duration above zero"),
                ))
            }
            Err(reason) => return Err(invalid(key, format!("invalid {key} '{text}': {reason}"))),
        }
    }
    s.limits = limits;

    s.backend = match backend.as_deref() {
        None | Some("local") => {
            if endpoints.is_some() {
                return Err(invalid(
                    "etcd-endpoints",
                    "etcd-endpoints needs backend = \"etcd\"".to_string(),
                ));
            }
            Backend::Local
        }
        Some("etcd") => {
            let endpoints = endpoints.unwrap_or_default();
            if endpoints.is_empty() {
                return Err(invalid(
                    "etcd-endpoints",
                    "backend = \"etcd\" needs etcd-endpoints with at least one endpoint"
                        .to_string(),
                ));
            }
            for e in &endpoints {
                if !(e.starts_with("http://") || e.starts_with("https://"))
                    || e.contains(char::is_whitespace)
                {
                    return Err(invalid(
                        "etcd-endpoints",
                        format!("invalid etcd endpoint '{e}': expected http://HOST:PORT or https://HOST:PORT"),
                    ));
                }
            }
            let prefix = prefix.unwrap_or_else(|| DEFAULT_ETCD_PREFIX.to_string());
            if prefix.is_empty() || prefix.ends_with('/') {
                return Err(invalid(
                    "etcd-prefix",
                    format!(
                        "invalid etcd-prefix '{prefix}': must be non-empty and not end with '/'"
                    ),
                ));
            }
            if cert.is_some() != key.is_some() {
                return Err(invalid(
                    "etcd-cert",
                    "etcd-cert and etcd-key must be given together".to_string(),
                ));
            }
            if !(1.0..=3600.0).contains(&lease_ttl) {
                return Err(invalid(
                    "etcd-lease-ttl",
                    format!("etcd-lease-ttl must be between 1s and 1h, got {lease_ttl}s"),
                ));
            }
            Backend::Etcd(EtcdConfig {
                endpoints,
                prefix,
                ca,
                cert,
                key,
                lease_ttl,
                advertise,
            })
        }
        Some(other) => {
            return Err(invalid(
                "backend",
                format!("invalid backend '{other}': expected \"local\" or \"etcd\""),
            ))
        }
    };

    if let Some(raw) = listen_raw {
        if raw.is_empty() {
            return Err(t.err(
                "listen",
                ErrorKind::Invalid {
                    table: "serve".to_string(),
                    message: "listen must name at least one URI".to_string(),
                },
            ));
        }
        let mut uris = Vec::with_capacity(raw.len());
        for (i, u) in raw.iter().enumerate() {
            let uri = Uri::parse(u).map_err(|e| {
                t.err(
                    "listen",
                    ErrorKind::Invalid {
                        table: "serve".to_string(),
                        message: format!("listen[{i}]: {e}"),
                    },
                )
            })?;
            uris.push(uri);
        }
        s.listen = Some(uris);
    }
    Ok(s)
}

/// jansson's `json_load_file()`: the value, or (text, line).
fn load_json_file(path: &str) -> Result<Value, (String, i32)> {
    let bytes = std::fs::read(path)
        .map_err(|e| (format!("unable to open {path}: {}", load::io_text(&e)), -1))?;
    rset::json::loads(&bytes).map_err(|e| (e.text, e.line))
}

impl ResourceConfig {
    /// The file (or origin name) that set `key` of `[resource]`, e.g.
    /// `exclude`, for messages about its value; `None` if it is not set.
    pub fn origin_of(&self, key: &str) -> Option<&str> {
        self.origins
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, o)| o.as_str())
    }

    /// The verification configuration in force: the `verify` value if
    /// given, else [`VerifyConfig::module_default`].  (`noverify`, checked
    /// by the caller, disables verification altogether.)
    pub fn verify_config(&self) -> VerifyConfig {
        self.verify
            .clone()
            .unwrap_or_else(VerifyConfig::module_default)
    }

    /// Build the configured R as flux-core's resource module does:
    /// `[[resource.config]]` if present (then `path` is ignored), else the
    /// JSON file at `path`, else `None`; then `scheduling`, if set, is read
    /// and stored as R's `scheduling` key.  Error texts are flux-core's
    /// (prefixed, in `Display`, with the file that set the key):
    ///
    /// * `error parsing [resource.config] array: config[1]: invalid hostlist 'foo['`
    /// * `/noexist: unable to open /noexist: No such file or directory` (flux-core
    ///   adds jansson's ` on line -1`; Roster names the line only when there is one)
    /// * `error parsing R: invalid version=42`
    /// * `resource.scheduling requires resource.path or [resource.config]`
    /// * `error loading resource.scheduling: <jansson text> on line <n>`
    pub fn inventory(&self) -> Result<Option<Rset>, ConfigError> {
        let origin_path = self.origin_of("path");
        let origin_sched = self.origin_of("scheduling");
        let origin_config = self.origin_of("config");
        // flux-core's order: the R object (config array converted with
        // rlist_from_config and encoded, or the JSON file at path), then
        // the scheduling key set on that object, then the object parsed
        // as R by the inventory.
        let (r_json, origin_r) = if let Some(conf) = &self.config {
            let rl = Rset::from_config(conf).map_err(|e| {
                ConfigError::new(origin_config, ErrorKind::ConfigArray(e.to_string()))
            })?;
            (Some(rl.to_json()), origin_config)
        } else if let Some(path) = &self.path {
            let v = load_json_file(path).map_err(|(text, line)| {
                ConfigError::new(
                    origin_path,
                    ErrorKind::PathLoad {
                        path: path.clone(),
                        text,
                        line,
                    },
                )
            })?;
            (Some(v), origin_path)
        } else {
            (None, None)
        };
        let r_json = match (r_json, &self.scheduling) {
            (None, None) => return Ok(None),
            (None, Some(_)) => {
                return Err(ConfigError::new(
                    origin_sched,
                    ErrorKind::SchedulingWithoutR,
                ));
            }
            (Some(j), None) => j,
            (Some(j), Some(sched)) => {
                let v = load_json_file(sched).map_err(|(text, line)| {
                    ConfigError::new(origin_sched, ErrorKind::SchedulingLoad { text, line })
                })?;
                let mut j = j;
                match &mut j {
                    Value::Object(m) => {
                        m.insert("scheduling".to_string(), v);
                    }
                    _ => return Err(ConfigError::new(origin_sched, ErrorKind::SchedulingSet)),
                }
                j
            }
        };
        let rl = Rset::from_json(&r_json)
            .map_err(|e| ConfigError::new(origin_r, ErrorKind::ParseR(e.to_string())))?;
        Ok(Some(rl))
    }
}

#[cfg(test)]
mod tests;
