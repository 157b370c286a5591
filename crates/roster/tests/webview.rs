//! The live web view in a real browser: headless Chromium driven through
//! chromedriver's WebDriver HTTP API (Debian `chromium`, `chromium-driver`).

mod common;

use common::*;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One HTTP/1.1 request with a JSON body; the JSON reply.
fn http_json(addr: &str, method: &str, path: &str, body: Option<&Value>) -> Value {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Read the head, then Content-Length bytes (chromedriver keeps the
    // connection open whatever `Connection: close` says).
    let mut buf = Vec::new();
    let mut byte = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = read_retrying(&mut s, &mut byte).expect("read reply head");
        assert!(n > 0, "connection closed before the reply head");
        buf.extend_from_slice(&byte[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no content-length: {head}"));
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = read_retrying(&mut s, &mut byte).expect("read reply body");
        assert!(n > 0, "connection closed mid-body");
        body.extend_from_slice(&byte[..n]);
    }
    let body = String::from_utf8_lossy(&body[..len]).to_string();
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {head}\n{body}"))
}

/// `read`, again after EINTR (a signal reaching the test process, e.g.
/// a child's exit, must not fail a WebDriver call).
fn read_retrying(s: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match s.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// chromedriver plus one headless Chromium session.
struct Browser {
    driver: Child,
    addr: String,
    session: String,
    _profile: Scratch,
}

impl Browser {
    fn start(width: u32, height: u32) -> Browser {
        let addr = format!("127.0.0.1:{}", free_port());
        let port = addr.rsplit(':').next().unwrap().to_string();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&addr).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = Scratch::new("chromium-profile");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage",
                format!("--window-size={width},{height}"),
                format!("--user-data-dir={}", profile.0.display()),
            ]}
        }}});
        let v = http_json(&addr, "POST", "/session", Some(&caps));
        let session = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_string();
        Browser {
            driver,
            addr,
            session,
            _profile: profile,
        }
    }

    fn cmd(&self, method: &str, what: &str, body: Option<&Value>) -> Value {
        let path = format!("/session/{}/{what}", self.session);
        http_json(&self.addr, method, &path, body)["value"].clone()
    }

    fn goto(&self, url: &str) {
        self.cmd("POST", "url", Some(&json!({ "url": url })));
    }

    /// [`Browser::goto`] `url`, and wait (20 s) until the page shows `n`
    /// nodes and follows the journal.
    fn open_live(&self, url: &str, n: usize) {
        self.goto(url);
        let ready = format!("return !!(window.roster && window.roster.n === {n} && document.getElementById('status').textContent === 'live')");
        self.wait_for(&ready, &json!(true), Duration::from_secs(20))
            .expect("page loaded and following the journal");
    }

    fn eval(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "execute/sync",
            Some(&json!({"script": script, "args": []})),
        )
    }

    fn screenshot_png(&self) -> Vec<u8> {
        let b64 = self.cmd("GET", "screenshot", None);
        base64_decode(b64.as_str().expect("screenshot"))
    }

    /// Poll `script` until it returns `want` or `limit` passes.
    fn wait_for(&self, script: &str, want: &Value, limit: Duration) -> Result<Duration, Value> {
        let start = Instant::now();
        loop {
            let v = self.eval(script);
            if &v == want {
                return Ok(start.elapsed());
            }
            if start.elapsed() > limit {
                return Err(v);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(|| {
            http_json(
                &self.addr,
                "DELETE",
                &format!("/session/{}", self.session),
                None,
            )
        });
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => 0,
        }
    };
    let bytes: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().filter(|&&c| c == b'=').count();
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= val(c) << (18 - 6 * i);
        }
        let b = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&b[..3 - pad]);
    }
    out
}

/// Are chromium and chromedriver installed?  (If not, skip loudly.)
fn have_chromium() -> bool {
    need("chromium", "chromium chromium-driver") && need("chromedriver", "chromium chromium-driver")
}

