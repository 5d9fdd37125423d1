//! Identifier and timestamp helpers: every id cadre hands out is built here.

use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh id for a top-level session (`s-<uuid>`).
pub fn new_session_id() -> String {
    format!("s-{}", uuid::Uuid::new_v4())
}

/// A fresh id for a sub-agent's session (`sub-<uuid>`); never reused, so two children never collide.
pub fn new_sub_session_id() -> String {
    format!("sub-{}", uuid::Uuid::new_v4())
}

/// A fresh background task id (`task_<uuid>`).
pub fn new_task_id() -> String {
    format!("task_{}", uuid::Uuid::new_v4())
}

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_their_prefixes_and_are_unique() {
        let a = new_sub_session_id();
        let b = new_sub_session_id();
        assert!(a.starts_with("sub-") && b.starts_with("sub-"));
        assert_ne!(a, b);
        assert!(new_task_id().starts_with("task_"));
        assert!(new_session_id().starts_with("s-"));
    }
}
