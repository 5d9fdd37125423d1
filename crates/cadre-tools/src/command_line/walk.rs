//! Walking brush-parser's syntax tree of a line, collecting its simple commands, what they
//! redirect and what cannot be known before the line runs.

use super::words::{Word, WordKind, analyse};
use super::{
    CommandLine, MAX_DEPTH, MAX_LINE_BYTES, MAX_NESTING, MAX_SUBSCRIPT_NESTING, SimpleCommand,
    resolve,
};
use brush_parser::ast::{
    self, Command, CommandPrefixOrSuffixItem, CompoundCommand, CompoundList, ExtendedTestExpr,
    IoFileRedirectKind, IoFileRedirectTarget, IoRedirect, Pipeline,
};

/// The options the line is parsed with: bash's defaults for `bash -c`.
pub(super) fn options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions::default()
}

/// Parse `text`, `depth` command strings deep.
pub(super) fn parse(text: &str, depth: u32) -> CommandLine {
    let mut walker = Walker::new(depth);
    walker.line(text);
    CommandLine {
        text: text.to_string(),
        direct: walker.direct,
        indirect: walker.indirect,
        unknown: walker.unknown,
        unparsed: walker.unparsed,
        not_per_command: walker.not_per_command,
    }
}

/// What a walk has found so far.
pub(super) struct Walker {
    depth: u32,
    direct: Vec<SimpleCommand>,
    indirect: Vec<SimpleCommand>,
    unknown: Option<String>,
    unparsed: bool,
    not_per_command: bool,
}

impl Walker {
    fn new(depth: u32) -> Self {
        Self {
            depth,
            direct: Vec::new(),
            indirect: Vec::new(),
            unknown: None,
            unparsed: false,
            not_per_command: false,
        }
    }

    /// Record that part of the line cannot be known (the first reason is kept).
    pub(super) fn unknown(&mut self, why: impl Into<String>) {
        if self.unknown.is_none() {
            self.unknown = Some(why.into());
        }
    }

    /// Record that part of the line cannot be parsed or is too large to analyse.
    pub(super) fn unparsed(&mut self, why: impl Into<String>) {
        self.unparsed = true;
        self.unknown(why);
    }

    /// Walk code found inside the line: run by the shell itself (`direct`, a command
    /// substitution) or handed to another program as an argument (`bash -c`, `eval`).
    pub(super) fn nested(&mut self, code: &str, direct: bool) {
        if self.depth >= MAX_DEPTH {
            self.unparsed("command strings nested too deeply");
            return;
        }
        let mut inner = Walker::new(self.depth + 1);
        inner.line(code);
        if let Some(why) = inner.unknown {
            self.unknown(why);
        }
        self.unparsed |= inner.unparsed;
        if direct {
            self.direct.extend(inner.direct);
            self.indirect.extend(inner.indirect);
            self.not_per_command |= inner.not_per_command;
        } else {
            self.indirect.extend(inner.direct);
            self.indirect.extend(inner.indirect);
        }
    }

    /// Add a command built from another command's arguments (`find -exec`).
    pub(super) fn push_indirect(&mut self, cmd: SimpleCommand) {
        self.indirect.push(cmd);
    }

