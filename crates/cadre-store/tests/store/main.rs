//! Store tests: every behaviour is checked against SQLite and against a throwaway
//! PostgreSQL cluster (one per test binary, a database per test).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adoption;
mod batching;
mod checkpoints;
mod common;
mod concurrency;
mod cross_node;
mod delivery;
mod liveness;
mod processes;
mod served;
mod state;
mod teams;
