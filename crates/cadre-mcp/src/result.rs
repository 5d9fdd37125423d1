//! Turning what an MCP server answers into what the model reads: text as is, resource links
//! and embedded resources as short references, structured content as JSON, and images and
//! audio as a note naming the file cadre saved them to (`.cadre/mcp-media/` in the
//! workspace). Images of the kinds every image-capable provider reads are also attached to
//! the result, for the providers that send them to the model.

use base64::Engine;
use cadre_tools::ToolOutput;
use cadre_types::Image;
use rmcp::model::{CallToolResult, RawContent, ResourceContents};
use std::path::Path;

/// Largest decoded image or audio file cadre saves.
pub const MAX_MEDIA_BYTES: usize = 20 << 20;

/// Largest decoded image attached to a result (Anthropic's limit per image).
pub const MAX_ATTACHED_IMAGE_BYTES: usize = 5 << 20;

/// Most images attached to one result; later ones are saved and named only.
pub const MAX_ATTACHED_IMAGES: usize = 8;

/// The image types attached: those both Anthropic and OpenAI accept.
const ATTACHABLE: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Where media of tool results are saved, relative to the workspace.
pub const MEDIA_DIR: &str = ".cadre/mcp-media";

fn extension(mime: &str) -> &str {
    match mime {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        _ => "bin",
    }
}

/// Decode base64 `data`, ignoring the line breaks some servers put in it.
fn decode(data: &str) -> Result<Vec<u8>, base64::DecodeError> {
    let clean: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD.decode(clean)
}

/// `data` as an image to attach, when it is of a type and size providers accept.
fn attachable(data: &str, mime: &str) -> Option<Image> {
    let mime = mime.to_ascii_lowercase().replace("image/jpg", "image/jpeg");
    if !ATTACHABLE.contains(&mime.as_str()) {
        return None;
    }
    let bytes = decode(data).ok()?;
    (bytes.len() <= MAX_ATTACHED_IMAGE_BYTES).then(|| Image {
        media_type: mime,
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
    })
}

/// Save base64 `data` as `<media>/<stem>.<ext>`; the note the model reads.
fn save_media(kind: &str, data: &str, mime: &str, media: &Path, stem: &str) -> String {
    let bytes = match decode(data) {
        Ok(b) => b,
        Err(e) => return format!("[{kind} {mime}: not valid base64 ({e}); not saved]"),
    };
    if bytes.len() > MAX_MEDIA_BYTES {
        return format!(
            "[{kind} {mime}, {} bytes: larger than {MAX_MEDIA_BYTES} bytes; not saved]",
            bytes.len()
        );
    }
    let file = media.join(format!("{stem}.{}", extension(mime)));
    let saved = std::fs::create_dir_all(media).and_then(|_| std::fs::write(&file, &bytes));
    match saved {
        Ok(()) => format!(
            "[{kind} {mime}, {} bytes, saved to {}]",
            bytes.len(),
            file.display()
        ),
        Err(e) => format!(
            "[{kind} {mime}, {} bytes: cannot save it: {e}]",
            bytes.len()
        ),
    }
}

fn embedded(resource: &ResourceContents, media: &Path, stem: &str) -> String {
    match resource {
        ResourceContents::TextResourceContents { uri, text, .. } => {
            format!("[resource {uri}]\n{text}")
        }
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => {
            let mime = mime_type.as_deref().unwrap_or("application/octet-stream");
            format!(
                "[resource {uri}] {}",
                save_media("blob", blob, mime, media, stem)
            )
        }
    }
}

