//! Names of MCP tools as cadre offers them: `mcp__<server>__<tool>`, made safe for every
//! provider's tool-name rule (OpenAI's `^[a-zA-Z0-9_-]{1,64}$` is the strictest).
//!
//! The rule (documented in `docs/mcp.md`):
//! 1. every character outside `[A-Za-z0-9_-]` becomes `_`; in the server part, runs of `_`
//!    become one `_` (so `mcp__<server>__*` patterns can find where the server ends);
//! 2. a server part longer than [`MAX_SERVER_CHARS`] is cut and ends in `_` plus 8 hex
//!    digits of a hash of the original server name;
//! 3. a whole name longer than [`MAX_NAME_CHARS`], or one that another tool of the server
//!    already has, is cut to fit and ends in `_` plus 8 hex digits of a hash of the original
//!    server and tool names. The hash (FNV-1a) is stable across runs and machines.

/// The longest tool name cadre offers.
pub const MAX_NAME_CHARS: usize = 64;
/// The longest server part of a name.
pub const MAX_SERVER_CHARS: usize = 24;

/// FNV-1a, 32 bits: stable, dependency-free, enough to tell names apart.
pub(crate) fn fnv1a(parts: &[&str]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            // A separator byte no UTF-8 text contains, so ("ab", "c") and ("a", "bc") differ.
            h ^= 0xff;
            h = h.wrapping_mul(0x0100_0193);
        }
        for b in p.bytes() {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
    }
    h
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The server part of tool names for server `name`.
pub fn server_part(name: &str) -> String {
    let mut out = String::new();
    for c in sanitize(name).chars() {
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    let trimmed = out.trim_matches('_');
    let out = if trimmed.is_empty() {
        "server"
    } else {
        trimmed
    };
    if out.len() <= MAX_SERVER_CHARS {
        return out.to_string();
    }
    let keep = MAX_SERVER_CHARS - 9;
    format!("{}_{:08x}", &out[..keep], fnv1a(&[name]))
}

/// The prefix every tool of server `name` starts with: `mcp__<server>__`.
pub fn prefix(server: &str) -> String {
    format!("mcp__{}__", server_part(server))
}

/// Assigns names to the tools of one server, keeping them unique.
#[derive(Debug, Default)]
pub struct ToolNamer {
    taken: std::collections::HashSet<String>,
}

impl ToolNamer {
    /// A namer for one server's tools.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reserve a name that is not a server tool (`mcp__<server>__read_resource`).
    pub fn reserve(&mut self, name: &str) {
        self.taken.insert(name.to_string());
    }

    /// The cadre name of `tool` of `server`.
    pub fn name(&mut self, server: &str, tool: &str) -> String {
        let plain = format!("{}{}", prefix(server), sanitize(tool));
        let name = if plain.len() <= MAX_NAME_CHARS && !self.taken.contains(&plain) {
            plain
        } else {
            let keep = MAX_NAME_CHARS - 9;
            let cut = &plain[..plain.len().min(keep)];
            format!("{cut}_{:08x}", fnv1a(&[server, tool]))
        };
        self.taken.insert(name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_NAME_CHARS
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn plain_names_pass_through() {
        let mut n = ToolNamer::new();
        assert_eq!(n.name("everything", "echo"), "mcp__everything__echo");
        assert_eq!(
            n.name("everything", "get-tiny-image"),
            "mcp__everything__get-tiny-image"
        );
    }

    #[test]
    fn odd_characters_long_names_and_collisions_are_made_safe_and_stable() {
        assert_eq!(server_part("my server.v2"), "my_server_v2");
        assert_eq!(server_part("a__b"), "a_b");
        assert_eq!(server_part("..."), "server");
        let long = server_part("a-very-long-server-name-that-goes-on-and-on");
        assert_eq!(long.len(), MAX_SERVER_CHARS);
        assert_eq!(
            long,
            server_part("a-very-long-server-name-that-goes-on-and-on")
        );

        let mut n = ToolNamer::new();
        let a = n.name("gh", "issue.create");
        let b = n.name("gh", "issue_create");
        assert_eq!(a, "mcp__gh__issue_create");
        assert_ne!(a, b);
        assert!(b.starts_with("mcp__gh__issue_create_"), "{b}");
        let long = n.name("gh", &"x".repeat(100));
        assert_eq!(long.len(), MAX_NAME_CHARS);
        for name in [&a, &b, &long] {
            assert!(valid(name), "{name}");
            assert!(name.starts_with(&prefix("gh")));
        }
        // The same inputs give the same names in another run.
        let mut again = ToolNamer::new();
        again.name("gh", "issue.create");
        assert_eq!(again.name("gh", "issue_create"), b);
    }
}
