//! `cadre serve`'s JSON-RPC request parser: any body gives a request or an error object,
//! never a panic; the answer is JSON-RPC 2.0 and carries the caller's id verbatim; a send's
//! params decode or are refused.
#![no_main]

use cadre_remote::fuzzing::{Outcome, parse_request};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let outcome = parse_request(data).unwrap_or_else(|e| panic!("answer not encodable: {e}"));
    let (id, answer) = match &outcome {
        Outcome::Request {
            id,
            method,
            params,
            answer,
        } => {
            assert!(params.is_object(), "params {params:?} is not an object");
            if matches!(
                method.as_str(),
                "SendMessage" | "message/send" | "SendStreamingMessage" | "message/stream"
            ) {
                let _ = cadre_remote::a2a::parse::send_params(params);
            }
            (id, answer)
        }
        Outcome::Rejected { id, code, answer } => {
            assert!((-32768..=-32000).contains(code), "code {code}");
            if serde_json::from_slice::<serde::de::IgnoredAny>(data).is_err() {
                assert_eq!(*code, -32700, "invalid JSON must be a parse error");
            }
            (id, answer)
        }
    };
    let id = id.as_deref().unwrap_or("null");
    let verbatim = format!("\"id\":{id}");
    assert!(
        answer.contains(&verbatim),
        "answer {answer} does not carry the id {id} verbatim"
    );
    // The id is the caller's text (a number past f64, say, stays as sent); the rest of the
    // answer must be JSON-RPC 2.0 that any JSON parser reads.
    let rest = answer.replacen(&verbatim, "\"id\":null", 1);
    let reply: Value = serde_json::from_str(&rest).unwrap_or_else(|e| panic!("{answer}: {e}"));
    assert_eq!(reply["jsonrpc"], "2.0");
});
