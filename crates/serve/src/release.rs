//! Giving the allocator's free memory back after a burst of requests.
//!
//! A burst (thousands of agents saying hello at once, each on an HTTP
//! connection with its buffers until its session is upgraded) leaves
//! the heap at its high-water mark: the buffers are freed, but the
//! allocator keeps the pages, scattered between the sessions that
//! stayed.  Measured (issue 27, 2,048 idle agents): of the daemon's
//! 12.7 MB growth, 4.5 MB was live heap.  The binary may give a hook
//! (glibc's `malloc_trim`) that returns free pages to the system; the
//! loop calls it once a burst of requests is over: after at least
//! [`MIN_REQUESTS`] requests, when none came for [`QUIET`].  Session
//! lines (steady heartbeats) do not count, so an idle service with
//! agents never calls it.

use std::time::{Duration, Instant};

/// Requests since the last release that make a burst.
pub const MIN_REQUESTS: usize = 64;
/// How long after the last request of a burst.
pub const QUIET: Duration = Duration::from_secs(1);

/// When to call the binary's hook (none: never).
#[derive(Debug, Default)]
pub struct Release {
    hook: Option<fn()>,
    requests: usize,
    last: Option<Instant>,
}

impl Release {
    pub fn new(hook: Option<fn()>) -> Release {
        Release {
            hook,
            ..Release::default()
        }
    }

    /// One more request taken from the listeners at `now`.
    pub fn request(&mut self, now: Instant) {
        if self.hook.is_some() {
            self.requests += 1;
            self.last = Some(now);
        }
    }

    /// When the hook is due, if a burst is waiting for it.
    pub fn due(&self) -> Option<Instant> {
        let last = self.last.filter(|_| self.requests >= MIN_REQUESTS)?;
        Some(last + QUIET)
    }

    /// Call the hook if it is due at `now`; whether it was called.
    pub fn run(&mut self, now: Instant) -> bool {
        match (self.hook, self.due()) {
            (Some(hook), Some(due)) if due <= now => {
                hook();
                self.requests = 0;
                self.last = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static CALLS: AtomicUsize = AtomicUsize::new(0);
    fn count() {
        CALLS.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn called_once_after_a_burst_is_quiet() {
        let t0 = Instant::now();
        let mut r = Release::new(Some(count));
        for _ in 0..MIN_REQUESTS - 1 {
            r.request(t0);
        }
        assert_eq!(r.due(), None, "too few requests for a burst");
        r.request(t0);
        assert_eq!(r.due(), Some(t0 + QUIET));
        assert!(!r.run(t0 + QUIET / 2), "not before the burst is quiet");
        assert!(r.run(t0 + QUIET));
        assert_eq!(CALLS.load(Ordering::SeqCst), 1);
        assert_eq!(r.due(), None, "once per burst");
        assert!(!r.run(t0 + 10 * QUIET));
    }

    #[test]
    fn without_a_hook_nothing_is_due() {
        let t0 = Instant::now();
        let mut r = Release::new(None);
        for _ in 0..10 * MIN_REQUESTS {
            r.request(t0);
        }
        assert_eq!(r.due(), None);
        assert!(!r.run(t0 + QUIET));
    }
}