    fn line(&mut self, text: &str) {
        if text.len() > MAX_LINE_BYTES {
            self.unparsed(format!("the command is longer than {MAX_LINE_BYTES} bytes"));
            return;
        }
        if nesting(text) > MAX_NESTING {
            self.unparsed("the command nests brackets too deeply");
            return;
        }
        if subscript_nesting(text) > MAX_SUBSCRIPT_NESTING {
            self.unparsed("the command nests array subscripts too deeply");
            return;
        }
        if unclosed_subscript(text) {
            // The parser backtracks over each one (six in a word took 13 s; found by
            // fuzzing), and the shell refuses them anyway ("bad substitution").
            self.unparsed("an array subscript is not closed before its `}`");
            return;
        }
        if text
            .chars()
            .any(|c| c.is_control() && c != '\t' && c != '\n')
        {
            // No shell command needs them, and the parser loops on some (a form feed after
            // `<<`, found by fuzzing).
            self.unparsed("the command contains control characters");
            return;
        }
        if oversized_fd(text) {
            self.unparsed("a redirection names a file descriptor number that is too large");
            return;
        }
        if risky_heredoc(text) {
            // The tokenizer loops for good on these (`<<$( ;$((<<f)` and `$(<<  `, found
            // by fuzzing and by review).
            self.unparsed("a here-document's delimiter is missing, blank or a substitution");
            return;
        }
        // The parser is not ours and the text is the model's: a panic inside it (one was
        // found by fuzzing) must refuse this command, not take the run down.
        let parsed = std::panic::catch_unwind(|| {
            brush_parser::Parser::new(
                std::io::Cursor::new(text.as_bytes()),
                &options(),
                &brush_parser::SourceInfo::default(),
            )
            .parse_program()
        });
        match parsed {
            Ok(Ok(program)) => {
                for list in &program.complete_commands {
                    self.list(list);
                }
            }
            Ok(Err(e)) => self.unparsed(format!("the command cannot be parsed: {e}")),
            Err(_) => self.unparsed("the command cannot be parsed (the parser failed on it)"),
        }
    }