#[test]
fn a_drain_shows_in_the_browser_within_a_second() {
    if !have_chromium() {
        return;
    }
    let s = Scratch::new("webview");
    let (d, addr) = start_with_tcp(&s, &fake_config(16, ""), &[]);
    let b = Browser::start(1000, 800);
    // the owner's page: the token in the fragment, the journal followed
    b.open_live(&format!("http://{addr}/#token=s3cret"), 16);
    let state5 = "return window.roster.state ? null : (function(){ return window.roster.drained[5] ? 'drained' : 'other'; })()";
    assert_eq!(b.eval(state5), json!("other"));
    assert_eq!(
        b.eval("return document.querySelector('[data-state=offline] b').textContent"),
        json!("16")
    );
    d.ok(&["drain", "5", "web test"]);
    let took = b
        .wait_for(state5, &json!("drained"), Duration::from_secs(1))
        .unwrap_or_else(|v| panic!("cell 5 not drained within 1 s: {v}"));
    eprintln!("drain seen by the browser after {took:?}");
    // the canvas pixel of cell 5 is the drained colour (Okabe-Ito vermillion)
    let pixel = "const S = window.roster; const c = document.getElementById('grid').getContext('2d');\
                 const p = c.getImageData((5 % S.cols) * S.cell + 1, Math.floor(5 / S.cols) * S.cell + 1, 1, 1).data;\
                 return [p[0], p[1], p[2]];";
    b.wait_for(pixel, &json!([0xd5, 0x5e, 0x00]), Duration::from_secs(1))
        .unwrap_or_else(|v| panic!("canvas pixel of cell 5: {v}"));
    assert_eq!(
        b.eval("return document.querySelector('[data-state=drained-offline] b').textContent"),
        json!("1"),
        "drained and offline (no agent) is its own state"
    );
    assert!(b
        .eval("return document.getElementById('events').textContent")
        .as_str()
        .unwrap()
        .contains("web test"));
    // the token left the address bar
    assert_eq!(
        b.eval("return location.hash"),
        json!(""),
        "the token must not stay in the URL"
    );

    // a guest's page (no token): no journal, the status polled instead
    b.eval("sessionStorage.clear(); return null");
    b.goto(&format!("http://{addr}/"));
    let polling =
        "return !!(window.roster && window.roster.n === 16 && window.roster.polling === true)";
    b.wait_for(polling, &json!(true), Duration::from_secs(20))
        .expect("guest page polling the status");
    let state6 = "return window.roster.drained[6] ? 'drained' : 'other'";
    assert_eq!(b.eval(state6), json!("other"));
    d.ok(&["drain", "6", "guest view"]);
    let took = b
        .wait_for(state6, &json!("drained"), Duration::from_secs(3))
        .unwrap_or_else(|v| panic!("cell 6 not drained within 3 s on the guest page: {v}"));
    eprintln!("drain seen by the guest page after {took:?}");
}

/// A raw GET over TCP with optional headers: (status, the body's first
/// line), without waiting for a stream to end.
fn get_first_line(addr: &str, path: &str, headers: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}\r\n").unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let status = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap();
            // chunked or not: the first line holding a JSON object
            if let Some(line) = body.lines().find(|l| l.starts_with('{')) {
                return (status, line.to_string());
            }
        }
        let n = s.read(&mut chunk).expect("read");
        assert!(n > 0, "connection closed: {text}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The web routes run with the caller's role: a guest (no token) reads
/// the status but not the owner-only journal; the token makes an owner;
/// a wrong token is refused.
#[test]
fn web_routes_run_with_the_callers_role() {
    let s = Scratch::new("webroles");
    let (d, addr) = start_with_tcp(&s, &fake_config(4, ""), &[]);
    d.ok(&["drain", "2", "roles"]);
    let (status, line) = get_first_line(&addr, "/api/journal", "");
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        v["errnum"], 1,
        "a guest must not follow the journal: {line}"
    );
    let (status, line) = get_first_line(&addr, "/api/status", "");
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["drain"]["2"]["reason"], "roles", "{line}");
    let (status, line) = get_first_line(&addr, "/api/journal", "Authorization: Bearer s3cret\r\n");
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&line).unwrap();
    assert!(v["events"].is_array(), "{line}");
    let (status, _) = get_first_line(&addr, "/api/journal", "Authorization: Bearer nope\r\n");
    assert_eq!(status, 401);
    let (status, _) = get_first_line(&addr, "/metrics", "Authorization: Bearer nope\r\n");
    assert_eq!(status, 401);
    // the scheduler's view is a guest's read too, as over RPC
    d.rpc("resource.allocated-set", json!({"targets": "1"}))
        .unwrap();
    let (status, line) = get_first_line(&addr, "/api/sched-status", "");
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        v["allocated"]["execution"]["R_lite"][0]["rank"], "1",
        "{line}"
    );
    assert!(v["all"].is_object(), "{line}");
}

