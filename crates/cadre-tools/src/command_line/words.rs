//! One shell word: its value after quote removal, and whether that value is fixed before
//! the line runs. Command substitutions found in a word are handed back to the walker.

use super::walk::Walker;
use brush_parser::word::{WordPiece, WordPieceWithSource};

/// How much of a word's value is known before the line runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WordKind {
    /// The value is exactly the text.
    Literal,
    /// Expands to file names or fixed strings (`*.rs`, `{a,b}`, `~`): it starts no command,
    /// but the value is only known when the line runs.
    Pattern,
    /// Takes a value at run time: a variable, a command substitution, arithmetic, an
    /// ANSI-C string with escapes.
    Expanded,
}

/// A word of a simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The value after quote removal; parts only known at run time keep their source text.
    pub text: String,
    /// How much of the value is known.
    pub kind: WordKind,
}

impl Word {
    /// A word whose value is `text` and of `kind`.
    pub(super) fn new(text: impl Into<String>, kind: WordKind) -> Self {
        Self {
            text: text.into(),
            kind,
        }
    }

    fn raise(&mut self, kind: WordKind) {
        self.kind = self.kind.max(kind);
    }
}

/// Analyse the source text of one word.
pub(super) fn analyse(raw: &str, walker: &mut Walker) -> Word {
    if raw.contains("$[") {
        // The old `$[...]` arithmetic form (the parser splits it into plain text). Quoted
        // spellings are caught too, which only costs a question.
        walker.unknown("arithmetic evaluation");
    }
    let parsed =
        std::panic::catch_unwind(|| brush_parser::word::parse(raw, &super::walk::options()));
    let Ok(Ok(pieces)) = parsed else {
        walker.unparsed(format!("the word {raw} cannot be parsed"));
        return Word::new(raw, WordKind::Expanded);
    };
    let mut word = Word::new(String::new(), WordKind::Literal);
    add_pieces(raw, &pieces, false, &mut word, walker);
    word
}

fn add_pieces(
    raw: &str,
    pieces: &[WordPieceWithSource],
    quoted: bool,
    word: &mut Word,
    walker: &mut Walker,
) {
    for p in pieces {
        let source = raw.get(p.start_index..p.end_index).unwrap_or(raw);
        match &p.piece {
            WordPiece::Text(s) => {
                if !quoted && is_pattern(s) {
                    word.raise(WordKind::Pattern);
                }
                word.text.push_str(s);
            }
            WordPiece::SingleQuotedText(s) => word.text.push_str(s),
            WordPiece::AnsiCQuotedText(s) => {
                if s.contains('\\') {
                    // `$'\x72m'` is `rm`: not decoded here, so not known.
                    word.raise(WordKind::Expanded);
                    word.text.push_str(source);
                } else {
                    word.text.push_str(s);
                }
            }
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                add_pieces(raw, inner, true, word, walker)
            }
            WordPiece::TildePrefix(user) => {
                word.raise(WordKind::Pattern);
                word.text.push('~');
                word.text.push_str(user);
            }
            WordPiece::ParameterExpansion(_) => {
                // Defaults, alternatives and subscripts can hold code or arithmetic.
                if ["$(", "`", "[", "<(", ">("]
                    .iter()
                    .any(|c| source.contains(c))
                {
                    walker.unknown(format!("the expansion {source}"));
                }
                word.raise(WordKind::Expanded);
                word.text.push_str(source);
            }
            WordPiece::CommandSubstitution(code) => {
                walker.nested(code, true);
                word.raise(WordKind::Expanded);
                word.text.push_str(source);
            }
            WordPiece::BackquotedCommandSubstitution(code) => {
                walker.nested(&unescape_backquoted(code), true);
                word.raise(WordKind::Expanded);
                word.text.push_str(source);
            }
            WordPiece::EscapeSequence(s) => word.text.push_str(unescape(s, quoted)),
            WordPiece::ArithmeticExpression(_) => {
                // Arithmetic evaluates variables' values as expressions, and array
                // subscripts in them run command substitutions.
                walker.unknown("arithmetic evaluation");
                word.raise(WordKind::Expanded);
                word.text.push_str(source);
            }
        }
    }
}

/// Unquoted text that globbing or brace expansion would change.
fn is_pattern(text: &str) -> bool {
    text.contains(['*', '?', '[', '('])
        || (text.contains('{') && text.contains('}') && (text.contains(',') || text.contains("..")))
}

/// The value of a backslash escape: the escaped character, nothing for a line
/// continuation, and inside double quotes the backslash too unless it escapes one of
/// `$`, `` ` ``, `"`, `\`.
fn unescape(seq: &str, quoted: bool) -> &str {
    let Some(rest) = seq.strip_prefix('\\') else {
        return seq;
    };
    if rest == "\n" {
        return "";
    }
    if quoted && !matches!(rest, "$" | "`" | "\"" | "\\") {
        return seq;
    }
    rest
}

/// The code of a backquoted substitution, with the backslashes that quoted it removed.
fn unescape_backquoted(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&next) = chars.peek()
            && matches!(next, '\\' | '`' | '$' | '"')
        {
            out.push(next);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}
