#![no_main]
//! Parse arbitrary text as an hwloc XML topology: errors, never panics.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = topo::from_hwloc_xml(text);
});
