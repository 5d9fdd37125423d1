//! Walking brush-parser's syntax tree of a line, collecting its simple commands, what they
//! redirect and what cannot be known before the line runs.

use super::words::{Word, WordKind, analyse};
use super::{CommandLine, MAX_DEPTH, SimpleCommand, builtins, guards, resolve};
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
        if let Some(why) = guards::refusal(text) {
            self.unparsed(why);
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
                builtins::assigned(&f.variable_name, self);
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
            ExtendedTestExpr::UnaryTest(op, w) => {
                let word = analyse(&w.value, self);
                if matches!(
                    op,
                    ast::UnaryPredicate::ShellVariableIsSetAndAssigned
                        | ast::UnaryPredicate::ShellVariableIsSetAndNameRef
                ) {
                    builtins::check("test", &[Word::new("-v", WordKind::Literal), word], self);
                }
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
        let mut prefix_names: Vec<&str> = Vec::new();
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
                    match &assignment.name {
                        ast::AssignmentName::ArrayElementName(..) => {
                            self.unknown("an array subscript (arithmetic evaluation)")
                        }
                        // After the command word it is an argument, which the command judges.
                        ast::AssignmentName::VariableName(name) if words.is_empty() => {
                            prefix_names.push(name.as_str())
                        }
                        ast::AssignmentName::VariableName(_) => {}
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
        // `IFS=… read` only changes how `read` splits its input, a common idiom.
        let splits_input = words
            .first()
            .is_some_and(|w| matches!(w.text.as_str(), "read" | "mapfile" | "readarray"));
        for name in prefix_names {
            if !(name == "IFS" && splits_input) {
                builtins::assigned(name, self);
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
                // Bash removes each backslash-newline of an unquoted body before expanding
                // it, so `$\⏎(cmd)` is a substitution.
                let body = without_continuations(&doc.doc.value);
                if doc.requires_expansion
                    && ["$(", "`", "$[", "${"].iter().any(|c| body.contains(c))
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

/// `body` with each backslash-newline removed, as bash reads an unquoted here-document (a
/// backslash escaping a backslash is kept with it).
fn without_continuations(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\n') => {}
            Some(next) => {
                out.push(c);
                out.push(next);
            }
            None => out.push(c),
        }
    }
    out
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
