//! Keeping secrets out of task records: header values are stored as references
//! (`Bearer ${TOKEN}`) or as `<redacted>`, and URLs lose their user info.

use std::collections::BTreeMap;

/// What a literal (non-reference) header value is stored as.
pub const REDACTED: &str = "<redacted>";

/// Headers as they may be stored: a value that refers to an environment variable with
/// `${NAME}` is kept as written (it is a reference, not the secret); any other value is a
/// literal that may be a secret and is replaced by [`REDACTED`].
pub fn redact_headers(headers: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(k, v)| {
            let stored = if has_env_reference(v) {
                v.clone()
            } else {
                REDACTED.to_string()
            };
            (k.clone(), stored)
        })
        .collect()
}

pub use cadre_types::env_ref::has_env_reference;

/// The URL with any `user:password@` replaced by `<redacted>@`; other URLs unchanged.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let authority_start = scheme_end + 3;
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    match authority.rfind('@') {
        Some(at) => format!(
            "{}{}@{}{}",
            &url[..authority_start],
            REDACTED,
            &authority[at + 1..],
            &rest[authority_len..]
        ),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_kept_literals_redacted() {
        let mut h = BTreeMap::new();
        h.insert("Authorization".into(), "Bearer ${TOKEN}".into());
        h.insert("X-Key".into(), "literal-secret".into());
        h.insert("X-Odd".into(), "${1BAD} and ${ unclosed".into());
        let r = redact_headers(&h);
        assert_eq!(r["Authorization"], "Bearer ${TOKEN}");
        assert_eq!(r["X-Key"], REDACTED);
        assert_eq!(r["X-Odd"], REDACTED);
    }

    #[test]
    fn urls_lose_user_info() {
        assert_eq!(
            redact_url("postgres://u:pw@db:5432/x?a=b@c"),
            "postgres://<redacted>@db:5432/x?a=b@c"
        );
        assert_eq!(redact_url("https://h/p"), "https://h/p");
        assert_eq!(redact_url("local"), "local");
    }
}
