#![allow(unsafe_code)] // libc calls (getuid, kill, signals) or a counting allocator
//! A real `roster serve` on a temporary directory, for integration tests.
#![allow(dead_code)]

pub mod etcd;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn roster() -> Command {
    Command::new(env!("CARGO_BIN_EXE_roster"))
}

/// Is `tool` on PATH?  Missing: skip loudly (the caller returns), or
/// fail under `CI=true`, where every tool must be there (`.ci/run`
/// installs the Debian `package`).
pub fn need(tool: &str, package: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{tool} is not installed (Debian package `{package}`) and CI=true");
        }
        eprintln!("!!! SKIPPING: {tool} not installed (apt-get install {package})");
    }
    found
}

/// `PREFIX-PID-NANOS` in the temporary directory: a path no other test
/// (nor run) uses.
pub fn unique_temp_dir(prefix: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ))
}

/// A scratch directory, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = unique_temp_dir(&format!("roster-it-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("state")).expect("create scratch dir");
        Scratch(dir)
    }
    pub fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
    pub fn statedir(&self) -> PathBuf {
        self.0.join("state")
    }
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::write(&p, text).expect("write scratch file");
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running daemon.
pub struct Daemon {
    pub child: Option<Child>,
    pub uri: String,
    pub sock: PathBuf,
    pub log: PathBuf,
}

/// Start `roster serve --statedir S/state --listen unix://S/roster.sock
/// --config S/roster.toml ARGS...` and wait until it answers.
pub fn start(s: &Scratch, config: &str, args: &[&str]) -> Daemon {
    try_start(s, config, args).unwrap_or_else(|log| panic!("roster serve did not start:\n{log}"))
}

/// Like [`start`], but return the daemon's log if it exits before it
/// answers.
pub fn try_start(s: &Scratch, config: &str, args: &[&str]) -> Result<Daemon, String> {
    try_start_env(s, config, args, &[])
}

/// The log of a daemon that must refuse to start.
#[track_caller]
pub fn start_refused(s: &Scratch, config: &str, args: &[&str]) -> String {
    try_start(s, config, args)
        .err()
        .expect("roster serve refuses to start")
}

/// [`start`] with extra environment variables for the daemon.
pub fn start_env(s: &Scratch, config: &str, args: &[&str], env: &[(&str, &str)]) -> Daemon {
    try_start_env(s, config, args, env)
        .unwrap_or_else(|log| panic!("roster serve did not start:\n{log}"))
}

/// Receive lines from `rx` until `last` arrives (panics after `within`);
/// the lines `aside` takes (returns true for) are not kept.
pub fn recv_until(
    rx: &std::sync::mpsc::Receiver<String>,
    last: &str,
    within: Duration,
    mut aside: impl FnMut(&str) -> bool,
) -> Vec<String> {
    let mut got = Vec::new();
    loop {
        match rx.recv_timeout(within) {
            Ok(n) if aside(&n) => {}
            Ok(n) => {
                let done = n == last;
                got.push(n);
                if done {
                    return got;
                }
            }
            Err(e) => panic!("waiting for {last}: {e}; got {got:?}"),
        }
    }
}

/// Assert that `text` (a log, an output) contains `want`, showing it all
/// when not.
#[track_caller]
pub fn assert_contains(text: &str, want: &str) {
    assert!(text.contains(want), "{want:?} not in:\n{text}");
}

/// `roster serve --statedir S --listen URI --config CFG`, for the caller
/// to add arguments, environment and output to and spawn.
pub fn serve_cmd(s: &Scratch, uri: &str, cfg: &Path) -> Command {
    let mut c = roster();
    c.arg("serve")
        .arg("--statedir")
        .arg(s.statedir())
        .arg("--listen")
        .arg(uri)
        .arg("--config")
        .arg(cfg);
    c
}

