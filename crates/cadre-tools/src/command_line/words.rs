//! One shell word: its value after quote removal, and whether that value is fixed before
//! the line runs. Command substitutions found in a word are handed back to the walker.

use super::walk::Walker;
use brush_parser::word::{
    Parameter, ParameterExpr, ParameterTransformOp, WordPiece, WordPieceWithSource,
};

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
            WordPiece::ParameterExpansion(expr) => {
                // Defaults, alternatives and subscripts can hold code or arithmetic.
                if !modelled(expr)
                    || ["$(", "`", "[", "<(", ">("]
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

/// Whether the walker models what a parameter expansion does: reading a variable's value
/// (with a default, an alternative, a length, a pattern removed or replaced, a case change,
/// a quoting transform). Not modelled: a subscript (arithmetic), an offset (`${x:1}`,
/// arithmetic), prompt expansion (`${x@P}`, which runs command substitutions), and
/// indirection (`${!x}`: the name it reads can hold a subscript).
fn modelled(expr: &ParameterExpr) -> bool {
    use ParameterExpr as E;
    let (parameter, indirect) = match expr {
        E::Parameter {
            parameter,
            indirect,
        }
        | E::UseDefaultValues {
            parameter,
            indirect,
            ..
        }
        | E::AssignDefaultValues {
            parameter,
            indirect,
            ..
        }
        | E::IndicateErrorIfNullOrUnset {
            parameter,
            indirect,
            ..
        }
        | E::UseAlternativeValue {
            parameter,
            indirect,
            ..
        }
        | E::ParameterLength {
            parameter,
            indirect,
        }
        | E::RemoveSmallestSuffixPattern {
            parameter,
            indirect,
            ..
        }
        | E::RemoveLargestSuffixPattern {
            parameter,
            indirect,
            ..
        }
        | E::RemoveSmallestPrefixPattern {
            parameter,
            indirect,
            ..
        }
        | E::RemoveLargestPrefixPattern {
            parameter,
            indirect,
            ..
        }
        | E::UppercaseFirstChar {
            parameter,
            indirect,
            ..
        }
        | E::UppercasePattern {
            parameter,
            indirect,
            ..
        }
        | E::LowercaseFirstChar {
            parameter,
            indirect,
            ..
        }
        | E::LowercasePattern {
            parameter,
            indirect,
            ..
        }
        | E::ReplaceSubstring {
            parameter,
            indirect,
            ..
        } => (parameter, *indirect),
        E::Transform {
            parameter,
            indirect,
            op,
        } => {
            if matches!(op, ParameterTransformOp::PromptExpand) {
                return false;
            }
            (parameter, *indirect)
        }
        E::Substring { .. } | E::VariableNames { .. } | E::MemberKeys { .. } => return false,
    };
    !indirect && !matches!(parameter, Parameter::NamedWithIndex { .. })
}

/// Unquoted text that globbing or brace expansion would change.
fn is_pattern(text: &str) -> bool {
    // A `[` without a later `]` matches only itself (the command `[`).
    text.contains(['*', '?', '('])
        || text
            .find('[')
            .is_some_and(|at| text[at + 1..].contains(']'))
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
