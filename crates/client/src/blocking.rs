//! Synchronous wrapper around [`crate::Client`] for callers without an
//! async runtime (the CLI).  Each client owns a current-thread tokio
//! runtime, created on first use.  Do not call these methods from inside
//! an async runtime (tokio refuses nested `block_on`).

use crate::ClientError;
use rpc::uri::Uri;
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use tokio::runtime::Runtime;

/// Methods of the blocking [`Client`]: its async client's method of the
/// same name and arguments, run to completion by `block` or, for a
/// stream, `block_stream`.
macro_rules! blocking {
    ($($how:ident $name:ident($($arg:ident: $ty:ty),*) -> $out:ty;)*) => {$(
        #[doc = concat!("See [`crate::Client::", stringify!($name), "`].")]
        pub fn $name(&self, $($arg: $ty),*) -> Result<$out, ClientError> {
            self.$how(self.inner.$name($($arg),*))
        }
    )*};
}

/// A blocking client of one Roster service; same methods as
/// [`crate::Client`].
#[derive(Debug)]
pub struct Client {
    inner: crate::Client,
    rt: OnceLock<Arc<Runtime>>,
}

impl Client {
    /// See [`crate::Client::new`].
    pub fn new(uri: Uri) -> Client {
        Client::from_async(crate::Client::new(uri))
    }

    /// See [`crate::Client::with_token`].
    pub fn with_token(self, token: String) -> Client {
        Client {
            inner: self.inner.with_token(token),
            rt: self.rt,
        }
    }

    /// See [`crate::Client::from_env`].
    pub fn from_env(
        explicit_uri: Option<&str>,
        token_file: Option<&Path>,
    ) -> Result<Client, ClientError> {
        crate::Client::from_env(explicit_uri, token_file).map(Client::from_async)
    }

    /// See [`crate::Client::from_env_tls`].
    pub fn from_env_tls(
        explicit_uri: Option<&str>,
        token_file: Option<&Path>,
        tls_files: crate::TlsFiles,
    ) -> Result<Client, ClientError> {
        crate::Client::from_env_tls(explicit_uri, token_file, tls_files).map(Client::from_async)
    }

    /// Wrap an async client.
    pub fn from_async(inner: crate::Client) -> Client {
        Client {
            inner,
            rt: OnceLock::new(),
        }
    }

    /// The async client inside.
    pub fn inner(&self) -> &crate::Client {
        &self.inner
    }

    /// The service URI.
    pub fn uri(&self) -> &Uri {
        self.inner.uri()
    }

    fn runtime(&self) -> Result<Arc<Runtime>, ClientError> {
        if let Some(rt) = self.rt.get() {
            return Ok(Arc::clone(rt));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ClientError::Io)?;
        // A concurrent first call may have won; use whichever is stored.
        let _ = self.rt.set(Arc::new(rt));
        self.rt
            .get()
            .map(Arc::clone)
            .ok_or_else(|| ClientError::Protocol("cannot set up the client runtime".into()))
    }

