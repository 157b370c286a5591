//! systemd's readiness protocol (`sd_notify(3)`), without libsystemd: one
//! datagram per state change to the Unix socket named by `NOTIFY_SOCKET`
//! (a path, or `@name` for the abstract namespace).
//!
//! `roster serve` sends `READY=1` once the state is replayed and the
//! listeners are bound, `WATCHDOG=1` from the service loop every half
//! `WATCHDOG_USEC` when systemd asks for it, and `STOPPING=1` when it
//! starts shutting down.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::{Duration, Instant};

/// Where notifications go (nothing when not started by systemd).
#[derive(Debug)]
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
    last_ping: Instant,
}

fn address(name: &str) -> io::Result<SocketAddr> {
    if let Some(abs) = name.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        SocketAddr::from_abstract_name(abs.as_bytes())
    } else {
        SocketAddr::from_pathname(name)
    }
}

impl Notifier {
    /// From `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID`.  The
    /// variables are left in the environment (children never see them:
    /// the daemon starts none).
    pub fn from_env() -> Notifier {
        let socket = std::env::var("NOTIFY_SOCKET").ok();
        let usec = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|v| v.parse::<u64>().ok());
        let for_us = std::env::var("WATCHDOG_PID")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .is_none_or(|pid| pid == std::process::id());
        let watchdog = usec.filter(|&u| u > 0 && for_us).map(Duration::from_micros);
        Notifier::new(socket.as_deref(), watchdog)
    }

    /// Notify `socket` (None: a no-op notifier); ping every `watchdog / 2`.
    pub fn new(socket: Option<&str>, watchdog: Option<Duration>) -> Notifier {
        let target = socket.filter(|s| !s.is_empty()).and_then(|s| {
            let addr = address(s)
                .map_err(|e| tracing::warn!(socket = s, "NOTIFY_SOCKET unusable: {e}"))
                .ok()?;
            let sock = UnixDatagram::unbound()
                .map_err(|e| tracing::warn!("cannot open a notify socket: {e}"))
                .ok()?;
            Some((sock, addr))
        });
        Notifier {
            watchdog: watchdog.filter(|_| target.is_some()),
            target,
            last_ping: Instant::now(),
        }
    }

    /// Send one notification (`KEY=VALUE` lines); failures are logged,
    /// never fatal.
    pub fn send(&self, msg: &str) {
        if let Some((sock, addr)) = &self.target {
            if let Err(e) = sock.send_to_addr(msg.as_bytes(), addr) {
                tracing::warn!("sd_notify {msg:?}: {e}");
            }
        }
    }

    /// `WATCHDOG=1` if half the watchdog interval has passed since the
    /// last one.  Called from the service loop, so a stuck loop stops the
    /// pings and systemd restarts the daemon.
    pub fn watchdog(&mut self, now: Instant) {
        if let Some(every) = self.watchdog {
            if now.duration_since(self.last_ping) >= every / 2 {
                self.last_ping = now;
                self.send("WATCHDOG=1");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_arrive_in_order_on_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut n = Notifier::new(path.to_str(), Some(Duration::from_millis(2)));
        n.send("READY=1");
        n.watchdog(Instant::now() + Duration::from_secs(1));
        n.send("STOPPING=1");
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        for _ in 0..3 {
            let len = rx.recv(&mut buf).unwrap();
            got.push(String::from_utf8_lossy(&buf[..len]).to_string());
        }
        assert_eq!(got, ["READY=1", "WATCHDOG=1", "STOPPING=1"]);
    }

    #[test]
    fn abstract_socket_names_are_understood() {
        let name = format!("roster-notify-test-{}", std::process::id());
        use std::os::linux::net::SocketAddrExt;
        let rx = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
            .unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Notifier::new(Some(&format!("@{name}")), None).send("READY=1");
        let mut buf = [0u8; 64];
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1");
    }

    #[test]
    fn without_a_socket_nothing_happens() {
        let mut n = Notifier::new(None, Some(Duration::from_millis(1)));
        n.send("READY=1");
        n.watchdog(Instant::now() + Duration::from_secs(1));
        assert!(n.watchdog.is_none());
    }
}