/// R16k with 30 % drained: first paint time, a screenshot under docs/.
/// `ROSTER_SCALE_TESTS=1` (bench/ sets it).
#[test]
fn r16k_first_paint_and_screenshot() {
    if std::env::var("ROSTER_SCALE_TESTS").is_err() {
        eprintln!("skipping: set ROSTER_SCALE_TESTS=1");
        return;
    }
    if !have_chromium() {
        return;
    }
    let s = Scratch::new("webview16k");
    let r = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/bench/R16k.json"
    );
    let config = format!("[resource]\nnoverify = true\npath = \"{r}\"\n");
    let (d, addr) = start_with_tcp(&s, &config, &[]);
    // the bench drain set: 4,915 ranks, drained in batches
    let ranks = std::process::Command::new("python3")
        .args([
            "-c",
            "import random; print(','.join(map(str, sorted(random.Random(42).sample(range(16384), 4915)))))",
        ])
        .output()
        .expect("python3");
    let ranks = String::from_utf8(ranks.stdout).unwrap();
    let ranks: Vec<&str> = ranks.trim().split(',').collect();
    for (i, chunk) in ranks.chunks(500).enumerate() {
        d.ok(&["drain", &chunk.join(","), &format!("reason-{}", i % 50)]);
    }
    let scrape_once = || {
        let mut s = TcpStream::connect(&addr).unwrap();
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        String::from_utf8_lossy(&buf).contains("roster_nodes{state=\"drained\"} 4915")
    };
    // node gauges follow within NODE_REFRESH (250 ms)
    let deadline = Instant::now() + Duration::from_secs(5);
    while !scrape_once() {
        assert!(
            Instant::now() < deadline,
            "metrics never showed 4915 drained"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let scrape = Instant::now();
    let n = 20;
    for _ in 0..n {
        assert!(scrape_once());
    }
    eprintln!("R16k /metrics scrape: {:?} each", scrape.elapsed() / n);
    let b = Browser::start(1400, 1000);
    b.goto(&format!("http://{addr}/#token=s3cret"));
    b.wait_for(
        "return !!(window.roster && window.roster.counts && window.roster.counts.drained === 4915)",
        &json!(true),
        Duration::from_secs(30),
    )
    .expect("R16k page with 4915 drained");
    let fp = b.eval("return window.roster.firstPaintMs");
    eprintln!("R16k first paint: {fp} ms after navigation start");
    let png = b.screenshot_png();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let out = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/webview-r16k.png");
    std::fs::create_dir_all(std::path::Path::new(out).parent().unwrap()).unwrap();
    std::fs::write(out, png).unwrap();
    assert!(fp.as_f64().unwrap() < 1000.0, "first paint {fp} ms");
}

/// Issue 28 item 3: `drain -f` keeps the drain time (overwrite 1) and
/// `drain -ff` moves it (overwrite 2), live and after a reload, as the
/// service's status says.
#[test]
fn forced_drains_keep_or_move_the_drain_time_as_the_service_does() {
    if !have_chromium() {
        return;
    }
    let s = Scratch::new("webview-force");
    let (d, addr) = start_with_tcp(&s, &fake_config(8, ""), &[]);
    let b = Browser::start(1000, 800);
    let url = format!("http://{addr}/#token=s3cret");
    b.open_live(&url, 8);
    let service_time = || {
        let st = d.status();
        st["drain"]["3"]["timestamp"].as_f64().unwrap() as i64
    };
    let page = "return window.roster.drained[3] ? [Math.round(window.roster.dtime[3]), window.roster.reason[3]] : null";
    d.ok(&["drain", "3", "first"]);
    let first = service_time();
    b.wait_for(page, &json!([first, "first"]), Duration::from_secs(3))
        .unwrap_or_else(|v| panic!("first drain: {v}"));
    std::thread::sleep(Duration::from_millis(1500));
    d.ok(&["drain", "-f", "3", "second"]);
    assert_eq!(service_time(), first, "drain -f keeps the time");
    b.wait_for(page, &json!([first, "second"]), Duration::from_secs(3))
        .unwrap_or_else(|v| panic!("after drain -f the page must keep {first}: {v}"));
    b.open_live(&url, 8);
    b.wait_for(page, &json!([first, "second"]), Duration::from_secs(3))
        .unwrap_or_else(|v| panic!("after a reload the page must keep {first}: {v}"));
    std::thread::sleep(Duration::from_millis(1500));
    d.ok(&["drain", "-ff", "3", "third"]);
    let third = service_time();
    assert!(third > first, "drain -ff moves the time");
    b.wait_for(page, &json!([third, "third"]), Duration::from_secs(3))
        .unwrap_or_else(|v| panic!("after drain -ff the page must show {third}: {v}"));
}

/// Issue 28 item 12: the filter (nodes, state, reason) lives in the
/// address, a click pins a node with its history, events name hosts,
/// drained+offline is not drained, and cells carry shapes.
#[test]
fn filter_in_the_url_pin_a_node_and_hosts_in_events() {
    if !have_chromium() {
        return;
    }
    let s = Scratch::new("webview-tool");
    let (d, addr) = start_with_tcp(&s, &fake_config(8, ""), &[]);
    d.ok(&["drain", "fake[2-3]", "fan"]);
    d.ok(&["drain", "fake5", "disk"]);
    let b = Browser::start(1000, 800);
    b.open_live(&format!("http://{addr}/?reason=fan#token=s3cret"), 8);
    let matching = "return document.getElementById('matching').textContent";
    b.wait_for(matching, &json!("matching: 2"), Duration::from_secs(3))
        .unwrap_or_else(|v| panic!("the reason filter from the URL: {v}"));
    assert_eq!(b.eval("return location.search"), json!("?reason=fan"));
    // a hostlist and a state, typed: the address follows
    let set = |id: &str, v: &str| {
        b.eval(&format!(
            "const e = document.getElementById('{id}'); e.value = {v:?}; \
             e.dispatchEvent(new Event('input')); return null"
        ));
    };
    set("f-reason", "");
    set("f-targets", "fake[0-5]");
    set("f-state", "drained-offline");
    b.wait_for(matching, &json!("matching: 3"), Duration::from_secs(3))
        .unwrap_or_else(|v| panic!("hostlist + state filter: {v}"));
    assert_eq!(
        b.eval("return location.search"),
        json!("?nodes=fake%5B0-5%5D&state=drained-offline")
    );
    set("f-targets", "4-7");
    set("f-state", "");
    b.wait_for(matching, &json!("matching: 4"), Duration::from_secs(3))
        .unwrap_or_else(|v| panic!("idset filter: {v}"));
    // a click pins node 5 with its history
    let click = "const S = window.roster; const c = document.getElementById('grid'); \
                 const b = c.getBoundingClientRect(); \
                 c.dispatchEvent(new MouseEvent('click', {clientX: b.left + (5 % S.cols) * S.cell + 2, \
                   clientY: b.top + Math.floor(5 / S.cols) * S.cell + 2})); return null";
    b.eval(click);
    let pin = b.eval("return document.getElementById('pin').textContent");
    let pin = pin.as_str().unwrap();
    assert!(pin.starts_with("fake5  rank 5\ndrained+offline"), "{pin}");
    assert!(pin.contains("reason: disk"), "{pin}");
    assert!(pin.contains(" drain disk"), "{pin}");
    assert!(!pin.contains("fan"), "{pin}");
    // the pinned node's history holds only its own events; events name hosts
    d.ok(&["drain", "7", "psu"]);
    b.wait_for(
        "return document.getElementById('pin').textContent.includes('psu')",
        &json!(false),
        Duration::from_secs(1),
    )
    .unwrap();
    let events = "return document.getElementById('events').textContent.includes('fake7 psu')";
    b.wait_for(events, &json!(true), Duration::from_secs(3))
        .unwrap_or_else(|v| panic!("host in events: {v}"));
    // every state has a shape in the legend
    let legend = b.eval("return document.getElementById('counts').textContent");
    for shape in ["■", "◆", "□", "◩", "✕"] {
        assert!(legend.as_str().unwrap().contains(shape), "{legend}");
    }
}

/// `allocated` (what a scheduler said with `resource.allocated-set`, read
/// from `/api/sched-status`) is a state of its own: its count, its colour
/// (Okabe-Ito reddish purple) with a white centre, the state filter; a
/// drained node stays drained; cleared, the node is up again.
#[test]
fn allocated_nodes_are_their_own_state() {
    if !have_chromium() {
        return;
    }
    let s = Scratch::new("webview-alloc");
    let (d, addr) = start_with_tcp(&s, &fake_config(8, ""), &["--monitor-force-up"]);
    d.rpc("resource.allocated-set", json!({"targets": "fake[2-3]"}))
        .unwrap();
    d.ok(&["drain", "3", "fan"]);
    let b = Browser::start(1000, 800);
    b.goto(&format!("http://{addr}/?state=allocated#token=s3cret"));
    let ready = "return !!(window.roster && window.roster.n === 8 && window.roster.schedReads > 0 \
                 && document.getElementById('status').textContent === 'live')";
    b.wait_for(ready, &json!(true), Duration::from_secs(20))
        .expect("page loaded, following the journal and the scheduler's view");
    let count = |state: &str| {
        format!("return document.querySelector('[data-state={state}] b').textContent")
    };
    b.wait_for(&count("allocated"), &json!("1"), Duration::from_secs(3))
        .unwrap_or_else(|v| panic!("allocated count: {v}"));
    assert_eq!(b.eval(&count("up")), json!("6"));
    assert_eq!(b.eval(&count("drained")), json!("1"));
    assert_eq!(
        b.eval("return document.getElementById('matching').textContent"),
        json!("matching: 1")
    );
    // the cell's corner is the allocated colour, its centre white
    let pixel = |dx: &str| {
        format!(
            "const S = window.roster; const c = document.getElementById('grid').getContext('2d');\
             const p = c.getImageData((2 % S.cols) * S.cell + {dx}, Math.floor(2 / S.cols) * S.cell + {dx}, 1, 1).data;\
             return [p[0], p[1], p[2]];"
        )
    };
    b.wait_for(
        &pixel("1"),
        &json!([0xcc, 0x79, 0xa7]),
        Duration::from_secs(2),
    )
    .unwrap_or_else(|v| panic!("corner of cell 2: {v}"));
    b.wait_for(
        &pixel("Math.floor(S.cell / 2)"),
        &json!([0xff, 0xff, 0xff]),
        Duration::from_secs(2),
    )
    .unwrap_or_else(|v| panic!("centre of cell 2: {v}"));
    let legend = b.eval("return document.getElementById('counts').textContent");
    assert!(
        legend.as_str().unwrap().contains("▣allocated: 1"),
        "{legend}"
    );
    let tip = b.eval("return describe(2)");
    assert!(
        tip.as_str()
            .unwrap()
            .starts_with("fake2  rank 2\nallocated"),
        "{tip}"
    );
    // the scheduler releases it: up again at the next read (every 2 s)
    d.rpc("resource.allocated-set", json!({"targets": ""}))
        .unwrap();
    b.wait_for(&count("allocated"), &json!("0"), Duration::from_secs(5))
        .unwrap_or_else(|v| panic!("allocated count after release: {v}"));
    assert_eq!(b.eval(&count("up")), json!("7"));
}