/// The text of a resource read (`resources/read`), blobs saved like images.
pub fn render_contents(contents: &[ResourceContents], media: &Path, stem: &str) -> String {
    contents
        .iter()
        .enumerate()
        .map(|(i, c)| embedded(c, media, &format!("{stem}-{i}")))
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// True when the text blocks already say what the structured content says: servers should
/// repeat it as JSON text, and SDKs wrap a plain return value as `{"result": value}`.
fn repeats(structured: &serde_json::Value, texts: &[&str]) -> bool {
    if texts
        .iter()
        .any(|t| serde_json::from_str::<serde_json::Value>(t).ok().as_ref() == Some(structured))
    {
        return true;
    }
    match structured.as_object() {
        Some(o) if o.len() == 1 => o.values().next().is_some_and(|v| match v {
            serde_json::Value::String(s) => texts.concat() == *s,
            // A number or boolean is repeated as its JSON text (`42`, `true`).
            other => {
                let json = other.to_string();
                texts.concat() == json
            }
        }),
        _ => false,
    }
}

/// The model's view of a tool result: its text, whether it is an error and the images
/// attached. `media` is the folder images go to; `stem` names the files of this call.
pub fn render(result: &CallToolResult, media: &Path, stem: &str) -> ToolOutput {
    let mut images: Vec<Image> = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    let mut texts: Vec<&str> = Vec::new();
    for (i, c) in result.content.iter().enumerate() {
        let stem = format!("{stem}-{i}");
        match &c.raw {
            RawContent::Text(t) => {
                texts.push(&t.text);
                parts.push(t.text.clone());
            }
            RawContent::Image(img) => {
                parts.push(save_media("image", &img.data, &img.mime_type, media, &stem));
                if images.len() < MAX_ATTACHED_IMAGES
                    && let Some(image) = attachable(&img.data, &img.mime_type)
                {
                    images.push(image);
                }
            }
            RawContent::Audio(a) => {
                parts.push(save_media("audio", &a.data, &a.mime_type, media, &stem))
            }
            RawContent::Resource(r) => parts.push(embedded(&r.resource, media, &stem)),
            RawContent::ResourceLink(link) => {
                let mut line = format!("[resource link {} ({})", link.uri, link.name);
                if let Some(m) = &link.mime_type {
                    line.push_str(&format!(", {m}"));
                }
                line.push(']');
                if let Some(d) = &link.description {
                    line.push_str(&format!(" {d}"));
                }
                parts.push(line);
            }
        }
    }
    if let Some(structured) = &result.structured_content
        && !repeats(structured, &texts)
    {
        let json = serde_json::to_string_pretty(structured).unwrap_or_default();
        parts.push(format!("structured content:\n{json}"));
    }
    let is_error = result.is_error.unwrap_or(false);
    let mut text = parts.join("\n\n");
    if text.is_empty() {
        text = if is_error {
            "the tool failed without saying why".into()
        } else {
            "(no output)".into()
        };
    }
    let mut out = if is_error {
        ToolOutput::error(text)
    } else {
        ToolOutput::ok(text)
    };
    out.images = images;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{Content, RawResource};

    #[test]
    fn text_images_links_and_structured_content() {
        let dir = tempfile::tempdir().unwrap();
        let png = base64::engine::general_purpose::STANDARD.encode([0x89, b'P', b'N', b'G']);
        let mut link = RawResource::new("file:///a.txt", "a");
        link.mime_type = Some("text/plain".into());
        let result = CallToolResult {
            content: vec![
                Content::text("hello"),
                Content::image(png, "image/png"),
                Content::resource_link(link),
            ],
            structured_content: Some(serde_json::json!({"temperature": 21})),
            is_error: None,
            meta: None,
        };
        let out = render(&result, dir.path(), "c1");
        let text = out.content;
        assert!(!out.is_error);
        assert_eq!(
            out.images,
            vec![Image {
                media_type: "image/png".into(),
                data: "iVBORw==".into(),
            }]
        );
        assert!(
            text.starts_with("hello\n\n[image image/png, 4 bytes, saved to "),
            "{text}"
        );
        assert!(
            text.contains("[resource link file:///a.txt (a), text/plain]"),
            "{text}"
        );
        assert!(text.contains("\"temperature\": 21"), "{text}");
        assert_eq!(
            std::fs::read(dir.path().join("c1-1.png")).unwrap(),
            b"\x89PNG"
        );
    }

    #[test]
    fn structured_content_repeated_as_text_is_shown_once_and_errors_stay_errors() {
        let dir = tempfile::tempdir().unwrap();
        let result = CallToolResult {
            content: vec![Content::text("{\"a\": 1}")],
            structured_content: Some(serde_json::json!({"a": 1})),
            is_error: Some(true),
            meta: None,
        };
        let out = render(&result, dir.path(), "c");
        assert!(out.is_error);
        assert_eq!(out.content, "{\"a\": 1}");
        let wrapped = CallToolResult {
            content: vec![Content::text("hello x")],
            structured_content: Some(serde_json::json!({"result": "hello x"})),
            is_error: None,
            meta: None,
        };
        assert_eq!(render(&wrapped, dir.path(), "c").content, "hello x");
    }

    #[test]
    fn only_images_providers_read_are_attached_and_within_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![7u8; n]);
        let mut content = vec![
            // Line breaks inside the base64 are dropped; the kind is normalised.
            Content::image("iVBO\nRw==", "image/jpg"),
            Content::image(b64(4), "image/svg+xml"),
            Content::image(b64(MAX_ATTACHED_IMAGE_BYTES + 1), "image/png"),
            Content::image("not base64!", "image/png"),
        ];
        content.extend((0..MAX_ATTACHED_IMAGES + 2).map(|_| Content::image(b64(3), "image/gif")));
        let result = CallToolResult {
            content,
            structured_content: None,
            is_error: None,
            meta: None,
        };
        let out = render(&result, dir.path(), "c");
        assert_eq!(out.images.len(), MAX_ATTACHED_IMAGES);
        assert_eq!(out.images[0].media_type, "image/jpeg");
        assert_eq!(out.images[0].data, "iVBORw==");
        assert!(out.images[1..].iter().all(|i| i.media_type == "image/gif"));
        assert!(
            out.content.contains("image/svg+xml, 4 bytes, saved to"),
            "{}",
            out.content
        );
        assert!(out.content.contains("not valid base64"), "{}", out.content);
    }
}
