#![no_main]
//! Parse arbitrary text as a hostlist and exercise every operation on it.
//!
//! flux-core's decoder accepts some inputs whose hosts contain brackets or
//! separators (a `]` before any `[` swallows the rest of the string into one
//! host; text after the first `]` is a literal suffix). Those hosts cannot
//! round-trip through the string form in flux either, so the round-trip
//! assertion is limited to lists of plain hostnames.
use hostlist::Hostlist;
use libfuzzer_sys::fuzz_target;

/// A host that survives encode/decode unchanged in flux-core too: no
/// separators or brackets, short enough not to be truncated as a bare token,
/// and a numeric tail (if any) that fits in u64.
fn plain(h: &str) -> bool {
    if h.contains([',', '[', ']', ' ', '\t']) || h.len() > hostlist::MAX_BARE_TOKEN_BYTES {
        return false;
    }
    let digits = h.len() - h.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    digits == 0 || h[h.len() - digits..].parse::<u64>().is_ok()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(h) = Hostlist::decode(text) else { return };
    let enc = h.encode();
    let n = h.len();
    if n <= 4096 && h.iter().all(|x| plain(&x)) {
        let again = Hostlist::decode(&enc).expect("canonical encoding of plain hosts must parse");
        assert_eq!(again.len(), n);
        assert!(again.iter().eq(h.iter()));
    }
    if n > 0 {
        let last = h.nth(n - 1).expect("nth(len-1) exists");
        let _ = h.find(&last);
    }
    assert!(h.nth(n).is_none());
    if n <= 1 << 16 {
        let mut s = h.clone();
        s.sort();
        assert_eq!(s.len(), n);
        let mut u = h.clone();
        u.uniq();
        assert!(u.len() <= n);
    }
});