    fn list(&mut self, list: &CompoundList) {
        for item in &list.0 {
            self.pipeline(&item.0.first);
            for next in &item.0.additional {
                match next {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p),
                }
            }
        }
    }

    fn pipeline(&mut self, pipeline: &Pipeline) {
        for command in &pipeline.seq {
            self.command(command);
        }
    }

    fn command(&mut self, command: &Command) {
        match command {
            Command::Simple(simple) => self.simple(simple),
            Command::Compound(compound, redirects) => {
                self.compound(compound);
                self.compound_redirect_list(redirects.as_ref());
            }
            Command::Function(f) => {
                self.compound(&f.body.0);
                self.compound_redirect_list(f.body.1.as_ref());
            }
            Command::ExtendedTest(test) => self.test(&test.expr),
        }
    }

    /// A compound command's redirections: one to or from a file applies to commands no
    /// per-command rule sees it with.
    fn compound_redirect_list(&mut self, redirects: Option<&ast::RedirectList>) {
        for r in redirects.into_iter().flat_map(|l| &l.0) {
            if self.redirect(r) {
                self.not_per_command = true;
            }
        }
    }

    fn compound(&mut self, compound: &CompoundCommand) {
        match compound {
            CompoundCommand::Arithmetic(_) | CompoundCommand::ArithmeticForClause(_) => {
                self.unknown("arithmetic evaluation")
            }
            CompoundCommand::BraceGroup(g) => self.list(&g.list),
            CompoundCommand::Subshell(s) => self.list(&s.list),
            CompoundCommand::ForClause(f) => {
                // The loop assigns its variable (`for PATH in /tmp`), which no per-command
                // rule sees.
                self.not_per_command = true;
                for w in f.values.iter().flatten() {
                    analyse(&w.value, self);
                }
                self.list(&f.body.list);
            }
            CompoundCommand::CaseClause(c) => {
                analyse(&c.value.value, self);
                for item in &c.cases {
                    for p in &item.patterns {
                        analyse(&p.value, self);
                    }
                    if let Some(list) = &item.cmd {
                        self.list(list);
                    }
                }
            }
            CompoundCommand::IfClause(i) => {
                self.list(&i.condition);
                self.list(&i.then);
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c);
                    }
                    self.list(&e.body);
                }
            }
            CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
                self.list(&w.0);
                self.list(&w.1.list);
            }
        }
    }

    fn test(&mut self, expr: &ExtendedTestExpr) {
        match expr {
            ExtendedTestExpr::And(a, b) | ExtendedTestExpr::Or(a, b) => {
                self.test(a);
                self.test(b);
            }
            ExtendedTestExpr::Not(e) | ExtendedTestExpr::Parenthesized(e) => self.test(e),
            ExtendedTestExpr::UnaryTest(_, w) => {
                analyse(&w.value, self);
            }
            ExtendedTestExpr::BinaryTest(op, a, b) => {
                use ast::BinaryPredicate as B;
                if matches!(
                    op,
                    B::ArithmeticEqualTo
                        | B::ArithmeticNotEqualTo
                        | B::ArithmeticLessThan
                        | B::ArithmeticLessThanOrEqualTo
                        | B::ArithmeticGreaterThan
                        | B::ArithmeticGreaterThanOrEqualTo
                ) {
                    self.unknown("arithmetic evaluation");
                }
                analyse(&a.value, self);
                analyse(&b.value, self);
            }
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand) {
        let mut assignments = Vec::new();
        let mut words = Vec::new();
        let mut file_redirects = false;
        let prefix = simple.prefix.iter().flat_map(|p| &p.0);
        let suffix = simple.suffix.iter().flat_map(|s| &s.0);
        let mut items: Vec<Item<'_>> = prefix.map(Item::Part).collect();
        if let Some(w) = &simple.word_or_name {
            items.push(Item::Word(w));
        }
        items.extend(suffix.map(Item::Part));
        for item in items {
            match item {
                Item::Word(w) | Item::Part(CommandPrefixOrSuffixItem::Word(w)) => {
                    words.push(analyse(&w.value, self))
                }
                Item::Part(CommandPrefixOrSuffixItem::AssignmentWord(assignment, w)) => {
                    if let ast::AssignmentValue::Array(elements) = &assignment.value {
                        for (index, value) in elements {
                            if index.is_some() {
                                self.unknown("an array subscript (arithmetic evaluation)");
                            }
                            analyse(&value.value, self);
                        }
                    }
                    if matches!(assignment.name, ast::AssignmentName::ArrayElementName(..)) {
                        self.unknown("an array subscript (arithmetic evaluation)");
                    }
                    let word = analyse(&w.value, self);
                    if words.is_empty() {
                        assignments.push(word);
                    } else {
                        // After the command word an assignment is an argument (`export A=1`).
                        words.push(word);
                    }
                }
                Item::Part(CommandPrefixOrSuffixItem::IoRedirect(r)) => {
                    file_redirects |= self.redirect(r);
                }
                Item::Part(CommandPrefixOrSuffixItem::ProcessSubstitution(_, sub)) => {
                    self.list(&sub.list);
                    words.push(Word::new("<(...)", WordKind::Expanded));
                }
            }
        }
        let cmd = SimpleCommand::new(assignments, words, file_redirects, false);
        resolve::code_in_arguments(&cmd, self);
        self.direct.push(cmd);
    }

    /// Walk one redirection; true when it reads or writes a file (anything but duplicating
    /// or closing a descriptor, or `/dev/null`).
    fn redirect(&mut self, redirect: &IoRedirect) -> bool {
        match redirect {
            IoRedirect::File(_, kind, target) => match target {
                IoFileRedirectTarget::Filename(w) => {
                    let word = analyse(&w.value, self);
                    let dup = matches!(
                        kind,
                        IoFileRedirectKind::DuplicateInput | IoFileRedirectKind::DuplicateOutput
                    );
                    !(is_dev_null(&word) || dup && is_descriptor(&word))
                }
                IoFileRedirectTarget::Duplicate(w) => {
                    let word = analyse(&w.value, self);
                    !(is_dev_null(&word) || is_descriptor(&word))
                }
                IoFileRedirectTarget::Fd(_) => false,
                IoFileRedirectTarget::ProcessSubstitution(_, sub) => {
                    self.list(&sub.list);
                    false
                }
            },
            IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion
                    && ["$(", "`", "$[", "${"]
                        .iter()
                        .any(|c| doc.doc.value.contains(c))
                {
                    self.unknown("a here-document with substitutions");
                }
                false
            }
            IoRedirect::HereString(_, w) => {
                analyse(&w.value, self);
                false
            }
            IoRedirect::OutputAndError(w, _) => {
                let word = analyse(&w.value, self);
                !is_dev_null(&word)
            }
        }
    }
}

