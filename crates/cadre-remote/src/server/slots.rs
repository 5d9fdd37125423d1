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
//!   a peer at its own cap sheds among its own unauthenticated connections only, and its
//!   authenticated ones close after their next response instead (`Connection: close`), so
//!   a client never reuses a kept-alive connection at the moment it is closed;
//! - when a peer's every slot is busy answering, a new connection from it waits for one of
//!   them to free (at most `per_peer` such connections per peer wait; more are closed at
//!   once); when every slot of the table is busy, new connections wait in the listen
//!   backlog until one frees.
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
    /// Its last read found nothing to read: it is idle for certain. Until then a connection
    /// may hold a request nobody has read yet, and is not shed.
    drained: AtomicBool,
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
    /// Connections per peer waiting for one of that peer's slots.
    parked: HashMap<IpAddr, usize>,
    /// Connections shed but not yet closed: out of `entries`, yet their sockets stay open
    /// until their tasks notice, so they still count against the file descriptors.
    closing: usize,
}

impl Table {
    /// Sockets held open: slots plus shed connections not yet closed.
    fn open(&self) -> usize {
        self.entries.len() + self.closing
    }

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

    /// The connection to shed: idle, unauthenticated before authenticated, drained before
    /// not yet read, idle longest first. Given `peer` (a peer at its cap), only that peer's
    /// own and only drained ones: the peer's connection waits for one of its slots rather
    /// than close one of its own that holds an unread request. Otherwise an unauthenticated
    /// connection may go before its first read, so that sockets opened a moment ago by
    /// someone without the token cannot push out an authenticated connection.
    fn victim(&self, peer: Option<IpAddr>) -> Option<u64> {
        self.entries
            .iter()
            .filter(|(_, e)| {
                let drained = e.state.drained.load(Ordering::Acquire);
                let sheddable = match peer {
                    // Closing an authenticated client's kept-alive connection while it may be
                    // sending on it would fail that request: it closes after a response.
                    Some(p) => p == e.peer && drained && !e.state.authenticated(),
                    None => drained || !e.state.authenticated(),
                };
                sheddable && !e.state.busy()
            })
            // Ties (the same millisecond) go to the older connection.
            .min_by_key(|(id, e)| {
                (
                    e.state.authenticated(),
                    !e.state.drained.load(Ordering::Acquire),
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
    /// Its peer holds `per_peer` slots, all answering requests: it waits apart (see
    /// [`Slots::park`]) so that other peers are still accepted.
    PeerFull,
    /// Every slot is answering a request: wait for one to free.
    Full,
}

/// At most this many shed connections may be closing at once. A flood sheds faster than
/// busy connection tasks notice, and every one of those sockets is still open: without a
/// bound the open sockets pass the cap (half the file limit) by however many are closing.
const MAX_CLOSING: usize = 16;

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
        table.open() < self.total || (table.closing < MAX_CLOSING && table.victim(None).is_some())
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
        let full = table.open() >= self.total;
        if full && table.closing >= MAX_CLOSING {
            // Wait for some of them to close before shedding more.
            return Err(Refusal::Full);
        }
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
                table.closing += 1;
            }
        }
        let id = table.next_id;
        table.next_id += 1;
        let state = Arc::new(ConnState {
            busy: AtomicBool::new(false),
            authenticated: AtomicBool::new(false),
            drained: AtomicBool::new(false),
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

    /// Let a connection from `peer`, whose every slot is busy, wait for one; `None` when as
    /// many of its connections already wait as it may hold slots (then it is closed).
    pub(crate) fn park(self: &Arc<Self>, peer: IpAddr) -> Option<Parked> {
        let peer = peer.to_canonical();
        let mut table = self.lock();
        let waiting = table.parked.entry(peer).or_insert(0);
        if *waiting >= self.per_peer {
            return None;
        }
        *waiting += 1;
        Some(Parked {
            slots: self.clone(),
            peer,
        })
    }

    /// Slots held now (for tests).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.lock().entries.len()
    }
}

/// A connection waiting for a slot of its peer; counted until dropped.
pub(crate) struct Parked {
    slots: Arc<Slots>,
    peer: IpAddr,
}

impl Parked {
    /// Wait until the peer can be given a slot, and take it.
    pub(crate) async fn admitted(self) -> Slot {
        loop {
            let changed = self.slots.changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            if let Ok(slot) = self.slots.admit(self.peer) {
                return slot;
            }
            changed.await;
        }
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        let mut table = self.slots.lock();
        if let Some(n) = table.parked.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                table.parked.remove(&self.peer);
            }
        }
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

    /// Whether connections of this one's peer wait for a slot: then this one should close
    /// after its response, which frees a slot without racing the client's next request.
    pub(crate) fn peer_waiting(&self) -> bool {
        let table = self.slots.lock();
        (table.entries.get(&self.id)).is_some_and(|e| table.parked.contains_key(&e.peer))
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

    /// A read of the connection found nothing (`true`) or found bytes (`false`). Only a
    /// drained connection is shed, so one whose request is waiting to be read is not.
    pub(crate) fn read_drained(&self, drained: bool) {
        let was = self.state.drained.swap(drained, Ordering::AcqRel);
        if drained && !was {
            // It has become sheddable.
            self.slots.changed.notify_waiters();
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
        let mut table = self.slots.lock();
        // Already gone from the slots when it was shed: then it was one of those closing.
        if table.remove(self.id).is_none() {
            table.closing = table.closing.saturating_sub(1);
        }
        drop(table);
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

    /// Admit, and have its first read find nothing (as an idle connection's does).
    fn idle(slots: &Arc<Slots>, peer: IpAddr) -> Slot {
        let slot = slots.admit(peer).unwrap();
        slot.read_drained(true);
        slot
    }

    #[test]
    fn a_peer_at_its_cap_does_not_shed_its_connections_not_yet_read() {
        let slots = Slots::new(4, 1);
        let fresh = slots.admit(ip(1)).unwrap();
        assert_eq!(slots.admit(ip(1)).err(), Some(Refusal::PeerFull));
        fresh.read_drained(false);
        assert_eq!(slots.admit(ip(1)).err(), Some(Refusal::PeerFull));
        fresh.read_drained(true);
        let _next = slots.admit(ip(1)).unwrap();
        assert!(fresh.state().shed.is_cancelled());
    }

    #[test]
    fn when_full_unread_unauthenticated_connections_go_before_authenticated_ones() {
        let slots = Slots::new(2, 2);
        let authed = idle(&slots, ip(1));
        drop(authed.begin_request(true));
        let fresh = slots.admit(ip(2)).unwrap();
        let _next = slots.admit(ip(3)).unwrap();
        assert!(fresh.state().shed.is_cancelled());
        assert!(!authed.state().shed.is_cancelled());
    }

    #[test]
    fn an_authenticated_connection_holding_an_unread_request_is_not_shed() {
        let slots = Slots::new(2, 2);
        let authed = idle(&slots, ip(1));
        drop(authed.begin_request(true));
        let unread = idle(&slots, ip(1));
        drop(unread.begin_request(true));
        unread.read_drained(false);
        let _next = slots.admit(ip(3)).unwrap();
        assert!(authed.state().shed.is_cancelled());
        assert!(!unread.state().shed.is_cancelled());
    }

    #[test]
    fn busy_connections_are_never_shed() {
        let slots = Slots::new(2, 2);
        let a = idle(&slots, ip(1));
        let b = idle(&slots, ip(1));
        let mark_a = a.begin_request(false);
        let mark_b = b.begin_request(true);
        assert_eq!(slots.admit(ip(2)).err(), Some(Refusal::Full));
        assert_eq!(slots.admit(ip(1)).err(), Some(Refusal::Full));
        assert!(!slots.has_room());
        drop(mark_a);
        assert!(slots.has_room());
        let _c = idle(&slots, ip(2));
        assert!(a.state().shed.is_cancelled());
        drop(mark_b);
        drop(a);
        assert_eq!(slots.held(), 2);
    }

    #[test]
    fn a_peer_whose_capped_slots_are_busy_is_refused_others_admitted() {
        let slots = Slots::new(3, 2);
        let a = idle(&slots, ip(1));
        let b = idle(&slots, ip(1));
        let _marks = (a.begin_request(false), b.begin_request(false));
        assert_eq!(slots.admit(ip(1)).err(), Some(Refusal::PeerFull));
        assert!(slots.admit(ip(2)).is_ok());
    }

    #[tokio::test]
    async fn a_parked_connection_gets_its_peers_slot_once_one_is_idle() {
        let slots = Slots::new(3, 1);
        let a = idle(&slots, ip(1));
        let mark = a.begin_request(false);
        assert_eq!(slots.admit(ip(1)).err(), Some(Refusal::PeerFull));
        let parked = slots.park(ip(1)).unwrap();
        // As many may wait as the peer may hold.
        assert!(slots.park(ip(1)).is_none());
        assert!(slots.park(ip(2)).is_some());
        let waiting = tokio::spawn(parked.admitted());
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(mark);
        let slot = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .unwrap()
            .unwrap();
        assert!(a.state().shed.is_cancelled());
        assert!(!slot.state().shed.is_cancelled());
        // The waiter's place is free again.
        assert!(slots.park(ip(1)).is_some());
    }

    #[test]
    fn a_peer_at_its_cap_sheds_its_own_connections_only() {
        let slots = Slots::new(4, 2);
        let other = idle(&slots, ip(9));
        let first = idle(&slots, ip(1));
        let _second = idle(&slots, ip(1));
        let _third = idle(&slots, ip(1));
        assert!(first.state().shed.is_cancelled());
        assert!(!other.state().shed.is_cancelled());
        assert_eq!(slots.held(), 3);
    }

    #[test]
    fn ipv4_mapped_addresses_count_as_their_ipv4_peer() {
        let slots = Slots::new(4, 1);
        let v4 = idle(&slots, IpAddr::from([127, 0, 0, 1]));
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let _m = idle(&slots, mapped);
        assert!(v4.state().shed.is_cancelled());
    }

    #[test]
    fn freed_slots_are_counted_once_even_after_a_shed() {
        let slots = Slots::new(1, 1);
        let a = idle(&slots, ip(1));
        let b = idle(&slots, ip(1));
        assert!(a.state().shed.is_cancelled());
        drop(a);
        assert_eq!(slots.held(), 1);
        drop(b);
        assert_eq!(slots.held(), 0);
    }

    #[test]
    fn shed_connections_count_against_the_cap_until_they_close() {
        let total = 4;
        let slots = Slots::new(total, total);
        let mut held: Vec<Slot> = (0..total).map(|i| idle(&slots, ip(i as u8))).collect();
        // Each shed leaves its socket open until its task drops the slot; the table sheds
        // only so many of those before new connections wait.
        for i in 0..MAX_CLOSING {
            held.push(idle(&slots, ip(100 + i as u8)));
        }
        assert!(!slots.has_room());
        assert_eq!(slots.admit(ip(200)).err(), Some(Refusal::Full));
        let closed = held
            .iter()
            .position(|s| s.state().shed.is_cancelled())
            .unwrap();
        drop(held.remove(closed));
        assert!(slots.has_room());
        assert!(slots.admit(ip(200)).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn unauthenticated_connections_get_a_deadline_authenticated_ones_none() {
        let slots = Slots::new(2, 2);
        let a = idle(&slots, ip(1));
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
