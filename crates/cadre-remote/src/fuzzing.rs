//! Entry point for the fuzz target of `cadre serve`'s JSON-RPC requests (cargo feature
//! `fuzzing`, which no shipped build enables): a body validated as the server validates it,
//! and answered with the envelope the server would send.

use crate::jsonrpc::{self, RpcId};
use serde_json::Value;

/// What the server makes of one request body.
#[derive(Debug)]
pub enum Outcome {
    /// A valid request.
    Request {
        /// The id's JSON text, `None` for a notification.
        id: Option<String>,
        /// The method as sent.
        method: String,
        /// The params (`{}` when absent).
        params: Value,
        /// The success envelope answering it with `null`, as sent on the wire.
        answer: String,
    },
    /// A refused body.
    Rejected {
        /// The id's JSON text the error answers, `None` for a notification (no answer).
        id: Option<String>,
        /// The JSON-RPC error code.
        code: i64,
        /// The error envelope, as sent on the wire.
        answer: String,
    },
}

/// Validate `body` as a JSON-RPC request and build the envelope that answers it.
pub fn parse_request(body: &[u8]) -> Result<Outcome, serde_json::Error> {
    Ok(match jsonrpc::parse_request(body) {
        Ok(req) => {
            let reply_id = req.id.clone().unwrap_or(RpcId::Null);
            Outcome::Request {
                id: req.id.as_ref().map(|i| i.as_json().to_string()),
                method: req.method,
                params: req.params,
                answer: serde_json::to_string(&jsonrpc::success(&reply_id, Value::Null))?,
            }
        }
        Err(rejected) => {
            let reply_id = rejected.id.clone().unwrap_or(RpcId::Null);
            Outcome::Rejected {
                id: rejected.id.as_ref().map(|i| i.as_json().to_string()),
                code: rejected.error.code,
                answer: serde_json::to_string(&jsonrpc::failure(&reply_id, &rejected.error))?,
            }
        }
    })
}