/// A prefix or suffix item, or the command word between them.
enum Item<'a> {
    Word(&'a ast::Word),
    Part(&'a CommandPrefixOrSuffixItem),
}

fn is_dev_null(word: &Word) -> bool {
    word.kind == WordKind::Literal && word.text == "/dev/null"
}

/// `1`, `2`, `-` (close): the target of `>&N` that duplicates or closes a descriptor.
fn is_descriptor(word: &Word) -> bool {
    word.kind == WordKind::Literal
        && !word.text.is_empty()
        && (word.text == "-" || word.text.bytes().all(|b| b.is_ascii_digit()))
}

/// The deepest nesting of brackets in `text`, counted without regard to quoting (an upper
/// bound of what the parser recurses into).
fn nesting(text: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for b in text.bytes() {
        match b {
            b'(' | b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b'}' | b']' => depth = depth.saturating_sub(1),
            b'`' => max = max.max(depth + 1),
            _ => {}
        }
    }
    max
}

/// The deepest nesting of array subscripts opened by a parameter expansion (`${name[`),
/// counted without regard to quoting, as `nesting` is.
fn subscript_nesting(text: &str) -> usize {
    let bytes = text.as_bytes();
    // One entry per open bracket: whether it opened a subscript. Bounded by the line's
    // length, which is checked first.
    let mut open: Vec<bool> = Vec::new();
    let (mut depth, mut max) = (0usize, 0usize);
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'[' => {
                let subscript = opens_subscript(&bytes[..i]);
                open.push(subscript);
                if subscript {
                    depth += 1;
                    max = max.max(depth);
                }
            }
            b'(' | b'{' => open.push(false),
            b')' | b'}' | b']' => depth -= usize::from(open.pop() == Some(true)),
            _ => {}
        }
    }
    max
}

/// Array subscripts (`${NAME[`) a line may open; past it the line is refused rather than
/// scanned for their ends (the scan of each runs to its end).
const MAX_SUBSCRIPTS: usize = 64;

/// True when an array subscript opened by `${NAME[` meets the `}` of its expansion (at its
/// own depth of braces and brackets) before its `]`, or the end of the line, or when the
/// line opens more than [`MAX_SUBSCRIPTS`]. Counted without regard to quoting.
fn unclosed_subscript(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut opened = 0usize;
    for i in 0..bytes.len() {
        if bytes[i] != b'[' || !opens_subscript(&bytes[..i]) {
            continue;
        }
        opened += 1;
        if opened > MAX_SUBSCRIPTS {
            return true;
        }
        let mut depth = 0usize;
        let mut closed = false;
        for &b in &bytes[i + 1..] {
            match b {
                b'{' | b'[' => depth += 1,
                b']' if depth == 0 => {
                    closed = true;
                    break;
                }
                b'}' if depth == 0 => break,
                b'}' | b']' => depth -= 1,
                _ => {}
            }
        }
        if !closed {
            return true;
        }
    }
    false
}

/// True when `before` ends in `${NAME` (or `${#NAME`, `${!NAME`, `${ NAME`), so that a `[`
/// after it opens an array subscript.
fn opens_subscript(before: &[u8]) -> bool {
    let name = before
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count();
    if name == 0 {
        return false;
    }
    let mut rest = &before[..before.len() - name];
    // `${#a[@]}` and `${!a[@]}`, and the parser's reading of `${ a[` (which the shell
    // refuses): a subscript all the same (found by fuzzing).
    if let Some(r) = rest.strip_suffix(b"#").or_else(|| rest.strip_suffix(b"!")) {
        rest = r;
    }
    let blanks = rest
        .iter()
        .rev()
        .take_while(|b| **b == b' ' || **b == b'\t')
        .count();
    rest[..rest.len() - blanks].ends_with(b"${")
}

/// True when a run of digits right before `<` or `>` is too long for a file descriptor
/// number (the shell's `2>` form): the parser panics on one that overflows an `i32`.
fn oversized_fd(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut run = 0usize;
    for &b in bytes {
        if b.is_ascii_digit() {
            run += 1;
        } else {
            if (b == b'<' || b == b'>') && run > 9 {
                return true;
            }
            run = 0;
        }
    }
    false
}

