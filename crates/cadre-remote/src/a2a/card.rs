//! The agent card (`GET /.well-known/agent-card.json`): building cadre's own, and reading a
//! remote one to learn where its JSON-RPC endpoint is, which protocol version it speaks and
//! whether it streams.
//!
//! cadre's card comes in two shapes. The v1.0 card (the default) validates against the v1.0
//! schema: endpoints only in `supportedInterfaces`, the bearer scheme only in the wrapped
//! form. The v0.3 card, for clients that read only the old shape (the 0.3 SDKs need a
//! top-level `url`), has `url`, `preferredTransport`, `protocolVersion` and `security`.

use super::Version;
use serde_json::{Value, json};

/// Path of the agent card.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// The media types a served agent takes in message parts (text parts are `text/plain`, data
/// parts `application/json`); other `text/*` types are read as text too.
pub const INPUT_MODES: [&str; 2] = ["text/plain", "application/json"];

/// The media types of what a served agent answers.
pub const OUTPUT_MODES: [&str; 1] = ["text/plain"];

/// One agent offered as a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillInfo {
    /// The agent's name (the skill id).
    pub name: String,
    /// What it does.
    pub description: String,
}

/// What goes into cadre's card.
#[derive(Debug, Clone)]
pub struct CardSpec<'a> {
    /// Server name.
    pub name: &'a str,
    /// What the server offers.
    pub description: &'a str,
    /// cadre's version.
    pub version: &'a str,
    /// The JSON-RPC endpoint, absolute (`http://host:port/`).
    pub endpoint: &'a str,
    /// The exposed agents.
    pub skills: &'a [SkillInfo],
    /// Whether requests need a bearer token.
    pub bearer: bool,
}

/// Build cadre's agent card in the shape of `version`.
pub fn build(spec: &CardSpec<'_>, version: Version) -> Value {
    let skills: Vec<Value> = spec
        .skills
        .iter()
        .map(|s| {
            json!({
                "id": s.name,
                "name": s.name,
                "description": s.description,
                "tags": ["cadre", "agent"],
                "inputModes": INPUT_MODES,
                "outputModes": OUTPUT_MODES,
            })
        })
        .collect();
    let mut card = json!({
        "name": spec.name,
        "description": spec.description,
        "version": spec.version,
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": INPUT_MODES,
        "defaultOutputModes": OUTPUT_MODES,
        "skills": skills,
    });
    let Some(obj) = card.as_object_mut() else {
        return card;
    };
    match version {
        Version::V1 => {
            obj.insert(
                "supportedInterfaces".into(),
                json!([
                    {"url": spec.endpoint, "protocolBinding": "JSONRPC", "protocolVersion": Version::V1.as_str()},
                    {"url": spec.endpoint, "protocolBinding": "JSONRPC", "protocolVersion": Version::V03.as_str()},
                ]),
            );
            if spec.bearer {
                obj.insert(
                    "securitySchemes".into(),
                    json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}),
                );
                obj.insert(
                    "securityRequirements".into(),
                    json!([{"schemes": {"bearer": {"list": []}}}]),
                );
            }
        }
        Version::V03 => {
            obj.insert("url".into(), json!(spec.endpoint));
            obj.insert("preferredTransport".into(), json!("JSONRPC"));
            obj.insert("protocolVersion".into(), json!(Version::V03.as_str()));
            if spec.bearer {
                obj.insert(
                    "securitySchemes".into(),
                    json!({"bearer": {"type": "http", "scheme": "bearer"}}),
                );
                obj.insert("security".into(), json!([{"bearer": []}]));
            }
        }
    }
    card
}

/// What a client needs to know from a remote card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardInfo {
    /// The JSON-RPC endpoint to post to.
    pub endpoint: String,
    /// The protocol version to speak.
    pub version: Version,
    /// Whether the agent streams (`capabilities.streaming`).
    pub streaming: bool,
}

fn resolve(url: &str, base: &str) -> String {
    if url.starts_with("http://") || url.starts_with("https://") {
        url.to_string()
    } else {
        format!(
            "{}/{}",
            base.trim_end_matches('/'),
            url.trim_start_matches('/')
        )
    }
}

fn is_jsonrpc(binding: Option<&str>) -> bool {
    binding.is_none_or(|b| b.eq_ignore_ascii_case("JSONRPC"))
}

