//! The built-in tools (to be completed).
