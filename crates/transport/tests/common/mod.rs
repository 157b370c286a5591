//! What the transport's integration tests share: Flux messages encoded as
//! libflux does (RFC 3), independently of the server's codec.
#![allow(dead_code)]

/// The preamble's magic number, in host byte order.
pub const MAGIC: u32 = 0xffee_0012;

/// Append one frame: a 1-byte length, or 0xff and a 4-byte one.
pub fn put_frame(out: &mut Vec<u8>, data: &[u8]) {
    if data.len() < 255 {
        out.push(data.len() as u8);
    } else {
        out.push(0xff);
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    }
    out.extend_from_slice(data);
}

/// A request as libflux sends it: ROUTE with an empty stack, TOPIC, the
/// payload (NUL-terminated) if any, `extra_flags`; userid UNKNOWN,
/// rolemask 0.
pub fn flux_request_bytes(
    topic: &str,
    payload: Option<&[u8]>,
    extra_flags: u8,
    nodeid: u32,
    matchtag: u32,
) -> Vec<u8> {
    const F_TOPIC: u8 = 0x01;
    const F_PAYLOAD: u8 = 0x02;
    const F_ROUTE: u8 = 0x08;
    let mut body = Vec::new();
    put_frame(&mut body, b"");
    put_frame(&mut body, topic.as_bytes());
    let mut flags = F_ROUTE | F_TOPIC | extra_flags;
    if let Some(p) = payload {
        let mut p = p.to_vec();
        p.push(0);
        put_frame(&mut body, &p);
        flags |= F_PAYLOAD;
    }
    let mut proto = vec![0x8e, 1, 1, flags];
    for v in [u32::MAX, 0, nodeid, matchtag] {
        proto.extend_from_slice(&v.to_be_bytes());
    }
    put_frame(&mut body, &proto);
    let mut msg = MAGIC.to_ne_bytes().to_vec();
    msg.extend_from_slice(&(body.len() as u32).to_be_bytes());
    msg.extend_from_slice(&body);
    msg
}

/// What `rx` receives within 10 s (`what`: what the test waits for).
pub fn recv<T>(rx: &std::sync::mpsc::Receiver<T>, what: &str) -> T {
    let got = rx.recv_timeout(std::time::Duration::from_secs(10));
    got.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Stop a `Listeners::run` task and check that it ended cleanly (within 10 s).
pub async fn stop_listeners(
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), transport::TransportError>>,
) {
    let _ = stop.send(true);
    let r = tokio::time::timeout(std::time::Duration::from_secs(10), task)
        .await
        .expect("listeners stop");
    r.unwrap().unwrap();
}

/// `tls::ca::issue` in the CA directory `ca` of `names` with `role` and
/// the extra `sans`, valid 10 days.
pub fn issue(ca: &std::path::Path, names: &[&str], role: &str, sans: &[&str]) {
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    tls::ca::issue(ca, ca, &strings(names), role, &strings(sans), 10).unwrap();
}

/// A new temporary directory holding a CA named `name` in `ca/`; the
/// directory and the CA's path.
pub fn new_ca(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca");
    tls::ca::init(&ca, name, 10).unwrap();
    (dir, ca)
}
