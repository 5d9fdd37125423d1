//! The Anthropic Messages stream decoder (SSE framing plus event decoding): any body, cut
//! anywhere, gives a complete reply or an error, never a panic, and the same reply wherever
//! it was cut.
#![no_main]

#[path = "common/sse.rs"]
mod sse;

use cadre_llm::fuzzing::WireFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sse::check(WireFormat::Anthropic, data));