/// Read a remote card. `None` when it offers no JSON-RPC endpoint of a supported version.
pub fn discover(card: &Value, base: &str) -> Option<CardInfo> {
    let streaming = card
        .get("capabilities")
        .and_then(|c| c.get("streaming"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let mut candidates: Vec<(String, Version)> = Vec::new();
    if let Some(list) = card.get("supportedInterfaces").and_then(Value::as_array) {
        for i in list {
            let binding = i.get("protocolBinding").and_then(Value::as_str);
            let Some(url) = str_of(i, "url") else {
                continue;
            };
            if !is_jsonrpc(Some(binding.unwrap_or(""))) {
                continue;
            }
            // An interface without a version speaks the current one (as the SDKs read it).
            let version = match i.get("protocolVersion").and_then(Value::as_str) {
                Some(v) if !v.is_empty() => Version::parse(v),
                _ => Some(Version::V1),
            };
            if let Some(v) = version {
                candidates.push((resolve(&url, base), v));
            }
        }
    } else if let Some(url) = str_of(card, "url") {
        // An old-style card: one endpoint, version 0.3 unless it says otherwise.
        let version = card
            .get("protocolVersion")
            .and_then(Value::as_str)
            .map_or(Some(Version::V03), Version::parse);
        let binding = card.get("preferredTransport").and_then(Value::as_str);
        if let Some(v) = version
            && is_jsonrpc(binding)
        {
            candidates.push((resolve(&url, base), v));
        }
        for i in card
            .get("additionalInterfaces")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let (Some(u), Some(v)) = (str_of(i, "url"), version)
                && is_jsonrpc(i.get("transport").and_then(Value::as_str))
            {
                candidates.push((resolve(&u, base), v));
            }
        }
    }
    let best = candidates
        .iter()
        .find(|(_, v)| *v == Version::V1)
        .or_else(|| candidates.first())?;
    Some(CardInfo {
        endpoint: best.0.clone(),
        version: best.1,
        streaming,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(skills: &[SkillInfo]) -> CardSpec<'_> {
        CardSpec {
            name: "cadre",
            description: "d",
            version: "0.1.0",
            endpoint: "http://127.0.0.1:9/",
            skills,
            bearer: true,
        }
    }

    #[test]
    fn our_card_is_discovered_as_v1_streaming() {
        let skills = [SkillInfo {
            name: "echo".into(),
            description: "Echoes".into(),
        }];
        let card = build(&spec(&skills), Version::V1);
        for old in ["url", "preferredTransport", "protocolVersion", "security"] {
            assert!(card.get(old).is_none(), "{old} is not a v1.0 card field");
        }
        assert_eq!(
            card["securitySchemes"]["bearer"],
            json!({"httpAuthSecurityScheme": {"scheme": "Bearer"}})
        );
        assert_eq!(card["skills"][0]["id"], "echo");
        assert_eq!(
            card["securityRequirements"][0]["schemes"]["bearer"]["list"],
            json!([])
        );
        let info = discover(&card, "http://127.0.0.1:9").unwrap();
        assert_eq!(info.version, Version::V1);
        assert!(info.streaming);
        assert_eq!(info.endpoint, "http://127.0.0.1:9/");
    }

    #[test]
    fn the_v03_card_has_the_old_shape_and_is_discovered_as_v03() {
        let card = build(&spec(&[]), Version::V03);
        assert_eq!(card["url"], "http://127.0.0.1:9/");
        assert_eq!(card["preferredTransport"], "JSONRPC");
        assert_eq!(card["protocolVersion"], "0.3.0");
        assert_eq!(card["security"], json!([{"bearer": []}]));
        assert_eq!(
            card["securitySchemes"]["bearer"],
            json!({"type": "http", "scheme": "bearer"})
        );
        assert!(card.get("supportedInterfaces").is_none());
        assert_eq!(
            discover(&card, "http://127.0.0.1:9").unwrap().version,
            Version::V03
        );
    }

    #[test]
    fn old_and_foreign_cards() {
        let old = json!({"url": "/rpc", "capabilities": {}});
        let info = discover(&old, "http://h:1/").unwrap();
        assert_eq!(info.version, Version::V03);
        assert_eq!(info.endpoint, "http://h:1/rpc");
        assert!(!info.streaming);
        let rest_only =
            json!({"supportedInterfaces": [{"url": "http://h/", "protocolBinding": "HTTP+JSON"}]});
        assert_eq!(discover(&rest_only, "http://h"), None);
        let no_version =
            json!({"supportedInterfaces": [{"url": "http://h/a", "protocolBinding": "JSONRPC"}]});
        assert_eq!(
            discover(&no_version, "http://h").unwrap().version,
            Version::V1
        );
        let old03 = json!({"supportedInterfaces": [{"url": "http://h/a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}]});
        assert_eq!(discover(&old03, "http://h").unwrap().version, Version::V03);
        assert_eq!(discover(&json!({"name": "x"}), "http://h"), None);
    }
}
