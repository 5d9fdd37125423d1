//! The bash command splitter: any text parses without panicking, hanging or overflowing the
//! stack, and what it reports is consistent.
#![no_main]

use cadre_tools::CommandLine;
use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        // cadre runs brush-parser under catch_unwind and refuses a command it panics on (the
        // fuzzer found such inputs), so only a panic elsewhere is a bug of this target.
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info
                .location()
                .is_some_and(|l| l.file().contains("/brush-parser-"))
            {
                abort(info);
            }
        }));
    },
    |data: &[u8]| {
        let Ok(text) = std::str::from_utf8(data) else {
            return;
        };
        let line = CommandLine::parse(text);
        assert_eq!(line.text(), text);
        if !line.is_parsed() {
            assert!(line.unknown().is_some(), "unparsed without a reason: {text:?}");
        }
        for cmd in line.all_commands() {
            let plain = cmd.text();
            assert!(
                cmd.spellings().iter().any(|s| s.text == plain),
                "{plain:?} is not among its own spellings"
            );
        }
        if let Some(texts) = line.allow_texts() {
            assert!(line.unknown().is_none() && line.is_parsed());
            assert_eq!(texts.len(), line.commands().len());
        }
    }
);
