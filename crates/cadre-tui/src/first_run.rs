//! The first-run check, for every surface that talks to a model (the full-screen UI, the
//! line REPL and `cadre run`): when the chosen model's provider expects an API key and has
//! none, say which variable to set before any request goes out.

use cadre_llm::ResolvedModel;

/// The offline demo, which needs no key (the scripted model plays the model's part).
pub const OFFLINE_DEMO: &str = "cadre --workspace examples/demo run --model scripted:examples/scripts/delegation.toml \"Review this project\"";

/// The full message for an interactive surface, or `None` when the model can be called.
pub fn message(model: &ResolvedModel) -> Option<String> {
    let var = model.provider.missing_key()?;
    Some(format!(
        "No API key for the provider {} (model {}), so nothing was sent.\n\
         Set {var}, or pick another model with --model PROVIDER:MODEL (or /model).\n\
         Try cadre offline: {OFFLINE_DEMO}",
        model.provider.name(),
        model.spec
    ))
}

/// The same on one line (for `cadre run`), or `None` when the model can be called.
pub fn one_line(model: &ResolvedModel) -> Option<String> {
    let var = model.provider.missing_key()?;
    Some(missing_key_line(&model.spec, &var))
}

/// The line of [`one_line`] for the model `spec` whose provider's key variable `var` is unset.
pub fn missing_key_line(spec: &str, var: &str) -> String {
    format!(
        "no API key for {spec} (set {var}, or pick another model with --model PROVIDER:MODEL; offline demo: {OFFLINE_DEMO})"
    )
}
