//! A real 3-member etcd cluster on 127.0.0.1 (distinct free ports), in a
//! temporary directory, killed and removed on drop.
//!
//! Needs Debian's `etcd-server` (`/usr/bin/etcd`): without it [`cluster`]
//! returns `None` after a loud message, unless `CI=true`, where it panics.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct EtcdCluster {
    pub dir: PathBuf,
    members: Vec<Option<Child>>,
    pub client_urls: Vec<String>,
    /// With TLS on the client URLs: the CA, and a client certificate and
    /// key it signed (etcd requires one: `--client-cert-auth`).
    pub tls: Option<TlsFiles>,
}

#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// The client certificate and key, as [`ha::Settings::identity`].
    pub fn identity(&self) -> (PathBuf, PathBuf) {
        (self.cert.clone(), self.key.clone())
    }
}

fn etcd_binary() -> Option<PathBuf> {
    let from_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("etcd"))
            .find(|f| f.is_file())
    });
    from_path.or_else(|| {
        let p = PathBuf::from("/usr/bin/etcd");
        p.is_file().then_some(p)
    })
}

/// Free loopback ports (bound then released; etcd binds them right after).
fn free_ports(n: usize) -> Vec<u16> {
    let socks: Vec<_> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port"))
        .collect();
    socks
        .iter()
        .map(|s| s.local_addr().expect("local addr").port())
        .collect()
}

/// Start the cluster, or `None` (skipped) when etcd is not installed and
/// `CI` is not `true`.
pub fn cluster(name: &str) -> Option<EtcdCluster> {
    cluster_with(name, false)
}

/// [`cluster`] serving clients over TLS only, with client certificate
/// authentication: a CA, the members' certificate (127.0.0.1) and a
/// client certificate are made in its directory (`tls::ca`, rcgen).
pub fn cluster_tls(name: &str) -> Option<EtcdCluster> {
    cluster_with(name, true)
}

fn cluster_with(name: &str, with_tls: bool) -> Option<EtcdCluster> {
    let Some(etcd) = etcd_binary() else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("etcd not found: CI must install Debian's etcd-server (apt-get install etcd-server)");
        }
        eprintln!(
            "\n*** SKIPPED {name}: etcd not found (apt-get install etcd-server); set CI=true to make this a failure ***\n"
        );
        return None;
    };
    let dir = super::unique_temp_dir(&format!("roster-etcd-{name}"));
    std::fs::create_dir_all(&dir).expect("etcd temp dir");
    let ports = free_ports(6);
    let scheme = if with_tls { "https" } else { "http" };
    let client_urls: Vec<String> = (0..3)
        .map(|i| format!("{scheme}://127.0.0.1:{}", ports[i]))
        .collect();
    let tls = with_tls.then(|| {
        let ca_dir = dir.join("ca");
        tls::ca::init(&ca_dir, "etcd test CA", 2).expect("test CA");
        let out = dir.join("certs");
        let server = tls::ca::issue(
            &ca_dir,
            &out,
            &["127.0.0.1".to_string()],
            "owner",
            &["localhost".to_string()],
            2,
        )
        .expect("etcd member certificate");
        let client = tls::ca::issue(&ca_dir, &out, &["roster".to_string()], "owner", &[], 2)
            .expect("client certificate");
        (
            server[0].clone(),
            TlsFiles {
                ca: ca_dir.join(tls::ca::CA_CERT),
                cert: client[0].cert.clone(),
                key: client[0].key.clone(),
            },
        )
    });
    let peer_urls: Vec<String> = (0..3)
        .map(|i| format!("http://127.0.0.1:{}", ports[3 + i]))
        .collect();
    let initial: Vec<String> = (0..3).map(|i| format!("m{i}={}", peer_urls[i])).collect();
    let initial = initial.join(",");
    let mut members = Vec::new();
    for i in 0..3 {
        let log = std::fs::File::create(dir.join(format!("m{i}.log"))).expect("etcd log");
        let mut cmd = Command::new(&etcd);
        if let Some((server, files)) = &tls {
            cmd.arg("--cert-file")
                .arg(&server.cert)
                .arg("--key-file")
                .arg(&server.key)
                .arg("--trusted-ca-file")
                .arg(&files.ca)
                .arg("--client-cert-auth");
        }
        let child = cmd
            .arg("--name")
            .arg(format!("m{i}"))
            .arg("--data-dir")
            .arg(dir.join(format!("m{i}.data")))
            .arg("--listen-client-urls")
            .arg(&client_urls[i])
            .arg("--advertise-client-urls")
            .arg(&client_urls[i])
            .arg("--listen-peer-urls")
            .arg(&peer_urls[i])
            .arg("--initial-advertise-peer-urls")
            .arg(&peer_urls[i])
            .arg("--initial-cluster")
            .arg(&initial)
            .arg("--initial-cluster-state")
            .arg("new")
            .arg("--initial-cluster-token")
            .arg(format!("roster-test-{}", std::process::id()))
            .env("ETCD_UNSUPPORTED_ARCH", std::env::consts::ARCH)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn etcd");
        members.push(Some(child));
    }
    let c = EtcdCluster {
        dir,
        members,
        client_urls,
        tls: tls.map(|(_, files)| files),
    };
    c.wait_healthy();
    Some(c)
}

