//! `cadre-bench loader`: how long loading definition directories takes, through the real
//! registry builder (`AgentRegistry::builder().load()`, as `cadre agents list` and every
//! run do): many ordinary files, many hostile ones, and single worst cases, each in a fresh
//! temporary workspace, timed after one warm-up load (which fills the page cache).

use crate::cli::LoaderArgs;
use crate::stats::{Summary, ms, summarize};
use anyhow::{Result, bail};
use cadre_subagents::AgentRegistry;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One measured case.
#[derive(Debug, Serialize)]
struct Case {
    name: String,
    files: usize,
    bytes: u64,
    loaded: usize,
    refused: usize,
    /// The first refusal's reason, as `agents check` prints it.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    summary: Summary,
}

/// An ordinary Claude Code agent file.
fn ordinary(i: usize) -> String {
    format!(
        "---\nname: agent-{i}\ndescription: Use this agent when the user asks for a review of module {i}. Examples: <example>Context: a change landed.</example>\ntools: Read, Grep, Glob, Bash\nmodel: inherit # same as the parent\ncolor: blue\n---\n\nYou are agent {i}. Review the module you are given and report each finding with its file\npath and line. Do not change any file.\n"
    )
}

/// 200 KB of nested `[` in a description: the file that stalled every command for 47 s.
fn nested_brackets() -> Vec<u8> {
    format!("---\nname: x\ndescription: {}\n---\n", "[".repeat(200_000)).into_bytes()
}

/// The hostile kinds, in the order [`hostile`] cycles through them.
const KINDS: [&str; 10] = [
    "4 KiB of random bytes",
    "8 KiB of YAML punctuation",
    "60 KB of `[` (under the cap)",
    "60 KB of `{a: [`",
    "300 levels of block nesting",
    "alias bomb (10^10 values)",
    "2000 keys needing the repair",
    "1 MiB unclosed front matter",
    "40 KB description of `: ` and quotes",
    "1 MiB + 1 byte",
];

/// The hostile kinds, cycled through by index: each is refused or loaded, quickly.
fn hostile(i: usize, rng: &mut fastrand::Rng) -> Vec<u8> {
    match i % 10 {
        // Random bytes.
        0 => (0..4096).map(|_| rng.u8(..)).collect(),
        // Random printable YAML-ish punctuation inside a front matter block.
        1 => {
            let alphabet = b"[]{}:,'\"#&*!|>-? \n\tab";
            let body: Vec<u8> = (0..8192)
                .map(|_| alphabet[rng.usize(..alphabet.len())])
                .collect();
            [b"---\n".as_slice(), &body, b"\n---\n"].concat()
        }
        // Flow nesting just under the front-matter cap.
        2 => format!("---\nname: x\ndescription: {}\n---\n", "[".repeat(60_000)).into_bytes(),
        3 => format!("---\nname: x\ntools: {}\n---\n", "{a: [".repeat(12_000)).into_bytes(),
        // Block nesting.
        4 => {
            let mut s = String::from("---\n");
            for d in 0..300 {
                s.push_str(&" ".repeat(d));
                s.push_str("k:\n");
            }
            s.push_str("---\n");
            s.into_bytes()
        }
        // An alias bomb.
        5 => {
            let mut s = String::from("---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
            for l in 1..10 {
                let p = l - 1;
                s.push_str(&format!(
                    "a{l}: &a{l} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
                ));
            }
            s.push_str("name: bomb\ndescription: d\n---\n");
            s.into_bytes()
        }
        // Many keys, each needing the `: ` repair.
        6 => {
            let mut s = String::from("---\nname: many\ndescription: d\n");
            for k in 0..2000 {
                s.push_str(&format!("k{k}: a: b\n"));
            }
            s.push_str("---\n");
            s.into_bytes()
        }
        // Front matter that never closes, at 1 MiB.
        7 => {
            let mut s = String::from("---\n");
            while s.len() < 1024 * 1024 - 16 {
                s.push_str("description: more text\n");
            }
            s.into_bytes()
        }
        // A long one-line description with quotes and colons.
        8 => format!(
            "---\nname: q{i}\ndescription: {}\n---\nbody\n",
            "it's: \"x\" # y ".repeat(3000)
        )
        .into_bytes(),
        // Just over the file cap.
        _ => vec![b'a'; 1024 * 1024 + 1],
    }
}

/// A workspace whose `.claude/agents/` holds `files`.
fn workspace(
    files: impl Iterator<Item = (String, Vec<u8>)>,
) -> Result<(tempfile::TempDir, usize, u64)> {
    let dir = tempfile::tempdir()?;
    let agents = dir.path().join(".claude").join("agents");
    std::fs::create_dir_all(&agents)?;
    let (mut n, mut bytes) = (0, 0u64);
    for (name, content) in files {
        bytes += content.len() as u64;
        std::fs::write(agents.join(name), content)?;
        n += 1;
    }
    Ok((dir, n, bytes))
}

fn load(ws: &Path) -> AgentRegistry {
    AgentRegistry::builder()
        .workspace(ws)
        .user_dir(None)
        .disable_general_purpose()
        .load()
}

fn measure(name: &str, dir: &tempfile::TempDir, files: usize, bytes: u64, runs: usize) -> Case {
    let ws = dir.path();
    let first = load(ws);
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let reg = load(ws);
        samples.push(ms(started.elapsed()));
        drop(reg);
    }
    Case {
        name: name.to_string(),
        files,
        bytes,
        loaded: first.len(),
        refused: first.errors().len(),
        reason: first.errors().first().map(|e| e.reason.clone()),
        summary: summarize(&samples),
    }
}

