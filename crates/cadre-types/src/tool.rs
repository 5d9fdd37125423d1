//! Tool definitions as offered to a model.

use serde::{Deserialize, Serialize};

/// A tool the model may call: its name, what it does and a JSON Schema for its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Unique name (`read_file`, `mcp__server__tool`, ...).
    pub name: String,
    /// What the model reads to decide when to use the tool.
    pub description: String,
    /// JSON Schema (an `object` schema) of the arguments.
    pub parameters: serde_json::Value,
}