impl EtcdCluster {
    /// The `etcd-endpoints` value for a roster configuration.
    pub fn endpoints_toml(&self) -> String {
        let quoted: Vec<String> = self
            .client_urls
            .iter()
            .map(|u| format!("\"{u}\""))
            .collect();
        format!("[{}]", quoted.join(", "))
    }

    /// The `[serve]` keys of roster's etcd TLS options (empty without
    /// TLS).
    pub fn tls_toml(&self) -> String {
        match &self.tls {
            Some(t) => format!(
                "etcd-ca = \"{}\"\netcd-cert = \"{}\"\netcd-key = \"{}\"\n",
                t.ca.display(),
                t.cert.display(),
                t.key.display()
            ),
            None => String::new(),
        }
    }

    /// A client of the cluster (to inspect what roster wrote).
    pub fn client(&self, prefix: &str) -> ha::Etcd {
        self.client_with(prefix, self.tls.clone())
    }

    /// A client with the given TLS files (or none).
    pub fn client_with(&self, prefix: &str, tls: Option<TlsFiles>) -> ha::Etcd {
        let ca = self.tls.as_ref().map(|t| t.ca.clone());
        ha::Etcd::connect(ha::Settings {
            endpoints: self.client_urls.clone(),
            prefix: prefix.to_string(),
            ca: tls.as_ref().map(|t| t.ca.clone()).or(ca),
            identity: tls.as_ref().map(TlsFiles::identity),
            lease_ttl: Duration::from_secs(2),
            timeout: Duration::from_secs(2),
        })
        .expect("etcd client")
    }

    fn wait_healthy(&self) {
        let c = self.client("/health-check");
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if c.dump().is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "etcd cluster did not become healthy; logs in {}",
            self.dir.display()
        );
    }

    /// Which member is etcd's raft leader.
    pub fn raft_leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            for (i, url) in self.client_urls.iter().enumerate() {
                let c = ha::Etcd::connect(ha::Settings {
                    endpoints: vec![url.clone()],
                    prefix: "/status".into(),
                    ca: self.tls.as_ref().map(|t| t.ca.clone()),
                    identity: self.tls.as_ref().map(TlsFiles::identity),
                    lease_ttl: Duration::from_secs(2),
                    timeout: Duration::from_secs(1),
                });
                if let Ok(Ok((me, leader))) = c.map(|c| c.member_status()) {
                    if me == leader && me != 0 {
                        return i;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("no etcd raft leader");
    }

    /// SIGKILL member `i`.
    pub fn kill_member(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for m in self.members.iter_mut() {
            if let Some(mut c) = m.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
