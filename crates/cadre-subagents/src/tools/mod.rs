//! The delegation tools a parent model is offered: `task`, the task and agent lifecycle
//! tools, the surface that picks them, the call-time guard and the prompt section they add.

pub mod agents;
pub(crate) mod context_ext;
pub(crate) mod guard;
pub(crate) mod surface;
pub(crate) mod task;
pub mod task_control;
