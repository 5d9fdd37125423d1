//! What `web_fetch` does with a body: HTML becomes Markdown (scripts, styles and other
//! non-content elements dropped), JSON and other text passes through, binary types are refused.

/// How a body is turned into text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// HTML or XHTML: converted to Markdown.
    Html,
    /// JSON, XML, source text and other text types: passed through.
    Text,
    /// Anything else (images, archives, PDF, octet streams): refused.
    Binary,
}

/// Elements whose content is never page text.
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "head", "svg", "canvas", "iframe", "object", "embed",
];

/// The media type of a `Content-Type` value, lower-cased, without parameters.
pub fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The kind a declared media type says; `None` when the server declared none.
pub fn declared_kind(media: &str) -> Option<Kind> {
    if media.is_empty() {
        return None;
    }
    let (top, sub) = media.split_once('/').unwrap_or((media, ""));
    let kind = match (top, sub) {
        ("text", "html") | ("application", "xhtml+xml") => Kind::Html,
        ("text", _) => Kind::Text,
        (
            "application",
            "json" | "xml" | "javascript" | "x-javascript" | "ecmascript" | "yaml" | "x-yaml"
            | "toml" | "x-sh" | "sql" | "graphql" | "x-ndjson" | "ndjson",
        ) => Kind::Text,
        ("application", s) if s.ends_with("+json") || s.ends_with("+xml") => Kind::Text,
        _ => Kind::Binary,
    };
    Some(kind)
}

/// The kind of an undeclared body, from its first bytes.
pub fn sniffed_kind(body: &[u8]) -> Kind {
    let head = &body[..body.len().min(1024)];
    if head.contains(&0) || std::str::from_utf8(head).is_err_and(|e| e.error_len().is_some()) {
        return Kind::Binary;
    }
    let start = String::from_utf8_lossy(head)
        .trim_start()
        .to_ascii_lowercase();
    if start.starts_with("<!doctype html") || start.starts_with("<html") {
        Kind::Html
    } else {
        Kind::Text
    }
}

/// HTML as Markdown, without the content of scripts, styles and the like.
pub fn html_to_markdown(html: &str) -> Result<String, std::io::Error> {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED.to_vec())
        .build();
    converter.convert(html)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_decide_the_kind() {
        assert_eq!(media_type("Text/HTML; charset=utf-8"), "text/html");
        for (media, kind) in [
            ("text/html", Kind::Html),
            ("application/xhtml+xml", Kind::Html),
            ("text/plain", Kind::Text),
            ("text/markdown", Kind::Text),
            ("application/json", Kind::Text),
            ("application/problem+json", Kind::Text),
            ("application/atom+xml", Kind::Text),
            ("image/png", Kind::Binary),
            ("application/pdf", Kind::Binary),
            ("application/octet-stream", Kind::Binary),
            ("application/zip", Kind::Binary),
        ] {
            assert_eq!(declared_kind(media), Some(kind), "{media}");
        }
        assert_eq!(declared_kind(""), None);
        assert_eq!(sniffed_kind(b"<!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(sniffed_kind(b"plain words"), Kind::Text);
        assert_eq!(sniffed_kind(b"\x89PNG\r\n\x1a\n\0\0"), Kind::Binary);
        assert_eq!(sniffed_kind(&[0xff, 0xfe, 0xfd, 0x41]), Kind::Binary);
    }

    #[test]
    fn html_becomes_markdown_without_scripts_or_styles() {
        let md = html_to_markdown(
            "<html><head><title>T</title><style>body{color:red}</style></head><body>\
             <h1>Title</h1><p>Some <b>bold</b> text and <a href=\"/x\">a link</a>.</p>\
             <script>steal(document.cookie)</script><ul><li>one</li><li>two</li></ul>\
             </body></html>",
        )
        .unwrap();
        assert!(md.contains("# Title"), "{md}");
        assert!(md.contains("**bold**"), "{md}");
        assert!(md.contains("[a link](/x)"), "{md}");
        assert!(md.contains("one") && md.contains("two"), "{md}");
        for hidden in ["steal", "cookie", "color:red", "<script", "<p>"] {
            assert!(!md.contains(hidden), "{hidden} in {md}");
        }
    }
}
