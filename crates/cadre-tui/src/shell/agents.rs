//! `/agents`: each sub-agent's source, model and tools, and the problems of the definition
//! files, as the embedding program lists them (`cadre agents list`), for the model in force.

use super::Shell;

/// Lists the sub-agents for the main model given (it changes with `/model`): the text to
/// show, or why it cannot be listed.
pub type AgentsListing = Box<dyn Fn(&str) -> Result<String, String> + Send>;

impl Shell {
    /// Show the listing as a notice; without one, the names `@` completes.
    pub(super) fn show_agents(&mut self) {
        let text = match &self.agents_listing {
            Some(list) => match list(&self.app.status.model) {
                Ok(text) => text,
                Err(e) => {
                    self.app.error(format!("cannot list the sub-agents: {e}"));
                    return;
                }
            },
            None if self.app.agents.is_empty() => "no sub-agents are defined".to_string(),
            None => format!("sub-agents: {}", self.app.agents.join(", ")),
        };
        self.app.notice(text);
    }
}
