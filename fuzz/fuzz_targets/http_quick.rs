//! The parser the Unix listener uses to answer one-shot reads at accept
//! (`transport::quick`), fed arbitrary bytes: never a panic, and a request
//! it takes is exactly the input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    transport::fuzzing::quick_parse(data);
});
