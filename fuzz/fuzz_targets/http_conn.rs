//! The HTTP listener's connection handler fed a whole client byte stream
//! (requests, pipelining, chunked agent sessions, garbage) over an
//! in-memory duplex on a paused clock.  First byte: bit 0 = guest peer.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, stream)) = data.split_first() else {
        return;
    };
    transport::fuzzing::http_stream(stream, mode & 1 == 1);
});
