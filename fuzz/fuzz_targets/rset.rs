#![no_main]
//! Parse arbitrary bytes as R (RFC 20) with small resource limits, then
//! exercise encoding and the set operations on what parsed.
use libfuzzer_sys::fuzz_target;
use rset::Rset;

const MAX_NODES: usize = 4096;
const MAX_ITEMS: u64 = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Ok(r) = Rset::from_json_bytes_limited(data, MAX_NODES, MAX_ITEMS) else {
        return;
    };
    // Encoding never panics and what we encode parses back to the same set.
    let enc = r.encode();
    let again = Rset::from_json_str(&enc).expect("encoded R must parse");
    assert_eq!(again.encode(), enc, "encode is not a fixed point");
    assert_eq!(again.ranks(), r.ranks());
    let _ = r.dumps();
    // Set algebra against itself and against a shifted copy.
    if let Ok(d) = r.diff(&r) {
        assert!(d.is_empty() || d.count("core") == 0, "R - R has cores");
    }
    let i = r.intersect(&r);
    assert_eq!(i.count("core"), r.count("core"));
    let mut m = r.clone();
    m.remap();
    assert_eq!(m.nnodes(), r.nnodes());
    let _ = r.union(&m);
    let _ = r.properties_encode();
});
