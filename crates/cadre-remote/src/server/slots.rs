//! Connection slots: who holds them, and whose connection is closed when they run out.
//!
//! Without this, the first `max_connections` sockets to arrive keep every slot for as long
//! as they stay within the idle timeout, so one client that opens sockets and sends nothing
//! makes everyone else wait. The rules:
//!
//! - a peer (an IP address) holds at most `per_peer` slots, and all peers together `total`;
//! - a connection that is answering a request (from the moment its request head is read to
//!   the end of its response body) is never closed to make room;
//! - when a slot is needed and none is free, an idle connection is shed: one that has not
//!   yet made an authenticated request before one that has, the one idle longest first;
//!   a peer at its own cap sheds among its own connections only;
//! - when every slot is busy answering, a new connection from a peer at its cap is closed at
//!   once, and otherwise waits in the listen backlog until a slot frees.
//!
//! So an authenticated client's connection outlives every unauthenticated one, and a new
//! connection always finds room unless every slot is busy answering requests.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What one connection's task and the slot table share about it.
#[derive(Debug)]
pub(crate) struct ConnState {
    /// A request is being answered.
    busy: AtomicBool,
    /// It has made at least one request that passed authentication.
    authenticated: AtomicBool,
    /// Milliseconds after the table's epoch when it last became idle (opened or answered).
    idle_since_ms: AtomicU64,
    /// Fired when the connection is chosen to make room.
    pub(crate) shed: CancellationToken,
}

impl ConnState {
    /// Whether a request is being answered.
    pub(crate) fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// Whether it has made an authenticated request.
    pub(crate) fn authenticated(&self) -> bool {
        self.authenticated.load(Ordering::Acquire)
    }
}

/// Until when an unauthenticated connection may stay, as its task checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deadline {
    /// Authenticated: only the idle timeout applies.
    None,
    /// Answering a request: look again later.
    Busy,
    /// Idle and unauthenticated: closed at this instant.
    At(Instant),
}

struct Entry {
    peer: IpAddr,
    state: Arc<ConnState>,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    entries: HashMap<u64, Entry>,
    per_peer: HashMap<IpAddr, usize>,
}

impl Table {
    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.entries.remove(&id)?;
        if let Some(n) = self.per_peer.get_mut(&entry.peer) {
            *n -= 1;
            if *n == 0 {
                self.per_peer.remove(&entry.peer);
            }
        }
        Some(entry)
    }

    /// The connection to shed: idle, unauthenticated before authenticated, idle longest
    /// first; only `peer`'s own when given.
    fn victim(&self, peer: Option<IpAddr>) -> Option<u64> {
        self.entries
            .iter()
            .filter(|(_, e)| peer.is_none_or(|p| p == e.peer) && !e.state.busy())
            // Ties (the same millisecond) go to the older connection.
            .min_by_key(|(id, e)| {
                (
                    e.state.authenticated(),
                    e.state.idle_since_ms.load(Ordering::Acquire),
                    **id,
                )
            })
            .map(|(id, _)| *id)
    }
}

/// Why a connection was not given a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Its peer holds `per_peer` slots, all answering requests: closed at once.
    PeerFull,
    /// Every slot is answering a request: wait for one to free.
    Full,
}

/// The slot table of one server.
pub(crate) struct Slots {
    table: Mutex<Table>,
    /// Fired when a slot frees or a connection becomes idle (so sheddable).
    changed: Notify,
    epoch: Instant,
    total: usize,
    per_peer: usize,
}

