#![no_main]
//! Parse arbitrary text as a hostlist and exercise every operation on it.
use hostlist::Hostlist;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(h) = Hostlist::decode(text) else {
        return;
    };
    let enc = h.encode();
    let again = Hostlist::decode(&enc).expect("canonical encoding must parse");
    assert_eq!(again.len(), h.len());
    if h.len() <= 4096 {
        assert!(again.iter().eq(h.iter()));
    }
    let n = h.len();
    if n > 0 {
        let last = h.nth(n - 1).expect("nth(len-1) exists");
        assert!(h.find(&last).is_some());
    }
    assert!(h.nth(n).is_none());
});
