use super::*;
use std::fs;

/// Whether an ignored table (e.g. `bootstrap`) is present.
fn has_table(c: &Config, name: &str) -> bool {
    c.ignored_tables.iter().any(|t| t == name)
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_str(text, "test.toml")
}

fn err(text: &str) -> ConfigError {
    match parse(text) {
        Ok(c) => panic!("expected an error for {text:?}, got {c:?}"),
        Err(e) => e,
    }
}

/// `line` alone in `[table]` fails with `test.toml: [table]: msg`.
fn table_err(table: &str, line: &str, msg: &str) -> ConfigError {
    let e = err(&format!("[{table}]\n{line}\n"));
    assert_eq!(
        e.to_string(),
        format!("test.toml: [{table}]: {msg}"),
        "{line}"
    );
    e
}

/// [`table_err`] for each `(line, msg)`.
fn table_errs(table: &str, cases: &[(&str, &str)]) {
    for (line, msg) in cases {
        table_err(table, line, msg);
    }
}

fn data(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn defaults() {
    for c in [parse("").unwrap_or_default(), Config::default()] {
        let r = &c.resource;
        assert_eq!(r.path, None);
        assert_eq!(r.config, None);
        assert_eq!(r.scheduling, None);
        assert_eq!(r.exclude, None);
        assert!(!r.norestrict && !r.noverify && !r.rediscover && !r.no_update_watch);
        assert_eq!(r.verify, None);
        assert_eq!(r.verify_config(), VerifyConfig::module_default());
        assert_eq!(r.journal_max, 100_000);
        assert_eq!(r.history, History::Seconds(7_776_000.0));
        assert_eq!(r.history.seconds(), Some(7_776_000.0));
        assert!(r.groups.is_empty());
        assert_eq!(r.torpid_max, 30.0);
        assert_eq!(r.offline_timeout, 60.0);
        assert_eq!(c.serve, ServeConfig::default());
        assert!(c.ignored_tables.is_empty());
    }
    // An empty [resource] table is the same as none.
    let c = parse("[resource]\n[serve]\n").unwrap_or_default();
    assert_eq!(c.resource, ResourceConfig::default());
    assert_eq!(c.serve.listen, None);
    assert!(parse("").is_ok());
}

#[test]
fn every_resource_key() {
    let c = parse(
        r#"
[resource]
path = "/etc/flux/system/R"
scheduling = "/etc/flux/system/sched.json"
exclude = "test[3,108]"
norestrict = true
noverify = true
rediscover = true
journal-max = 42
history = "100d"
no-update-watch = true
verify = { default = "allow-extra", gpu = "ignore" }
torpid-max = "0"
offline-timeout = "2m"

[resource.groups]
exclude = "login[1-2]"
batch = "0-15"

[[resource.config]]
hosts = "test[1-100]"
cores = "0-7"
"#,
    );
    let c = match c {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let r = &c.resource;
    assert_eq!(r.path.as_deref(), Some("/etc/flux/system/R"));
    assert_eq!(r.scheduling.as_deref(), Some("/etc/flux/system/sched.json"));
    assert_eq!(r.exclude.as_deref(), Some("test[3,108]"));
    assert!(r.norestrict && r.noverify && r.rediscover && r.no_update_watch);
    assert_eq!(r.journal_max, 42);
    assert_eq!(r.history, History::Seconds(8_640_000.0));
    let v = r.verify.clone().unwrap_or_default();
    assert!(v.is_explicit());
    assert_eq!(v.mode("core"), rset::VerifyMode::AllowExtra);
    assert_eq!(v.mode("gpu"), rset::VerifyMode::Ignore);
    assert_eq!(v.mode("hostname"), rset::VerifyMode::AllowExtra);
    assert_eq!(r.verify_config(), v);
    assert_eq!(r.torpid_max, 0.0);
    assert_eq!(r.offline_timeout, 120.0);
    assert_eq!(
        r.groups,
        vec![
            ("exclude".to_string(), "login[1-2]".to_string()),
            ("batch".to_string(), "0-15".to_string())
        ]
    );
    assert_eq!(
        r.config,
        Some(serde_json::json!([{"hosts": "test[1-100]", "cores": "0-7"}]))
    );
    assert_eq!(r.origin_of("path"), Some("test.toml"));
    assert_eq!(r.origin_of("exclude"), Some("test.toml"));
    assert_eq!(r.origin_of("groups"), Some("test.toml"));
    assert_eq!(
        parse("").unwrap_or_default().resource.origin_of("path"),
        None
    );
}

#[test]
fn verify_values() {
    let v = |text: &str| {
        parse(&format!("[resource]\nverify = {text}\n"))
            .map(|c| c.resource.verify.unwrap_or_default())
    };
    let t = v("true").unwrap_or_default();
    assert!(t.is_explicit());
    assert_eq!(t.mode("gpu"), rset::VerifyMode::Strict);
    let f = v("false").unwrap_or_default();
    assert_eq!(f.mode("core"), rset::VerifyMode::Ignore);
    // An empty table starts from default=strict and is explicit.
    let e = v("{}").unwrap_or_default();
    assert!(e.is_explicit());
    assert_eq!(e.mode("hostname"), rset::VerifyMode::Strict);
    let cases = [
        ("\"strict\"", "verify must be a table or boolean"),
        ("1", "verify must be a table or boolean"),
        ("{ core = 1 }", "verify.core mode must be a string"),
        (
            "{ core = \"bogus\" }",
            "verify.core: unknown verify mode 'bogus'",
        ),
        (
            "{ cores = \"strict\" }",
            "verify: unsupported resource type: cores",
        ),
        (
            "{ memory = \"ignore\" }",
            "verify: unsupported resource type: memory",
        ),
    ];
    for (text, msg) in cases {
        let e = table_err("resource", &format!("verify = {text}"), msg);
        assert_eq!(e.flux_text(), msg);
    }
}

#[test]
fn resource_type_errors() {
    let cases = [
        (
            "path = 1",
            "path must be a string, got integer",
            "Expected string, got integer",
        ),
        (
            "scheduling = true",
            "scheduling must be a string, got boolean",
            "Expected string, got true",
        ),
        (
            "exclude = [1]",
            "exclude must be a string, got array",
            "Expected string, got array",
        ),
        (
            "norestrict = \"yes\"",
            "norestrict must be a boolean, got string",
            "Expected true or false, got string",
        ),
        (
            "noverify = 1",
            "noverify must be a boolean, got integer",
            "Expected true or false, got integer",
        ),
        (
            "rediscover = 0.0",
            "rediscover must be a boolean, got float",
            "Expected true or false, got real",
        ),
        (
            "no-update-watch = {}",
            "no-update-watch must be a boolean, got table",
            "Expected true or false, got object",
        ),
        (
            "journal-max = 1.5",
            "journal-max must be an integer, got float",
            "Expected integer, got real",
        ),
        (
            "journal-max = \"10\"",
            "journal-max must be an integer, got string",
            "Expected integer, got string",
        ),
        (
            "history = 0",
            "history must be a string, got integer",
            "Expected string, got integer",
        ),
        (
            "history = false",
            "history must be a string, got boolean",
            "Expected string, got false",
        ),
        (
            "torpid-max = 30",
            "torpid-max must be a string, got integer",
            "Expected string, got integer",
        ),
        (
            "offline-timeout = 1979-05-27",
            "offline-timeout must be a string, got datetime",
            "Expected string, got string",
        ),
        (
            "groups = \"x\"",
            "groups must be a table, got string",
            "Expected object, got string",
        ),
    ];
    for (line, msg, flux) in cases {
        let e = table_err("resource", line, msg);
        assert_eq!(
            e.flux_text(),
            format!("error parsing [resource] configuration: {flux}"),
            "{line}"
        );
    }
    let e = table_err(
        "resource",
        "config = \"foo\"",
        "config must be an array of tables, got string",
    );
    assert_eq!(
        e.flux_text(),
        "error parsing [resource.config] array: resource config must be an array"
    );
    table_err(
        "resource.groups",
        "batch = 1",
        "batch must be a string, got integer",
    );
    let e = err("resource = 1\n");
    assert_eq!(
        e.to_string(),
        "test.toml: resource must be a table, got integer"
    );
    assert_eq!(
        e.flux_text(),
        "error parsing [resource] configuration: Expected object, got integer"
    );
    let e = err("serve = \"x\"\n");
    assert_eq!(
        e.to_string(),
        "test.toml: serve must be a table, got string"
    );
}

#[test]
fn unknown_keys_and_tables() {
    let e = table_err("resource", "foo = 42", "unknown key 'foo'");
    assert_eq!(
        e.flux_text(),
        "error parsing [resource] configuration: 1 object item(s) left unpacked: foo"
    );
    let e = table_err(
        "resource",
        "foo = 42\npath = \"/x\"\nbar = 1",
        "unknown keys 'foo', 'bar'",
    );
    assert_eq!(
        e.flux_text(),
        "error parsing [resource] configuration: 2 object item(s) left unpacked: foo, bar"
    );
    // Like jansson: a type error wins over an unknown key, and types are
    // checked in flux-core's unpack order, whatever the file order.
    let path_int = "path must be a string, got integer";
    table_err(
        "resource",
        "foo = 42\njournal-max = \"x\"\npath = 1",
        path_int,
    );
    // A type error also wins over an invalid value.
    let e = err("[resource]\nhistory = \"foobar\"\nnoverify = 1\n");
    assert!(e.to_string().contains("noverify must be a boolean"), "{e}");
    // Unknown keys win over invalid values.
    table_err(
        "resource",
        "history = \"foobar\"\nfoo = 1",
        "unknown key 'foo'",
    );
    // Flux module arguments are not [resource] keys.
    let force_up = "unknown key 'monitor-force-up'";
    table_err("resource", "monitor-force-up = true", force_up);

    for (text, msg) in [
        ("[foo]\nx = 1\n", "unknown table [foo]"),
        ("foo = 1\n", "unknown top-level key 'foo'"),
        (
            "[[resourcex]]\nx = 1\n",
            "unknown top-level key 'resourcex'",
        ),
    ] {
        assert_eq!(err(text).to_string(), format!("test.toml: {msg}"));
    }
    let e = table_err(
        "serve",
        "listen = [\"unix:///x\"]\nfoo = 1",
        "unknown key 'foo'",
    );
    assert_eq!(e.flux_text(), "[serve]: unknown key 'foo'");
}

#[test]
fn ignored_tables() {
    let c = parse(
        r#"
[bootstrap]
curve_cert = "/etc/flux/system/curve.cert"
hosts = [{ host = "test[1-3]" }]
[systemd]
enable = true
[exec]
imp = "/usr/libexec/flux/flux-imp"
[sched-fluxion-qmanager]
queue-policy = "easy"
[sched-fluxion-resource]
match-policy = "lonodex"
[queues.debug]
requires = ["debug"]
[policy.jobspec.defaults.system]
duration = "1h"
[job-manager]
inactive-age-limit = "7d"
[kvs]
checkpoint-period = "30m"
[access]
allow-guest-user = true
[tbon]
tcp_user_timeout = "2m"
[ingest.validator]
plugins = ["jobspec"]
[archive]
dbpath = "/var/lib/flux/job-archive.sqlite"
[cron]
directory = "/etc/flux/system/cron.d"
[heartbeat]
period = "5s"
"#,
    );
    let c = match c {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(c.ignored_tables.len(), IGNORED_TABLES.len());
    assert!(has_table(&c, "bootstrap"));
    assert!(has_table(&c, "heartbeat"));
    assert!(!has_table(&c, "resource"));
    // Whatever they hold.
    assert!(parse("bootstrap = 1\nqueues = []\n").is_ok());
    assert!(!has_table(&parse("").unwrap_or_default(), "bootstrap"));
}

#[test]
fn history_values() {
    let h =
        |s: &str| parse(&format!("[resource]\nhistory = \"{s}\"\n")).map(|c| c.resource.history);
    assert_eq!(h("inf"), Ok(History::Inf));
    assert_eq!(h("infinity"), Ok(History::Inf));
    assert_eq!(h("0"), Ok(History::Seconds(0.0)));
    assert_eq!(h("90d"), Ok(History::Seconds(7_776_000.0)));
    assert_eq!(h("100d"), Ok(History::Seconds(8_640_000.0)));
    assert_eq!(h("1.5h"), Ok(History::Seconds(5400.0)));
    assert_eq!(History::Inf.seconds(), None);
    for bad in ["foobar", "-1", "1w", "nan", "5 d"] {
        let e = err(&format!("[resource]\nhistory = \"{bad}\"\n"));
        assert_eq!(
            e.to_string(),
            format!("test.toml: [resource]: invalid history time '{bad}'")
        );
        assert_eq!(e.flux_text(), "invalid history time");
    }
}

#[test]
fn roster_durations() {
    let c =
        parse("[resource]\ntorpid-max = \"5m\"\noffline-timeout = \"0.5\"\n").unwrap_or_default();
    assert_eq!(c.resource.torpid_max, 300.0);
    assert_eq!(c.resource.offline_timeout, 0.5);
    let c = parse("[resource]\ntorpid-max = \"inf\"\n").unwrap_or_default();
    assert!(c.resource.torpid_max.is_infinite());
    table_err(
        "resource",
        "torpid-max = \"bad\"",
        "invalid torpid-max duration 'bad': invalid duration suffix",
    );
    table_err(
        "resource",
        "offline-timeout = \"-5s\"",
        "invalid offline-timeout duration '-5s': duration is negative",
    );
}

#[test]
fn serve_table() {
    let c = parse(
        r#"
[serve]
statedir = "/var/lib/roster"
listen = ["unix:///run/roster.sock", "tcp://127.0.0.1:8050", "flux:///run/flux/local"]
token-file = "/etc/roster/token"
monitor-force-up = true
parent-R = "/tmp/R.json"
"#,
    )
    .unwrap_or_default();
    let s = &c.serve;
    assert_eq!(s.statedir, Some(PathBuf::from("/var/lib/roster")));
    assert_eq!(
        s.listen,
        Some(vec![
            Uri::Unix(PathBuf::from("/run/roster.sock")),
            Uri::Tcp {
                host: "127.0.0.1".into(),
                port: 8050
            },
            Uri::Flux(PathBuf::from("/run/flux/local")),
        ])
    );
    assert_eq!(s.token_file, Some(PathBuf::from("/etc/roster/token")));
    assert!(s.monitor_force_up);
    assert_eq!(s.parent_r, Some(PathBuf::from("/tmp/R.json")));

    let cases = [
        ("statedir = 1", "statedir must be a string, got integer"),
        ("listen = \"unix:///x\"", "listen must be an array of strings, got string"),
        ("listen = [\"unix:///x\", 5]", "listen[1] must be a string, got integer"),
        ("listen = []", "listen must name at least one URI"),
        (
            "listen = [\"unix:///x\", \"http://x\"]",
            "listen[1]: invalid URI 'http://x': expected unix:///PATH, tls://HOST:PORT, tcp://HOST:PORT or flux:///PATH",
        ),
        (
            "listen = [\"tcp://host\"]",
            "listen[0]: invalid URI 'tcp://host': expected tcp://HOST:PORT with a port in 1-65535",
        ),
        ("token-file = false", "token-file must be a string, got boolean"),
        ("monitor-force-up = \"true\"", "monitor-force-up must be a boolean, got string"),
        ("parent-R = []", "parent-R must be a string, got array"),
        ("parent-r = \"x\"", "unknown key 'parent-r'"),
        ("tls-cert = 1", "tls-cert must be a string, got integer"),
        ("auth = 1", "auth must be a table, got integer"),
    ];
    table_errs("serve", &cases);
}

#[test]
fn serve_tls_and_auth() {
    let c = parse(
        r#"
[serve]
listen = ["tls://0.0.0.0:8050"]
tls-cert = "/etc/roster/head.pem"
tls-key = "/etc/roster/head.key"
tls-client-ca = "/etc/roster/ca.pem"
tls-crl = "/etc/roster/ca.crl"
reload-dir = "/etc/roster/r"

[serve.auth]
admin = ["alice", "*.ops.example"]
agent = "node[0-127]"
relay = "node[0-3]"
roles-from-ou = false
user-token-file = "/etc/roster/user.token"
"#,
    )
    .unwrap_or_default();
    let s = &c.serve;
    assert_eq!(
        s.listen,
        Some(vec![Uri::Tls {
            host: "0.0.0.0".into(),
            port: 8050
        }])
    );
    assert_eq!(s.tls_cert, Some(PathBuf::from("/etc/roster/head.pem")));
    assert_eq!(s.tls_key, Some(PathBuf::from("/etc/roster/head.key")));
    assert_eq!(s.tls_client_ca, Some(PathBuf::from("/etc/roster/ca.pem")));
    assert_eq!(s.tls_crl, Some(PathBuf::from("/etc/roster/ca.crl")));
    assert_eq!(s.reload_dir, Some(PathBuf::from("/etc/roster/r")));
    let pairs: Vec<(&str, &str)> = s
        .auth
        .patterns
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(
        pairs,
        vec![
            ("admin", "alice"),
            ("admin", "*.ops.example"),
            ("agent", "node[0-127]"),
            ("relay", "node[0-3]")
        ]
    );
    assert!(!s.auth.roles_from_ou);
    assert_eq!(
        s.auth.token_files,
        vec![("user".to_string(), PathBuf::from("/etc/roster/user.token"))]
    );
    assert!(
        parse("[serve]\n")
            .unwrap_or_default()
            .serve
            .auth
            .roles_from_ou
    );
    let cases = [
        (
            "admin = 5",
            "admin must be a string or an array of strings, got integer",
        ),
        ("user = [\"a\", 1]", "user[1] must be a string, got integer"),
        (
            "roles-from-ou = \"no\"",
            "roles-from-ou must be a boolean, got string",
        ),
        ("root = \"x\"", "unknown key 'root'"),
        (
            "admin-token-file = 1",
            "admin-token-file must be a string, got integer",
        ),
    ];
    table_errs("serve.auth", &cases);
}

#[test]
fn syntax_errors_name_file_and_line() {
    let e = err("[resource]\npath = \n");
    let s = e.to_string();
    assert!(s.starts_with("test.toml:2: "), "{s}");
    let e = err("[resource]\n[resource]\n");
    assert!(e.to_string().starts_with("test.toml:2: "), "{e}");
}

fn write(dir: &Path, name: &str, text: &str) {
    if let Err(e) = fs::write(dir.join(name), text) {
        panic!("write {name}: {e}");
    }
}

fn tempdir() -> tempfile::TempDir {
    match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    }
}

#[test]
fn directory_merge() {
    let c = Config::from_path(Path::new(&data("confdir")));
    let c = match c {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(c.files.len(), 3);
    assert!(c
        .files
        .iter()
        .all(|f| f.extension().is_some_and(|e| e == "toml")));
    assert!(c.files.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(c.resource.exclude.as_deref(), Some("foo0"));
    assert!(c.resource.noverify);
    assert_eq!(c.resource.history, History::Inf);
    assert_eq!(c.serve.statedir, Some(PathBuf::from("/var/lib/roster")));
    assert_eq!(c.serve.listen.as_ref().map(Vec::len), Some(2));
    assert_eq!(
        c.ignored_tables,
        vec!["bootstrap", "tbon", "job-manager", "queues"]
    );
    let origin = c.resource.origin_of("config").unwrap_or_default();
    assert!(origin.ends_with("confdir/10-resource.toml"), "{origin}");
    let origin = c.resource.origin_of("history").unwrap_or_default();
    assert!(origin.ends_with("confdir/20-serve.toml"), "{origin}");
    let rl = c.resource.inventory();
    let rl = match rl {
        Ok(Some(rl)) => rl,
        other => panic!("{other:?}"),
    };
    // t0026 parse-config vector.
    assert_eq!(rl.nnodes(), 3);
    assert_eq!(rl.count("core"), 6);
    assert_eq!(rl.count("gpu"), 1);
    assert_eq!(
        rl.nodelist().map(|h| h.encode()),
        Some("foo[0-2]".to_string())
    );
    assert_eq!(rl.property_ranks("login").to_string(), "0");
}

/// A directory holding `files` (name, text).
fn confdir(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempdir();
    for (name, text) in files {
        write(d.path(), name, text);
    }
    d
}

/// The error of reading the configuration directory `dir`, with the path
/// of each file `F` of it written `{F}`.
fn merge_err(dir: &Path) -> String {
    let e = Config::from_path(dir)
        .err()
        .unwrap_or_else(|| panic!("no error"));
    let mut s = e.to_string();
    for f in ["a.toml", "b.toml", "c.toml"] {
        s = s.replace(&dir.join(f).display().to_string(), &format!("{{{f}}}"));
    }
    s
}

#[test]
fn directory_merge_errors_name_files() {
    let a_path = ("a.toml", "[resource]\npath = \"/a\"\n");
    // (what, files, error, error once c.toml is removed)
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str, Option<&'a str>);
    let cases: [Case; 3] = [
        (
            "a key defined in two files",
            &[a_path, ("b.toml", "[resource]\npath = \"/b\"\n")],
            "{b.toml}: resource.path: already defined in {a.toml}",
            None,
        ),
        (
            "a table defined whole in one file and a key of it in another",
            &[
                ("a.toml", "[resource.groups]\nx = \"0\"\n"),
                ("b.toml", "[resource]\ngroups = \"y\"\n"),
            ],
            "{b.toml}: resource.groups: already defined in {a.toml}",
            None,
        ),
        (
            "errors name the file holding the offending key",
            &[
                a_path,
                (
                    "b.toml",
                    "[resource]\nfoo = 1\n[serve]\nstatedir = \"/s\"\n",
                ),
                ("c.toml", "[resource]\njournal-max = \"x\"\n"),
            ],
            "{c.toml}: [resource]: journal-max must be an integer, got string",
            Some("{b.toml}: [resource]: unknown key 'foo'"),
        ),
    ];
    for (what, files, want, without_c) in cases {
        let d = confdir(files);
        assert_eq!(merge_err(d.path()), want, "{what}");
        if let Some(want) = without_c {
            fs::remove_file(d.path().join("c.toml")).unwrap_or(());
            assert_eq!(merge_err(d.path()), want, "{what}, without c.toml");
        }
    }

    // Syntax errors name the file and line.
    let d = confdir(&[("a.toml", "[resource]\n\n\npath = /x\n")]);
    let e = merge_err(d.path());
    assert!(e.starts_with("{a.toml}:4: "), "{e}");

    // An empty directory is an empty configuration.
    let d = tempdir();
    let c = Config::from_path(d.path());
    assert_eq!(c.map(|c| c.resource), Ok(ResourceConfig::default()));

    // A single file works too.
    let d = confdir(&[("roster.conf", "[resource]\njournal-max = 7\n")]);
    let c = Config::from_path(&d.path().join("roster.conf")).unwrap_or_default();
    assert_eq!(c.resource.journal_max, 7);
    assert_eq!(c.files, vec![d.path().join("roster.conf")]);
}

#[test]
fn missing_path() {
    let e = Config::from_path(Path::new("/nonexistent/roster.toml"));
    assert_eq!(
        e.err().map(|e| e.to_string()),
        Some("/nonexistent/roster.toml: No such file or directory".to_string())
    );
}

fn inventory_err(text: &str) -> String {
    let c = match parse(text) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    match c.resource.inventory() {
        Ok(r) => panic!("expected an error, got {r:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn inventory_from_config_array() {
    // t2315 example.
    let c = parse(
        r#"
[[resource.config]]
hosts = "foo[0-10]"
cores = "0-3"
[[resource.config]]
hosts = "foo[9,10]"
gpus = "0-1"
[[resource.config]]
hosts = "foo[0-2]"
properties = ["debug"]
[[resource.config]]
hosts = "foo[3-10]"
properties = ["batch"]
"#,
    )
    .unwrap_or_default();
    let rl = c.resource.inventory().ok().flatten().unwrap_or_default();
    assert_eq!(rl.nnodes(), 11);
    assert_eq!(rl.count("core"), 44);
    assert_eq!(rl.count("gpu"), 4);
    assert_eq!(rl.property_ranks("debug").to_string(), "0-2");
    assert_eq!(rl.property_ranks("batch").to_string(), "3-10");
    assert_eq!(rl.starttime(), 0.0);
    assert_eq!(rl.expiration(), 0.0);

    // path is ignored when config is present, even if it does not exist.
    let c = parse(
        "[resource]\npath = \"/noexist\"\n[[resource.config]]\nhosts = \"a\"\ncores = \"0\"\n",
    )
    .unwrap_or_default();
    assert_eq!(
        c.resource.inventory().ok().flatten().map(|r| r.nnodes()),
        Some(1)
    );

    let cases = [
        ("[resource]\nconfig = []\n", "no hosts configured"),
        ("[[resource.config]]\nhosts = \"foo[\"\n", "config[0]: invalid hostlist 'foo['"),
        ("[[resource.config]]\nhosts = \"\"\n", "config[0]: empty hostlist specified"),
        ("[[resource.config]]\nhosts = \"a\"\ncores = \"0-\"\n", "config[0]: invalid idset cores='0-'"),
        (
            "[[resource.config]]\nhosts = \"a\"\ncores = \"0\"\n[[resource.config]]\nhosts = \"a\"\ngpus = \"2,1\"\n",
            "config[1]: invalid idset gpus='2,1'",
        ),
        (
            "[[resource.config]]\nhosts = \"a\"\ncores = \"0\"\njunk = 1\n",
            "config[0]: 1 object item(s) left unpacked: junk",
        ),
        (
            "[[resource.config]]\nhosts = \"a\"\ncores = \"0\"\nproperties = \"x\"\n",
            "config[0]: properties must be an array",
        ),
        (
            "[[resource.config]]\nhosts = \"a\"\ncores = \"0\"\nproperties = [\"de^bug\"]\n",
            "config[0]: invalid property \"\"de^bug\"\"",
        ),
        ("[[resource.config]]\nhosts = \"foo11\"\n", "resource.config: foo11 assigned no resources"),
    ];
    for (text, msg) in cases {
        assert_eq!(
            inventory_err(text),
            format!("test.toml: error parsing [resource.config] array: {msg}"),
            "{text}"
        );
    }
}

#[test]
fn inventory_from_path_and_scheduling() {
    let r = data("R.json");
    let c = parse(&format!("[resource]\npath = \"{r}\"\n")).unwrap_or_default();
    let rl = c.resource.inventory().ok().flatten().unwrap_or_default();
    assert_eq!(rl.nnodes(), 2);
    assert_eq!(rl.count("core"), 8);
    assert_eq!(rl.scheduling(), None);

    let s = data("scheduling.json");
    let c = parse(&format!(
        "[resource]\npath = \"{r}\"\nscheduling = \"{s}\"\n"
    ))
    .unwrap_or_default();
    let rl = c.resource.inventory().ok().flatten().unwrap_or_default();
    assert_eq!(
        rl.scheduling(),
        Some(&serde_json::json!({"graph": {"nodes": [], "edges": []}}))
    );
    assert!(rl.encode().contains("\"scheduling\""));

    // scheduling with a config array.
    let c = parse(&format!(
        "[resource]\nscheduling = \"{s}\"\n[[resource.config]]\nhosts = \"a\"\ncores = \"0\"\n"
    ))
    .unwrap_or_default();
    let rl = c.resource.inventory().ok().flatten().unwrap_or_default();
    assert!(rl.scheduling().is_some());

    assert_eq!(
        inventory_err("[resource]\npath = \"/noexist\"\n"),
        "test.toml: /noexist: unable to open /noexist: No such file or directory"
    );
    let v42 = data("R-version42.json");
    assert_eq!(
        inventory_err(&format!("[resource]\npath = \"{v42}\"\n")),
        "test.toml: error parsing R: invalid version=42"
    );
    let e = inventory_err(&format!("[resource]\nscheduling = \"{s}\"\n"));
    assert_eq!(
        e,
        "test.toml: resource.scheduling requires resource.path or [resource.config]"
    );
    let bad = data("bad-scheduling.json");
    let e = inventory_err(&format!(
        "[resource]\npath = \"{r}\"\nscheduling = \"{bad}\"\n"
    ));
    assert!(
        e.starts_with("test.toml: error loading resource.scheduling: "),
        "{e}"
    );
    assert!(e.ends_with(" on line 3"), "{e}");
    let e = inventory_err(&format!(
        "[resource]\npath = \"{r}\"\nscheduling = \"/noexist\"\n"
    ));
    assert_eq!(
        e,
        "test.toml: error loading resource.scheduling: unable to open /noexist: No such file or directory"
    );
    // Malformed R JSON.
    let e = inventory_err(&format!("[resource]\npath = \"{bad}\"\n"));
    assert!(e.starts_with(&format!("test.toml: {bad}: ")), "{e}");
    assert!(e.ends_with(" on line 3"), "{e}");
    // A JSON R that is not an object cannot take a scheduling key.
    let d = tempdir();
    let arr = d.path().join("arr.json");
    write(d.path(), "arr.json", "[1]\n");
    let e = inventory_err(&format!(
        "[resource]\npath = \"{}\"\nscheduling = \"{s}\"\n",
        arr.display()
    ));
    assert_eq!(e, "test.toml: failed to set scheduling key in R");

    // Nothing configured: no R.
    assert_eq!(parse("").unwrap_or_default().resource.inventory(), Ok(None));
}

#[test]
fn serve_limits() {
    let c = parse("[serve]\n").unwrap();
    assert_eq!(c.serve.limits, ServeLimits::default());
    let c = parse(
        "[serve]\nmax-connections = 10\nmax-connections-per-peer = 2\nmax-inflight = 3\n\
         max-outbound-bytes = 8192\nmax-guest-outbound-bytes = 4096\nmax-request-bytes = 4096\nmax-queued-requests = 7\n\
         request-timeout = \"2s\"\nidle-timeout = \"1m\"\nmax-unauthenticated-per-peer = 3\n\
         auth-timeout = \"0.5s\"\npublic-read = true\n",
    )
    .unwrap();
    assert!(c.serve.public_read);
    assert!(
        !parse("[serve]\n").unwrap().serve.public_read,
        "off by default"
    );
    let l = &c.serve.limits;
    assert_eq!(l.max_unauthenticated_per_peer, 3);
    assert_eq!(l.auth_timeout, 0.5);
    assert_eq!(l.max_connections, 10);
    assert_eq!(l.max_connections_per_peer, 2);
    assert_eq!(l.max_inflight, 3);
    assert_eq!(l.max_outbound_bytes, 8192);
    assert_eq!(l.max_guest_outbound_bytes, 4096);
    assert_eq!(l.max_request_bytes, 4096);
    assert_eq!(
        l.max_guest_request_bytes, 4096,
        "follows a lower max-request-bytes"
    );
    assert_eq!(l.max_queued_requests, 7);
    assert_eq!(l.request_timeout, 2.0);
    assert_eq!(l.idle_timeout, 60.0);
    for (body, msg) in [
        (
            "max-connections = 0",
            "[serve]: max-connections must be at least 1, got 0",
        ),
        (
            "max-inflight = -5",
            "[serve]: max-inflight must be at least 1, got -5",
        ),
        (
            "max-outbound-bytes = 100",
            "[serve]: max-outbound-bytes must be at least 4096, got 100",
        ),
        (
            "max-request-bytes = 4294967296",
            "[serve]: max-request-bytes must be at most 2147483647, got 4294967296",
        ),
        (
            "max-queued-requests = \"many\"",
            "[serve]: max-queued-requests must be an integer, got string",
        ),
        (
            "max-request-bytes = 2048\nmax-guest-request-bytes = 4096",
            "[serve]: max-guest-request-bytes (4096) must not exceed max-request-bytes (2048)",
        ),
        (
            "max-unauthenticated-per-peer = 0",
            "[serve]: max-unauthenticated-per-peer must be at least 1, got 0",
        ),
        (
            "auth-timeout = \"0\"",
            "[serve]: invalid auth-timeout '0': must be a finite duration above zero",
        ),
        (
            "public-read = \"yes\"",
            "[serve]: public-read must be a boolean, got string",
        ),
        (
            "idle-timeout = \"0\"",
            "[serve]: invalid idle-timeout '0': must be a finite duration above zero",
        ),
        (
            "request-timeout = 5",
            "[serve]: request-timeout must be a string, got integer",
        ),
    ] {
        let e = err(&format!("[serve]\n{body}\n"));
        assert_eq!(e.to_string(), format!("test.toml: {msg}"), "{body}");
    }
    let e = err("[serve]\nrequest-timeout = \"soon\"\n");
    assert!(
        e.to_string()
            .starts_with("test.toml: [serve]: invalid request-timeout 'soon': "),
        "{e}"
    );
}

#[test]
fn serve_etcd_backend() {
    let c = parse(
        "[serve]\nbackend = \"etcd\"\netcd-endpoints = [\"http://127.0.0.1:2379\", \"https://e2:2379\"]\netcd-ca = \"/ca.pem\"\netcd-cert = \"/c.pem\"\netcd-key = \"/k.pem\"\netcd-lease-ttl = \"3s\"\nadvertise = \"tcp://head:8050\"\n",
    )
    .unwrap();
    let Backend::Etcd(e) = &c.serve.backend else {
        panic!("not etcd: {:?}", c.serve.backend)
    };
    assert_eq!(e.endpoints, ["http://127.0.0.1:2379", "https://e2:2379"]);
    assert_eq!(e.prefix, DEFAULT_ETCD_PREFIX);
    assert_eq!(e.ca, Some(PathBuf::from("/ca.pem")));
    assert_eq!(e.key, Some(PathBuf::from("/k.pem")));
    assert_eq!(e.lease_ttl, 3.0);
    assert_eq!(e.advertise.as_deref(), Some("tcp://head:8050"));
    assert_eq!(parse("[serve]\n").unwrap().serve.backend, Backend::Local);
    assert_eq!(
        parse("[serve]\nbackend = \"local\"\n")
            .unwrap()
            .serve
            .backend,
        Backend::Local
    );
    let ep = "etcd-endpoints = [\"http://e:1\"]";
    let cases = [
        (
            "backend = \"zk\"",
            "invalid backend 'zk': expected \"local\" or \"etcd\"",
        ),
        (
            "backend = \"etcd\"",
            "backend = \"etcd\" needs etcd-endpoints with at least one endpoint",
        ),
        (ep, "etcd-endpoints needs backend = \"etcd\""),
        (
            "backend = \"etcd\"\netcd-endpoints = \"http://e:1\"",
            "etcd-endpoints must be an array of strings, got string",
        ),
        (
            "backend = \"etcd\"\netcd-endpoints = [\"e:1\"]",
            "invalid etcd endpoint 'e:1': expected http://HOST:PORT or https://HOST:PORT",
        ),
        (
            "backend = \"etcd\"\netcd-endpoints = [\"http://e:1\"]\netcd-prefix = \"/r/\"",
            "invalid etcd-prefix '/r/': must be non-empty and not end with '/'",
        ),
        (
            "backend = \"etcd\"\netcd-endpoints = [\"http://e:1\"]\netcd-cert = \"/c\"",
            "etcd-cert and etcd-key must be given together",
        ),
        (
            "backend = \"etcd\"\netcd-endpoints = [\"http://e:1\"]\netcd-lease-ttl = \"0.5s\"",
            "etcd-lease-ttl must be between 1s and 1h, got 0.5s",
        ),
    ];
    table_errs("serve", &cases);
}

#[test]
fn serve_relay_fanout() {
    let c = Config::from_str("[serve]\nrelay-fanout = 16\n", "test.toml").unwrap();
    assert_eq!(c.serve.relay_fanout, Some(16));
    assert_eq!(
        Config::from_str("[serve]\n", "test.toml")
            .unwrap()
            .serve
            .relay_fanout,
        None
    );
    for (text, want) in [
        (
            "relay-fanout = 0",
            "relay-fanout must be between 1 and 65536, got 0",
        ),
        (
            "relay-fanout = 70000",
            "relay-fanout must be between 1 and 65536, got 70000",
        ),
        ("relay-fanout = \"8\"", "relay-fanout"),
    ] {
        let e = Config::from_str(&format!("[serve]\n{text}\n"), "test.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}");
    }
}

/// docs/configuration.md has a row for every key the parser accepts, in
/// the section of its table, and no row for a key it does not accept.
#[test]
fn every_key_is_documented() {
    const DOC: &str = include_str!("../../../docs/configuration.md");
    // `## `[resource]`` ... up to the next `## `
    let section = |table: &str| -> Vec<String> {
        let head = format!("## `[{table}]`\n");
        let start = DOC
            .find(&head)
            .unwrap_or_else(|| panic!("no section {head:?} in docs/configuration.md"));
        let body = &DOC[start + head.len()..];
        let body = &body[..body.find("\n## ").unwrap_or(body.len())];
        body.lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split_once("` |").map(|(k, _)| k.to_string()))
            .collect()
    };
    for table in ["resource", "serve", "serve.auth"] {
        let rows = section(table);
        let mut known = crate::known_keys(table);
        known.sort_unstable();
        let mut documented: Vec<&str> = rows.iter().map(String::as_str).collect();
        documented.sort_unstable();
        assert_eq!(
            documented, known,
            "[{table}]: docs/configuration.md rows vs the keys the parser accepts"
        );
    }
}
