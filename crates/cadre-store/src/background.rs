//! Background liveness work: the [`Heartbeater`] of the owner, the [`Sweeper`] that fails
//! orphans, and [`start_maintenance`], which also runs restart recovery.

use crate::config::StoreConfig;
use crate::error::StoreResult;
use crate::store::{AbortOnDrop, TaskStore};
use std::sync::Arc;
use std::time::Duration;

/// Ids of the tasks this process is running right now.
pub type RunningIds = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// Which tasks a [`Heartbeater`] beats.
#[derive(Clone)]
pub enum BeatSource {
    /// Every non-terminal task created by this process under the store's node
    /// ([`TaskStore::heartbeat_owned`]).
    Owned,
    /// The ids a provider returns ([`TaskStore::heartbeat`] with the store's node).
    Ids(RunningIds),
}

impl std::fmt::Debug for BeatSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BeatSource::Owned => "Owned",
            BeatSource::Ids(_) => "Ids",
        })
    }
}

/// Beats the owner's tasks at a fixed interval (the first beat at once). Stops when dropped.
#[derive(Debug)]
pub struct Heartbeater {
    _task: AbortOnDrop,
}

impl Heartbeater {
    /// Start beating every `every`.
    pub fn spawn(store: Arc<dyn TaskStore>, every: Duration, source: BeatSource) -> Self {
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let res = match &source {
                    BeatSource::Owned => store.heartbeat_owned().await,
                    BeatSource::Ids(ids) => {
                        let ids = ids();
                        if ids.is_empty() {
                            continue;
                        }
                        store.heartbeat(store.node_id(), &ids).await
                    }
                };
                if let Err(e) = res {
                    tracing::warn!("task heartbeat failed: {e}");
                }
            }
        });
        Heartbeater {
            _task: AbortOnDrop(task),
        }
    }
}

/// `every` changed by a random amount within ±10%.
pub fn jittered(every: Duration) -> Duration {
    every.mul_f64(0.9 + fastrand::f64() * 0.2)
}

/// Sweeps orphaned tasks every interval (jittered ±10%, first sweep after one interval).
/// Stops when dropped.
#[derive(Debug)]
pub struct Sweeper {
    _task: AbortOnDrop,
}

impl Sweeper {
    /// Start sweeping every `every` with the given orphan timeout.
    pub fn spawn(store: Arc<dyn TaskStore>, every: Duration, orphan_timeout: Duration) -> Self {
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(jittered(every.max(Duration::from_millis(10)))).await;
                match store.sweep(orphan_timeout).await {
                    Ok(ids) if !ids.is_empty() => {
                        tracing::info!(count = ids.len(), "swept orphaned tasks: {ids:?}");
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!("task sweep failed: {e}"),
                }
            }
        });
        Sweeper {
            _task: AbortOnDrop(task),
        }
    }
}

/// Liveness work of a running `cadre`: what recovery failed, and the background tasks
/// (stopped when this is dropped).
#[derive(Debug)]
pub struct Maintenance {
    /// Tasks failed by restart recovery.
    pub recovered: Vec<String>,
    /// The heartbeater.
    pub heartbeater: Heartbeater,
    /// The sweeper.
    pub sweeper: Sweeper,
}

/// On start: recover the node's tasks left by a dead process, then beat this process's
/// tasks and sweep orphans at the configured intervals.
pub async fn start_maintenance(
    store: Arc<dyn TaskStore>,
    cfg: &StoreConfig,
    source: BeatSource,
) -> StoreResult<Maintenance> {
    cfg.validate()?;
    let recovered = store.recover_node(store.node_id()).await?;
    if !recovered.is_empty() {
        tracing::warn!(
            count = recovered.len(),
            "failed tasks left running by a previous cadre on this node"
        );
    }
    Ok(Maintenance {
        recovered,
        heartbeater: Heartbeater::spawn(store.clone(), cfg.heartbeat_interval(), source),
        sweeper: Sweeper::spawn(store, cfg.sweep_interval(), cfg.orphan_timeout()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_ten_percent() {
        let base = Duration::from_secs(300);
        for _ in 0..1000 {
            let j = jittered(base);
            assert!(
                j >= Duration::from_secs(270) && j <= Duration::from_secs(330),
                "{j:?}"
            );
        }
    }
}
