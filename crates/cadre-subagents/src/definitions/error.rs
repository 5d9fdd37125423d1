//! Why a definition (a Markdown file, a Codex role, a skill) is refused: the one error the
//! parsers of every format return, so the loader, the registry and `cadre agents` tell the
//! same reasons the same way.

/// Why a definition is refused. Its text is the reason `cadre agents` and the loader's
/// warnings show after the file's path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DefinitionError {
    /// The document is not one cadre can read: front matter or TOML that does not parse.
    #[error("{0}")]
    Syntax(String),
    /// Two spellings of one key are given (`tools` and `allowed-tools`, say).
    #[error("both `{0}` and `{1}` are given; keep one")]
    Conflict(String, String),
    /// A key is given more than once.
    #[error("`{0}` is given more than once; keep one")]
    Repeated(String),
    /// A key every definition needs is missing.
    #[error("missing `{0}`")]
    Missing(&'static str),
    /// A key every definition needs is empty.
    #[error("`{0}` is empty")]
    Empty(&'static str),
    /// A key's value, the file's name or what it points at is not what it must be; the text
    /// names the key and says why.
    #[error("{0}")]
    Invalid(String),
}

impl From<String> for DefinitionError {
    fn from(reason: String) -> Self {
        DefinitionError::Invalid(reason)
    }
}

impl From<&str> for DefinitionError {
    fn from(reason: &str) -> Self {
        DefinitionError::Invalid(reason.to_string())
    }
}