/// True when a here-document operator (`<<` or `<<-`, not the here-string `<<<`) is
/// followed by what the tokenizer loops on without end. Every such input fuzzing found
/// leaves a here-document open at the end of the text (`<<$( ;$((<<f)`, `$(<<  `,
/// `cat <<"" `), so a line is refused when a here-document's body does not end within it
/// (no later line is its delimiter), and also when the delimiter is missing or empty once
/// unquoted (`""`), when two or more blanks follow `<<` (inside `$(…)` a blank becomes an
/// empty delimiter), or when the delimiter holds a substitution (`$(`, `$[`, a backquote;
/// the shell takes it literally, so no script means one). A body is skipped, so what it
/// holds is not read as operators, and a `<<` inside `((…))` / `$((…))` is taken for a
/// shift, which needs no body (the other checks still apply: `$((1 << $(nproc)))` is
/// refused, and only asked about). Counted without regard to quoting, as `nesting` is: a
/// quoted `<<` refuses a command that would have parsed, never the reverse.
fn risky_heredoc(text: &str) -> bool {
    let bytes = text.as_bytes();
    let is_blank = |b: &u8| *b == b' ' || *b == b'\t';
    // Where the bodies of the current line's here-documents end: the scan goes on there
    // after the line's newline.
    let mut bodies_end: Option<usize> = None;
    // Open arithmetic (`((`, `$((`): a `<<` in it is a shift.
    let mut arithmetic = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\n' {
            i = bodies_end.take().unwrap_or(i + 1);
            continue;
        }
        if bytes[i..].starts_with(b"((") {
            arithmetic += 1;
            i += 2;
            continue;
        }
        if arithmetic > 0 && bytes[i..].starts_with(b"))") {
            arithmetic -= 1;
            i += 2;
            continue;
        }
        if bytes[i] != b'<' {
            i += 1;
            continue;
        }
        // The tokenizer splits a run of `<` greedily (`<<<<<` is `<<<` then `<<`): no
        // script writes four or more, `<<<` is a here-string, `<<` a here-document.
        let run = bytes[i..].iter().take_while(|b| **b == b'<').count();
        match run {
            1 | 3 => {
                i += run;
                continue;
            }
            2 => {}
            _ => return true,
        }
        let mut j = i + 2;
        let strip_tabs = bytes.get(j) == Some(&b'-');
        if strip_tabs {
            j += 1;
        }
        let blanks = bytes[j..].iter().take_while(|b| is_blank(b)).count();
        j += blanks;
        let len = bytes[j..]
            .iter()
            .take_while(|b| !matches!(b, b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>'))
            .count();
        let word = &bytes[j..j + len];
        let delimiter: Vec<u8> = word
            .iter()
            .copied()
            .filter(|b| !matches!(b, b'"' | b'\'' | b'\\'))
            .collect();
        if blanks >= 2 || delimiter.is_empty() || has_substitution(word) {
            return true;
        }
        if arithmetic > 0 {
            // Likely a shift, which has no body; the checks above still hold, since the
            // count ignores quoting (a quoted `((` must not hide a here-document).
            i = j + len;
            continue;
        }
        let line_end = bytes[j..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |p| j + p);
        let body_start = bodies_end.unwrap_or(line_end + 1).max(line_end + 1);
        match body_end(bytes, body_start, &delimiter, strip_tabs) {
            Some(end) => bodies_end = Some(end),
            None => return true,
        }
        i = j + len;
    }
    false
}

/// True when a here-document's delimiter word holds `$(`, `$[` or a backquote.
fn has_substitution(word: &[u8]) -> bool {
    word.iter()
        .enumerate()
        .any(|(k, &b)| b == b'`' || (k > 0 && word[k - 1] == b'$' && (b == b'(' || b == b'[')))
}

/// Where a here-document body starting at `start` ends (just after its delimiter line), or
/// `None` when no line from there on is `delimiter` (with leading tabs removed for `<<-`).
fn body_end(bytes: &[u8], start: usize, delimiter: &[u8], strip_tabs: bool) -> Option<usize> {
    let mut at = start;
    while at < bytes.len() {
        let end = bytes[at..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |p| at + p);
        let mut line = &bytes[at..end];
        if strip_tabs {
            let tabs = line.iter().take_while(|b| **b == b'\t').count();
            line = &line[tabs..];
        }
        if line == delimiter {
            return Some(end.min(bytes.len()));
        }
        at = end + 1;
    }
    None
}
