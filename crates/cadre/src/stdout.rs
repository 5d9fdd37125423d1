//! Printing a subcommand's result on stdout without panicking when the reader has gone:
//! `cadre tasks list | head` closes the pipe early, and `println!` would panic on the
//! broken pipe. [`out!`] returns the write's error instead; [`is_broken_pipe`] lets `main`
//! end such a run quietly, as the reader asked for no more.

/// `println!` to stdout that returns `std::io::Result<()>` instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}
pub(crate) use out;

/// `print!` of `text` (no newline added) to stdout, returning the write's error.
pub(crate) fn print(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    std::io::stdout().lock().write_all(text.as_bytes())
}

/// Whether `err` (anywhere in its chain) is a write to a pipe whose reader has closed it.
pub(crate) fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_is_found_through_context() {
        let io = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let err = anyhow::Error::from(io).context("listing tasks");
        assert!(is_broken_pipe(&err));
        assert!(!is_broken_pipe(&anyhow::anyhow!("no task x")));
    }
}