impl Slots {
    /// A table of `total` slots, at most `per_peer` for one address.
    pub(crate) fn new(total: usize, per_peer: usize) -> Arc<Self> {
        let total = total.max(1);
        Arc::new(Self {
            table: Mutex::new(Table::default()),
            changed: Notify::new(),
            epoch: Instant::now(),
            total,
            per_peer: per_peer.clamp(1, total),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // The table is consistent after every statement; a panic elsewhere leaves it usable.
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether a new connection could be admitted now (a free slot or one to shed).
    fn has_room(&self) -> bool {
        let table = self.lock();
        table.entries.len() < self.total || table.victim(None).is_some()
    }

    /// Wait until a new connection could be admitted.
    pub(crate) async fn room(&self) {
        loop {
            let changed = self.changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            if self.has_room() {
                return;
            }
            changed.await;
        }
    }

    /// Give a connection from `peer` a slot, shedding an idle connection if there is none.
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Slot, Refusal> {
        let peer = peer.to_canonical();
        let mut table = self.lock();
        // A per-peer cap as large as the whole table is no cap of its own: such a peer
        // waits for a slot like everyone else instead of being refused.
        let peer_full = self.per_peer < self.total
            && table.per_peer.get(&peer).copied().unwrap_or(0) >= self.per_peer;
        let full = table.entries.len() >= self.total;
        if peer_full || full {
            let Some(id) = table.victim(peer_full.then_some(peer)) else {
                return Err(if peer_full {
                    Refusal::PeerFull
                } else {
                    Refusal::Full
                });
            };
            if let Some(shed) = table.remove(id) {
                tracing::debug!(peer = %shed.peer, authenticated = shed.state.authenticated(), "shedding an idle connection to make room");
                shed.state.shed.cancel();
            }
        }
        let id = table.next_id;
        table.next_id += 1;
        let state = Arc::new(ConnState {
            busy: AtomicBool::new(false),
            authenticated: AtomicBool::new(false),
            idle_since_ms: AtomicU64::new(self.now_ms()),
            shed: CancellationToken::new(),
        });
        table.entries.insert(
            id,
            Entry {
                peer,
                state: state.clone(),
            },
        );
        *table.per_peer.entry(peer).or_insert(0) += 1;
        Ok(Slot {
            slots: self.clone(),
            id,
            state,
        })
    }

    /// Slots held now (for tests).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.lock().entries.len()
    }
}

/// One connection's slot; freed on drop.
pub(crate) struct Slot {
    slots: Arc<Slots>,
    id: u64,
    state: Arc<ConnState>,
}

impl Slot {
    /// What the connection's task and the table share.
    pub(crate) fn state(&self) -> &Arc<ConnState> {
        &self.state
    }

    /// A request head has been read; `authenticated` if it passed authentication. The
    /// connection is busy until the returned mark is dropped (with the response body).
    pub(crate) fn begin_request(&self, authenticated: bool) -> RequestMark {
        if authenticated {
            self.state.authenticated.store(true, Ordering::Release);
        }
        self.state.busy.store(true, Ordering::Release);
        RequestMark {
            slots: self.slots.clone(),
            state: self.state.clone(),
        }
    }

    /// When an unauthenticated connection idle since its last exchange must close.
    pub(crate) fn deadline(&self, timeout: Duration) -> Deadline {
        if self.state.authenticated() {
            return Deadline::None;
        }
        if self.state.busy() {
            return Deadline::Busy;
        }
        let since = self.state.idle_since_ms.load(Ordering::Acquire);
        Deadline::At(self.slots.epoch + Duration::from_millis(since) + timeout)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Already gone when it was shed.
        self.slots.lock().remove(self.id);
        self.slots.changed.notify_waiters();
    }
}

/// Held while a request is answered; dropping it makes the connection idle again.
pub(crate) struct RequestMark {
    slots: Arc<Slots>,
    state: Arc<ConnState>,
}

impl Drop for RequestMark {
    fn drop(&mut self) {
        self.state
            .idle_since_ms
            .store(self.slots.now_ms(), Ordering::Release);
        self.state.busy.store(false, Ordering::Release);
        self.slots.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[tokio::test(start_paused = true)]
    async fn idle_unauthenticated_connections_are_shed_first_oldest_first() {
        let slots = Slots::new(3, 3);
        let authed = slots.admit(ip(1)).unwrap();
        drop(authed.begin_request(true));
        tokio::time::advance(Duration::from_millis(5)).await;
        let old = slots.admit(ip(2)).unwrap();
        tokio::time::advance(Duration::from_millis(5)).await;
        let young = slots.admit(ip(2)).unwrap();
        // Full: the oldest unauthenticated one makes room, though the authenticated one
        // has been idle longer.
        let fourth = slots.admit(ip(3)).unwrap();
        assert!(old.state().shed.is_cancelled());
        assert!(!young.state().shed.is_cancelled());
        assert!(!authed.state().shed.is_cancelled());
        assert_eq!(slots.held(), 3);
        // Then the other unauthenticated ones, and only then the authenticated one.
        let _fifth = slots.admit(ip(3)).unwrap();
        assert!(young.state().shed.is_cancelled());
        let _sixth = slots.admit(ip(3)).unwrap();
        assert!(fourth.state().shed.is_cancelled());
        assert!(!authed.state().shed.is_cancelled());
    }

    #[test]
    fn busy_connections_are_never_shed() {
        let slots = Slots::new(2, 2);
        let a = slots.admit(ip(1)).unwrap();
        let b = slots.admit(ip(1)).unwrap();
        let mark_a = a.begin_request(false);
        let mark_b = b.begin_request(true);
        assert_eq!(slots.admit(ip(2)).err(), Some(Refusal::Full));
        assert_eq!(slots.admit(ip(1)).err(), Some(Refusal::Full));
        assert!(!slots.has_room());
        drop(mark_a);
        assert!(slots.has_room());
        let _c = slots.admit(ip(2)).unwrap();
        assert!(a.state().shed.is_cancelled());
        drop(mark_b);
        drop(a);
        assert_eq!(slots.held(), 2);
    }

    #[test]
    fn a_peer_whose_capped_slots_are_busy_is_refused_others_admitted() {
        let slots = Slots::new(3, 2);
        let a = slots.admit(ip(1)).unwrap();
        let b = slots.admit(ip(1)).unwrap();
        let _marks = (a.begin_request(false), b.begin_request(false));
        assert_eq!(slots.admit(ip(1)).err(), Some(Refusal::PeerFull));
        assert!(slots.admit(ip(2)).is_ok());
    }

    #[test]
    fn a_peer_at_its_cap_sheds_its_own_connections_only() {
        let slots = Slots::new(4, 2);
        let other = slots.admit(ip(9)).unwrap();
        let first = slots.admit(ip(1)).unwrap();
        let _second = slots.admit(ip(1)).unwrap();
        let _third = slots.admit(ip(1)).unwrap();
        assert!(first.state().shed.is_cancelled());
        assert!(!other.state().shed.is_cancelled());
        assert_eq!(slots.held(), 3);
    }

    #[test]
    fn ipv4_mapped_addresses_count_as_their_ipv4_peer() {
        let slots = Slots::new(4, 1);
        let v4 = slots.admit(IpAddr::from([127, 0, 0, 1])).unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let _m = slots.admit(mapped).unwrap();
        assert!(v4.state().shed.is_cancelled());
    }

    #[test]
    fn freed_slots_are_counted_once_even_after_a_shed() {
        let slots = Slots::new(1, 1);
        let a = slots.admit(ip(1)).unwrap();
        let b = slots.admit(ip(1)).unwrap();
        assert!(a.state().shed.is_cancelled());
        drop(a);
        assert_eq!(slots.held(), 1);
        drop(b);
        assert_eq!(slots.held(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn unauthenticated_connections_get_a_deadline_authenticated_ones_none() {
        let slots = Slots::new(2, 2);
        let a = slots.admit(ip(1)).unwrap();
        let t = Duration::from_secs(3);
        let start = Instant::now();
        assert_eq!(a.deadline(t), Deadline::At(start + t));
        let mark = a.begin_request(false);
        assert_eq!(a.deadline(t), Deadline::Busy);
        tokio::time::advance(Duration::from_secs(1)).await;
        drop(mark);
        assert_eq!(
            a.deadline(t),
            Deadline::At(start + Duration::from_secs(1) + t)
        );
        drop(a.begin_request(true));
        assert_eq!(a.deadline(t), Deadline::None);
    }
}