/// Run the loader benchmark.
pub fn run(args: &LoaderArgs) -> Result<()> {
    let runs = args.runs.max(1);
    let n = args.files.max(1);
    let mut cases = Vec::new();

    let (dir, files, bytes) =
        workspace((0..n).map(|i| (format!("agent-{i}.md"), ordinary(i).into_bytes())))?;
    let case = measure(&format!("{n} ordinary files"), &dir, files, bytes, runs);
    if case.loaded != n {
        bail!("only {} of {n} ordinary files loaded", case.loaded);
    }
    cases.push(case);
    drop(dir);

    let mut rng = fastrand::Rng::with_seed(7);
    let (dir, files, bytes) =
        workspace((0..n).map(|i| (format!("h-{i}.md"), hostile(i, &mut rng))))?;
    cases.push(measure(
        &format!("{n} hostile files (10 kinds)"),
        &dir,
        files,
        bytes,
        runs,
    ));
    drop(dir);

    // Where the mix's time goes: a tenth of it, one kind at a time.
    let per_kind = (n / KINDS.len()).max(1);
    for (kind, name) in KINDS.iter().enumerate() {
        let (dir, files, bytes) = workspace((0..per_kind).map(|i| {
            (
                format!("h-{i}.md"),
                hostile(i * KINDS.len() + kind, &mut rng),
            )
        }))?;
        cases.push(measure(
            &format!("{per_kind} files: {name}"),
            &dir,
            files,
            bytes,
            runs,
        ));
    }

    // The reported stall: 200 KB of nested brackets beside a good file. The bad one must be
    // refused and the good one loaded.
    let (dir, files, bytes) = workspace(
        [
            ("good.md".to_string(), ordinary(0).into_bytes()),
            ("nested.md".to_string(), nested_brackets()),
        ]
        .into_iter(),
    )?;
    let case = measure("200 KB of `[` beside a good file", &dir, files, bytes, runs);
    if case.loaded != 1 || case.refused != 1 {
        bail!(
            "200 KB of `[` beside a good file: {} loaded, {} refused (want 1 and 1)",
            case.loaded,
            case.refused
        );
    }
    cases.push(case);
    drop(dir);

    let mut singles: Vec<(String, Vec<u8>)> =
        vec![("one file: 200 KB of `[`".to_string(), nested_brackets())];
    for (kind, name) in KINDS.iter().enumerate() {
        singles.push((format!("one file: {name}"), hostile(kind, &mut rng)));
    }
    for (name, content) in singles {
        let (dir, files, bytes) = workspace(std::iter::once(("x.md".to_string(), content)))?;
        cases.push(measure(&name, &dir, files, bytes, runs));
    }
    // 1.5 GiB, sparse: refused from its metadata, never read.
    let dir = tempfile::tempdir()?;
    let agents = dir.path().join(".claude").join("agents");
    std::fs::create_dir_all(&agents)?;
    std::fs::File::create(agents.join("sparse.md"))?.set_len(3 << 29)?;
    cases.push(measure("1.5 GiB sparse file", &dir, 1, 3 << 29, runs));

    println!("loader ({runs} timed loads per case, median)");
    for c in &cases {
        println!(
            "  {:<38} {:>6} files {:>10} bytes  loaded {:>6}  refused {:>6}  median {:9.2} ms  max {:9.2} ms",
            c.name, c.files, c.bytes, c.loaded, c.refused, c.summary.median_ms, c.summary.max_ms
        );
        if let Some(reason) = &c.reason {
            let short: String = reason.chars().take(160).collect();
            println!("  {:<38} first refusal: {short}", "");
        }
    }
    let path = args
        .json
        .clone()
        .unwrap_or_else(|| PathBuf::from("target/bench/loader.json"));
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(&path, serde_json::to_string_pretty(&cases)?)?;
    println!("  json {}", path.display());
    Ok(())
}
