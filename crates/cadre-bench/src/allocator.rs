//! The benchmark binary's allocator, and the live heap it can report.
//!
//! mimalloc by default: many small, short-lived allocations on few threads (messages,
//! events, JSON) are its strength; with glibc malloc the fan-out benchmark spends ~20% of
//! its CPU in the allocator (docs/benchmarks-history.md, "Profile"). Without the `mimalloc`
//! feature, the system allocator.
//!
//! With `live-heap`, the allocator is wrapped to count the bytes allocated and not yet
//! freed. RSS also holds what the allocator keeps for reuse (mimalloc returns pages freed
//! by another thread only when that thread allocates again), so two RSS readings of the
//! same state differ by megabytes; the live heap is what the process itself keeps.

#[cfg(feature = "mimalloc")]
type Inner = mimalloc::MiMalloc;
#[cfg(feature = "mimalloc")]
const INNER: Inner = mimalloc::MiMalloc;
#[cfg(all(not(feature = "mimalloc"), feature = "live-heap"))]
type Inner = std::alloc::System;
#[cfg(all(not(feature = "mimalloc"), feature = "live-heap"))]
const INNER: Inner = std::alloc::System;

#[cfg(feature = "live-heap")]
#[global_allocator]
static GLOBAL: cap::Cap<Inner> = cap::Cap::new(INNER, usize::MAX);

#[cfg(all(feature = "mimalloc", not(feature = "live-heap")))]
#[global_allocator]
static GLOBAL: Inner = INNER;

/// Bytes allocated and not yet freed, in KiB, when built with `live-heap`.
pub fn live_heap_kib() -> Option<u64> {
    #[cfg(feature = "live-heap")]
    return Some(GLOBAL.allocated() as u64 / 1024);
    #[cfg(not(feature = "live-heap"))]
    None
}
