//! The delegation tools a parent model is offered: `task`, the task and agent lifecycle
//! tools, the surface that picks them, the call-time guard and the prompt section they add.

/// `new` and `for_parent` of a tool that delegates: it holds the runtime (weakly) and what
/// its agent passes down to the children it starts.
macro_rules! delegating_constructors {
    ($tool:ident) => {
        impl $tool {
            /// The tool of a top-level agent over `runtime`.
            pub fn new(runtime: &std::sync::Arc<crate::SubagentRuntime>) -> Self {
                Self::for_parent(runtime, runtime.top_inherited().clone())
            }

            /// The tool of an agent that passes `inherited` down.
            pub fn for_parent(
                runtime: &std::sync::Arc<crate::SubagentRuntime>,
                inherited: std::sync::Arc<crate::Inherited>,
            ) -> Self {
                Self {
                    runtime: crate::runtime::RuntimeRef::new(runtime),
                    inherited,
                }
            }
        }
    };
}

pub mod agents;
pub(crate) mod context_ext;
pub(crate) mod deliveries;
pub(crate) mod guard;
pub(crate) mod surface;
pub(crate) mod task;
pub mod task_control;
pub mod team;
pub(crate) mod title;