    fn block<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, ClientError>>,
    ) -> Result<T, ClientError> {
        self.runtime()?.block_on(f)
    }

    fn block_stream(
        &self,
        f: impl std::future::Future<Output = Result<crate::ReplyStream, ClientError>>,
    ) -> Result<ReplyStream, ClientError> {
        let rt = self.runtime()?;
        let inner = rt.block_on(f)?;
        Ok(ReplyStream { inner, rt })
    }

    blocking! {
        block rpc(topic: &str, payload: Value) -> Value;
        block_stream stream(topic: &str, payload: Value) -> ReplyStream;
        block status() -> Value;
        block sched_status() -> Value;
        block drain(targets: &str, reason: Option<&str>, mode: Option<&str>) -> ();
        block undrain(targets: &str, reason: Option<&str>, mode: Option<&str>) -> ();
        block reload(path: impl AsRef<Path>, xml: bool, force: bool) -> ();
        block expiration_update(expiration: f64) -> ();
        block get() -> Value;
        block_stream journal() -> ReplyStream;
        block_stream acquire(group: Option<&str>) -> ReplyStream;
        block release(group: &str, targets: &str) -> ();
        block group_set(group: &str, targets: &str) -> ();
        block monitor_force_up(ranks: &str) -> ();
        block monitor_force_down(ranks: &str) -> ();
        block acquire_mute() -> ();
    }

    /// See [`crate::Client::call`].
    pub fn call<C: rpc::catalog::Call>(
        &self,
        req: &C::Request,
    ) -> Result<C::Response, ClientError> {
        self.block(self.inner.call::<C>(req))
    }

    /// See [`crate::Client::open`].
    pub fn open<C: rpc::catalog::Call>(
        &self,
        req: &C::Request,
    ) -> Result<ReplyStream, ClientError> {
        self.block_stream(self.inner.open::<C>(req))
    }

    /// See [`crate::Client::follow_journal`].
    pub fn follow_journal(&self) -> Result<JournalFollower, ClientError> {
        let rt = self.runtime()?;
        let inner = rt.block_on(self.inner.follow_journal())?;
        Ok(JournalFollower { inner, rt })
    }

    /// See [`crate::Client::acquisition`].
    pub fn acquisition(&self, group: Option<&str>) -> Result<AcquireStream, ClientError> {
        let rt = self.runtime()?;
        let inner = rt.block_on(self.inner.acquisition(group))?;
        Ok(AcquireStream { inner, rt })
    }
}

/// A blocking [`crate::ReplyStream`]: an iterator over the payloads of a
/// streaming request.  Ends (`None`) after ENODATA or after yielding an
/// error.  Dropping it cancels the request.
#[derive(Debug)]
pub struct ReplyStream {
    inner: crate::ReplyStream,
    rt: Arc<Runtime>,
}

impl Iterator for ReplyStream {
    type Item = Result<Value, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.rt.block_on(self.inner.next())
    }
}

/// A blocking [`crate::AcquireStream`]: an iterator over the decoded
/// responses of an acquire, with the [`crate::Acquisition`] view they
/// maintain.  Dropping it cancels the acquire.
#[derive(Debug)]
pub struct AcquireStream {
    inner: crate::AcquireStream,
    rt: Arc<Runtime>,
}

impl AcquireStream {
    /// The scheduler's view so far.
    pub fn view(&self) -> &crate::Acquisition {
        self.inner.view()
    }

    /// See [`crate::AcquireStream::release`].
    pub fn release(&mut self, targets: &idset::IdSet) -> Result<(), ClientError> {
        self.rt.block_on(self.inner.release(targets))
    }
}

impl Iterator for AcquireStream {
    type Item = Result<crate::AcquireResponse, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.rt.block_on(self.inner.next())
    }
}

/// A resuming journal reader (see [`crate::journal`]); an iterator of
/// responses.
#[derive(Debug)]
pub struct JournalFollower {
    inner: crate::JournalFollower,
    rt: Arc<Runtime>,
}

impl JournalFollower {
    /// See [`crate::JournalFollower::position`].
    pub fn position(&self) -> Option<&rpc::msg::JournalPosition> {
        self.inner.position()
    }

    /// See [`crate::JournalFollower::resumes`].
    pub fn resumes(&self) -> u64 {
        self.inner.resumes()
    }

    /// See [`crate::JournalFollower::on_resume_wait`].
    pub fn on_resume_wait(self, notice: impl Fn(&str) + Send + Sync + 'static) -> JournalFollower {
        JournalFollower {
            inner: self.inner.on_resume_wait(notice),
            rt: self.rt,
        }
    }
}

impl Iterator for JournalFollower {
    type Item = Result<Value, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rt = Arc::clone(&self.rt);
        rt.block_on(self.inner.next())
    }
}