/// [`try_start`] with extra environment variables for the daemon.
pub fn try_start_env(
    s: &Scratch,
    config: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<Daemon, String> {
    let cfg = s.write("roster.toml", config);
    let sock = s.path("roster.sock");
    let uri = format!("unix://{}", sock.display());
    let log = s.path("serve.log");
    let logf = std::fs::File::create(&log).expect("create log");
    let child = serve_cmd(s, &uri, &cfg)
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(logf)
        .spawn()
        .expect("spawn roster serve");
    let mut d = Daemon {
        child: Some(child),
        uri,
        sock,
        log,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(Ok(Some(_))) = d.child.as_mut().map(|c| c.try_wait()) {
            d.child = None;
            return Err(d.log_text());
        }
        if d.sock.exists() && d.rpc("resource.status", serde_json::json!({})).is_ok() {
            return Ok(d);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("timeout; log:\n{}", d.log_text()))
}

impl Daemon {
    pub fn client(&self) -> client::blocking::Client {
        client::blocking::Client::new(rpc::uri::Uri::parse(&self.uri).expect("uri"))
    }

    pub fn rpc(
        &self,
        topic: &str,
        payload: serde_json::Value,
    ) -> Result<serde_json::Value, client::ClientError> {
        self.client().rpc(topic, payload)
    }

    /// `roster resource --uri URI ARGS...` against this daemon (UTC, no
    /// user configuration).
    pub fn resource_cmd(&self, args: &[&str]) -> Command {
        let mut c = roster();
        c.arg("resource").arg("--uri").arg(&self.uri).args(args);
        c.env("TZ", "UTC")
            .env("XDG_CONFIG_HOME", "/nonexistent")
            .env("XDG_CONFIG_DIRS", "/nonexistent")
            .stdin(Stdio::null());
        c
    }

    /// `roster resource ARGS...` against this daemon.
    pub fn resource(&self, args: &[&str]) -> Output {
        self.resource_cmd(args)
            .output()
            .expect("run roster resource")
    }

    /// [`Daemon::resource`] running, its stdout and stderr piped.
    pub fn spawn_resource(&self, args: &[&str]) -> Child {
        self.resource_cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn roster resource")
    }

    /// stdout of a `roster resource` command that must succeed.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.resource(args);
        assert!(
            o.status.success(),
            "roster resource {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// (exit code, stderr) of a `roster resource` command that must fail.
    pub fn fails(&self, args: &[&str]) -> (i32, String) {
        let o = self.resource(args);
        assert!(!o.status.success(), "roster resource {args:?} succeeded");
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// Its `resource.status`.
    pub fn status(&self) -> serde_json::Value {
        self.rpc("resource.status", serde_json::json!({}))
            .expect("status")
    }

    /// Wait (up to `secs`) until `key` of [`Daemon::status`] is `want`;
    /// how long that took.
    pub fn wait_status(&self, key: &str, want: &str, secs: f64) -> Duration {
        let start = Instant::now();
        loop {
            let st = self.status();
            if st[key] == want {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < Duration::from_secs_f64(secs),
                "{key} is {} after {secs} s, wanted {want}; log:\n{}",
                st[key],
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM and wait: a clean shutdown.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("daemon running");
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        c.wait().expect("wait daemon")
    }

    /// SIGKILL and wait: a crash.
    pub fn crash(&mut self) {
        reap(Some(self.child.take().expect("daemon running")));
    }

    pub fn log_text(&self) -> String {
        read_log(&self.log)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        reap(self.child.take());
    }
}

/// SIGKILL `child` (if any) and wait for it.
fn reap(child: Option<Child>) {
    if let Some(mut c) = child {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// A log file's text (empty when there is none yet).
fn read_log(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

/// The persistent eventlog's lines as JSON (while the daemon runs the
/// file ends with preallocated zero bytes: not lines).
pub fn stored_events(statedir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(statedir.join("resource.eventlog"))
        .unwrap_or_default()
        .trim_end_matches('\0')
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).expect("eventlog line is JSON"))
        .collect()
}

/// `[resource]` with N fake nodes `fake[0-(N-1)]`, cores 0-3, no verify.
pub fn fake_config(n: u32, extra: &str) -> String {
    format!(
        "[resource]\nnoverify = true\n{extra}\n[[resource.config]]\nhosts = \"fake[0-{}]\"\ncores = \"0-3\"\n",
        n - 1
    )
}

/// A minimal Flux local-connector client written from the wire notes
/// (independent of the server's codec): request with ROUTE|TOPIC[|PAYLOAD].
pub mod flux_wire {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    fn frame(out: &mut Vec<u8>, b: &[u8]) {
        if b.len() < 255 {
            out.push(b.len() as u8);
        } else {
            out.push(0xff);
            out.extend_from_slice(&(b.len() as u32).to_be_bytes());
        }
        out.extend_from_slice(b);
    }

    pub fn connect(path: &std::path::Path) -> UnixStream {
        let mut s = UnixStream::connect(path).expect("connect flux socket");
        let mut b = [0u8; 1];
        s.read_exact(&mut b).expect("handshake byte");
        assert_eq!(b[0], 0, "handshake refused");
        s
    }

    pub fn request(s: &mut UnixStream, topic: &str, payload: Option<&str>, tag: u32) {
        request_flags(s, topic, payload, tag, 0)
    }

    /// With extra message flags: 0x04 NORESPONSE, 0x40 STREAMING.
    pub fn request_flags(
        s: &mut UnixStream,
        topic: &str,
        payload: Option<&str>,
        tag: u32,
        extra: u8,
    ) {
        let mut body = Vec::new();
        let mut flags = 0x01 | 0x08 | extra;
        frame(&mut body, b"");
        frame(&mut body, topic.as_bytes());
        if let Some(p) = payload {
            flags |= 0x02;
            let mut p = p.as_bytes().to_vec();
            p.push(0);
            frame(&mut body, &p);
        }
        let mut proto = vec![0x8e, 1, 1, flags];
        for v in [u32::MAX, 0, u32::MAX, tag] {
            proto.extend_from_slice(&v.to_be_bytes());
        }
        frame(&mut body, &proto);
        let mut msg = 0xffee_0012u32.to_le_bytes().to_vec();
        msg.extend_from_slice(&(body.len() as u32).to_be_bytes());
        msg.extend_from_slice(&body);
        s.write_all(&msg).expect("send");
    }

    /// (frames before PROTO, errnum, matchtag)
    pub fn response(s: &mut UnixStream) -> (Vec<Vec<u8>>, u32, u32) {
        let mut pre = [0u8; 8];
        s.read_exact(&mut pre).expect("preamble");
        let n = u32::from_be_bytes([pre[4], pre[5], pre[6], pre[7]]) as usize;
        let mut body = vec![0u8; n];
        s.read_exact(&mut body).expect("body");
        let mut frames = Vec::new();
        let mut i = 0;
        while i < body.len() {
            let mut l = body[i] as usize;
            i += 1;
            if l == 255 {
                l = u32::from_be_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]) as usize;
                i += 4;
            }
            frames.push(body[i..i + l].to_vec());
            i += l;
        }
        let proto = frames.pop().expect("proto frame");
        let be =
            |o: usize| u32::from_be_bytes([proto[o], proto[o + 1], proto[o + 2], proto[o + 3]]);
        (frames, be(12), be(16))
    }
}

/// Send signal `sig` to process `pid` (our own child).
pub fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) has no memory effects.
    unsafe { libc::kill(pid, sig) };
}

/// `name` or `name:reason` of each event of a journal response.
pub fn event_names(v: &serde_json::Value) -> Vec<String> {
    v["events"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| match e["context"]["reason"].as_str() {
            Some(r) => format!("{}:{r}", e["name"].as_str().unwrap_or("")),
            None => e["name"].as_str().unwrap_or("").to_string(),
        })
        .collect()
}

/// The lines of `from` (a child's output), sent as they arrive by a
/// thread of their own.
pub fn line_channel(
    from: impl std::io::Read + Send + 'static,
) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(from).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// `flux.sock` in `s` and its `flux://` URI, for `--listen`.
pub fn flux_socket(s: &Scratch) -> (PathBuf, String) {
    let fsock = s.path("flux.sock");
    let furi = format!("flux://{}", fsock.display());
    (fsock, furi)
}

/// A daemon on `config` also listening on [`flux_socket`], and a Flux
/// connection to it.
pub fn start_flux(s: &Scratch, config: &str) -> (Daemon, std::os::unix::net::UnixStream) {
    let (fsock, furi) = flux_socket(s);
    let d = start(s, config, &["--listen", &furi]);
    (d, flux_wire::connect(&fsock))
}

/// Is the opt-in `VAR=1` (of a slow test) set?  If not, say so (the
/// caller returns).
pub fn opted_in(var: &str) -> bool {
    let on = std::env::var(var).as_deref() == Ok("1");
    if !on {
        eprintln!("skipped: set {var}=1");
    }
    on
}

/// The number in `$VAR`, else `default`.
pub fn env_number(var: &str, default: u32) -> u32 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A free TCP port on loopback (free when asked).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// `token` in `s`: the bearer token `s3cret`, mode 0600; its path.
pub fn token_file(s: &Scratch) -> PathBuf {
    let token = s.write("token", "s3cret\n");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    token
}

/// `pki` in `s`: a CA (`roster serve ca init`) and its certificate for
/// `localhost`; its path.
pub fn localhost_pki(s: &Scratch) -> String {
    let pki = s.path("pki").to_str().unwrap().to_string();
    ca(&["init", &pki]);
    ca(&["issue", &pki, "localhost"]);
    pki
}

/// The `[serve]` keys naming `localhost_pki`'s certificate and key.
pub fn cert_and_key(pki: &str) -> String {
    format!("tls-cert = \"{pki}/localhost.pem\"\ntls-key = \"{pki}/localhost.key\"\n")
}

/// `roster serve ca ...`, which must succeed; its stdout.
pub fn ca(args: &[&str]) -> String {
    output_ok(roster().args(["serve", "ca"]).args(args))
}

/// Run `cmd`, which must succeed (else show its output): its stdout.
#[track_caller]
pub fn output_ok(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{cmd:?}: {out}{err}");
    out.into_owned()
}

/// Resident set size of process `pid`, bytes.
pub fn rss_bytes(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Open descriptors of process `pid`.
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// A running `roster agent` (plain, relay or simulator), its stderr in
/// `log`; killed on drop (continued first, should it be stopped).
pub struct Agent {
    child: Option<Child>,
    pub log: PathBuf,
}

impl Agent {
    /// `roster agent ARGS`, its stderr in `NAME.log` of the scratch dir.
    pub fn spawn(s: &Scratch, name: &str, args: &[&str]) -> Agent {
        let log = s.path(&format!("{name}.log"));
        let child = roster()
            .arg("agent")
            .args(args)
            .env_remove("ROSTER_TOKEN_FILE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn roster agent");
        Agent {
            child: Some(child),
            log,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).unwrap_or(0)
    }

    pub fn signal(&self, sig: i32) {
        if self.child.is_some() {
            signal(self.pid(), sig);
        }
    }

    /// Wait for the exit status (within 60 s).
    pub fn wait(&mut self) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("agent running");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < deadline, "agent did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn kill(&mut self) {
        if let Some(c) = &self.child {
            // A stopped agent must be continued to die promptly.
            signal(c.id() as i32, libc::SIGCONT);
        }
        reap(self.child.take());
    }

    pub fn log_text(&self) -> String {
        read_log(&self.log)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An agent's options for `host` (4 cores, heartbeat 0.2 s) below `parent`.
pub fn node_args<'a>(parent: &'a str, host: &'a str) -> [&'a str; 8] {
    [
        "--uri",
        parent,
        "--hostname",
        host,
        "--cores",
        "0-3",
        "--heartbeat",
        "0.2",
    ]
}

/// `roster serve --check --config CONFIG`.
pub fn check(config: &Path) -> Output {
    roster()
        .args(["serve", "--check", "--config"])
        .arg(config)
        .output()
        .unwrap()
}

/// [`check`] of a configuration that must be refused (exit 1): its stderr.
pub fn check_fails(config: &Path) -> String {
    let o = check(config);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "{err}");
    err
}

/// What a finished command printed, and its exit code (-1: killed).
pub struct Out {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

impl From<Output> for Out {
    fn from(o: Output) -> Out {
        Out {
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            code: o.status.code().unwrap_or(-1),
        }
    }
}

/// `roster ARGS` with `stdin` written to its standard input.
pub fn run_stdin(args: &[&str], stdin: &str) -> Out {
    use std::io::Write;
    let mut child = roster()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn roster");
    if let Some(mut si) = child.stdin.take() {
        let _ = si.write_all(stdin.as_bytes());
    }
    child.wait_with_output().expect("wait roster").into()
}

/// A daemon (with ARGS) also listening on a free loopback TCP port whose
/// clients need the bearer token `s3cret` ([`token_file`]); returns it
/// and the TCP address.
pub fn start_with_tcp(s: &Scratch, config: &str, args: &[&str]) -> (Daemon, String) {
    let token = token_file(s);
    let addr = format!("127.0.0.1:{}", free_port());
    let tcp = format!("tcp://{addr}");
    let listen = ["--listen", &tcp, "--token-file", token.to_str().unwrap()];
    let d = start(s, config, &[&listen[..], args].concat());
    (d, addr)
}

/// A xorshift generator seeded from this process (random enough for
/// crash-test schedules; the seed differs per run).
pub fn xorshift() -> impl FnMut() -> u64 {
    let mut seed = 0x9e3779b97f4a7c15u64 ^ u64::from(std::process::id());
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}
