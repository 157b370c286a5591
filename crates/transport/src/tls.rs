//! TLS on TCP listeners (`tls://HOST:PORT`): the handshake of an accepted
//! connection and who the client is.
//!
//! The service presents its certificate; with a client CA configured it
//! asks for (but does not require) a client certificate, which rustls
//! verifies against that CA (chain, validity period, key usage).  A
//! verified certificate's role comes from the listener's
//! [`tls::RoleMap`]; a client without one (or whose certificate maps to
//! no role) must present a bearer token, which the encryption keeps off
//! the wire.

use crate::http::Peer;
use std::net::SocketAddr;
use std::sync::Arc;

/// A TLS listener's settings.
#[derive(Clone)]
pub struct TlsListen {
    /// The service's certificate and key, and the client CA if any
    /// ([`tls::server_config`]).
    pub config: Arc<tls::rustls::ServerConfig>,
    /// Whether client certificates are verified (a client CA is
    /// configured); without it every TLS client needs a token.
    pub client_auth: bool,
    /// From a client certificate to a role.
    pub roles: tls::RoleMap,
}

impl std::fmt::Debug for TlsListen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListen")
            .field("client_auth", &self.client_auth)
            .field("roles", &self.roles)
            .finish_non_exhaustive()
    }
}

impl PartialEq for TlsListen {
    fn eq(&self, o: &TlsListen) -> bool {
        Arc::ptr_eq(&self.config, &o.config)
            && self.client_auth == o.client_auth
            && self.roles == o.roles
    }
}

impl Eq for TlsListen {}

/// Who a TLS client proved to be with its certificate.
#[derive(Debug)]
pub(crate) struct CertPeer {
    pub(crate) name: String,
    /// `None`: the certificate maps to no role (a token is needed).
    pub(crate) role: Option<rpc::Role>,
}

/// Complete the handshake of an accepted TCP connection and read the
/// client's certificate.  Failures (a wrong CA, an expired certificate,
/// a client that is not speaking TLS, one that is not done by `deadline`:
/// `auth-timeout` from its accept) are logged with the peer address.
pub(crate) async fn accept(
    acceptor: &tls::TlsAcceptor,
    roles: &tls::RoleMap,
    tcp: tokio::net::TcpStream,
    addr: SocketAddr,
    deadline: Option<tokio::time::Instant>,
) -> Option<(tls::server::TlsStream<tokio::net::TcpStream>, Peer)> {
    let handshake = acceptor.accept(tcp);
    let done = match deadline {
        Some(d) => tokio::time::timeout_at(d, handshake).await,
        None => Ok(handshake.await),
    };
    let stream = match done {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::warn!(peer = %addr, "TLS handshake failed: {e}");
            return None;
        }
        Err(_) => {
            tracing::debug!(peer = %addr, "TLS handshake not done in time (auth-timeout)");
            return None;
        }
    };
    let cert = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|der| match tls::PeerCert::parse(der) {
            Some(pc) => {
                let role = roles.role_of(&pc);
                tracing::debug!(peer = %addr, name = %pc.name, ?role, "TLS client certificate");
                CertPeer {
                    name: pc.name,
                    role,
                }
            }
            None => CertPeer {
                name: String::from("(a certificate without a name)"),
                role: None,
            },
        });
    let sni = stream.get_ref().1.server_name().map(Arc::from);
    let local = stream.get_ref().0.local_addr().ok();
    let peer = Peer::Tls {
        cert: cert.map(Arc::new),
        sni,
        local,
    };
    Some((stream, peer))
}
