//! Budgets down a tree of runs. Every run spends from a [`Budget`] node: a run started on
//! another's behalf (a sub-agent) gets a child node, and what a node is charged is charged to
//! every ancestor too, so a node counts "what this run and everything run on its behalf
//! spent". A node is exhausted when its own limit or any ancestor's is reached; exhaustion
//! reaches every descendant at once. So a child's effective budget is the smaller of its own
//! limit and what each ancestor has left, whatever runs it (foreground or background).
//!
//! Only model calls spend: tokens, and dollars (a priced call's `Usage` carries its cost). To
//! add a dimension: a field in [`Spend`] and its sum in `Spend::add`, a field in
//! [`BudgetLimits`], one line in `BudgetLimits::reached`, and a `LimitKind` variant;
//! charging, roll-up and cascade need no change.
//!
//! Starting a model call and charging one are one critical section of the whole tree
//! ([`Budget::start`], [`Budget::charge_then`]): a call is started either before the charge
//! that crosses a limit is in, or not at all, so no sibling starts a call once the stop is
//! decided. What the crossing charge's caller reports (the usage event that says "stop") is
//! reported inside the same section, so nothing starts after the report either. A request
//! already sent when the limit is crossed still runs; its usage is charged when it arrives.

use cadre_types::{LimitKind, Usage};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio_util::sync::{CancellationToken, DropGuard};

/// What has been spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spend {
    /// Tokens of model calls.
    pub usage: Usage,
}

impl Spend {
    /// The spend of a model call that used `usage`.
    pub fn tokens(usage: Usage) -> Self {
        Self { usage }
    }

    fn add(&mut self, other: &Spend) {
        self.usage += other.usage;
    }
}

/// The limits of one node; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetLimits {
    /// Tokens (input + output) of the run and everything under it.
    pub max_tokens: Option<u64>,
    /// Wall-clock time from the node's creation.
    pub wall_clock: Option<Duration>,
    /// Dollars, in nano-dollars, of the model calls whose price is known (a call without a
    /// price adds nothing: see [`Budget::is_cost_limited`]).
    pub max_cost_nano_usd: Option<u64>,
}

impl BudgetLimits {
    /// The first spend limit `spent` has reached (time is watched separately).
    fn reached(&self, spent: &Spend) -> Option<LimitKind> {
        if self
            .max_tokens
            .is_some_and(|max| spent.usage.total() >= max)
        {
            return Some(LimitKind::Tokens);
        }
        if self
            .max_cost_nano_usd
            .is_some_and(|max| spent.usage.cost_nano_usd >= max)
        {
            return Some(LimitKind::Cost);
        }
        None
    }

    fn is_unlimited(&self) -> bool {
        *self == Self::default()
    }
}

/// The end of a node: which limit was reached first, and a token cancelled then (a child
/// token of the parent's, so an ancestor's exhaustion cancels it too).
#[derive(Debug)]
struct Exhaustion {
    hit: OnceLock<LimitKind>,
    token: CancellationToken,
}

impl Exhaustion {
    fn mark(&self, kind: LimitKind) {
        // The kind is set before the token fires, so whoever sees the token sees a kind.
        let _ = self.hit.set(kind);
        self.token.cancel();
    }
}

/// The tree's critical section: starting a call and charging one hold it.
type Section = Arc<Mutex<()>>;

fn enter(section: &Mutex<()>) -> std::sync::MutexGuard<'_, ()> {
    // Nothing is kept under the lock, so a panic while it was held left nothing broken.
    section
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Debug)]
struct Node {
    parent: Option<Arc<Node>>,
    /// The root's section, shared by every node of the tree.
    section: Section,
    limits: BudgetLimits,
    /// True when this node or an ancestor has a limit.
    limited: bool,
    spent: Mutex<Spend>,
    end: Arc<Exhaustion>,
    /// Stops the deadline timer when the node goes away.
    _timer: Option<DropGuard>,
}

/// A node of the budget tree (see the module documentation). Cheap to clone; clones are the
/// same node.
#[derive(Debug, Clone)]
pub struct Budget {
    node: Arc<Node>,
}

impl Default for Budget {
    fn default() -> Self {
        Self::unlimited()
    }
}

impl Budget {
    /// A root with no limits (a top-level run's envelope).
    pub fn unlimited() -> Self {
        Self::node(None, BudgetLimits::default())
    }

    /// A node under this one with its own `limits`; it is charged with everything charged to
    /// it and ends when its limits or this node's are reached. The wall-clock limit needs a
    /// tokio runtime (its timer runs on it).
    pub fn child(&self, limits: BudgetLimits) -> Self {
        Self::node(Some(self.node.clone()), limits)
    }

    fn node(parent: Option<Arc<Node>>, limits: BudgetLimits) -> Self {
        let token = match &parent {
            Some(p) => p.end.token.child_token(),
            None => CancellationToken::new(),
        };
        let end = Arc::new(Exhaustion {
            hit: OnceLock::new(),
            token,
        });
        let section = parent
            .as_ref()
            .map_or_else(Section::default, |p| p.section.clone());
        let timer = limits.wall_clock.and_then(|budget| {
            let handle = tokio::runtime::Handle::try_current().ok()?;
            let stop = CancellationToken::new();
            let deadline = tokio::time::Instant::now() + budget;
            let (end, stopped, section) = (end.clone(), stop.clone(), section.clone());
            handle.spawn(async move {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => {
                        let _in = enter(&section);
                        end.mark(LimitKind::WallClock);
                    }
                    _ = end.token.cancelled() => {}
                    _ = stopped.cancelled() => {}
                }
            });
            Some(stop.drop_guard())
        });
        let limited = !limits.is_unlimited() || parent.as_ref().is_some_and(|p| p.limited);
        Self {
            node: Arc::new(Node {
                parent,
                section,
                limits,
                limited,
                spent: Mutex::new(Spend::default()),
                end,
                _timer: timer,
            }),
        }
    }

    /// Add `spend` to this node and every ancestor; a node whose limit it reaches is
    /// exhausted, and with it every node under it.
    pub fn charge(&self, spend: Spend) {
        self.charge_then(spend, |_| ());
    }

    /// [`charge`](Self::charge) `spend`, then call `report` with this node's total, both in
    /// the tree's critical section: a charge that crosses a limit and its report happen
    /// before any call [`start`](Self::start)ed after them would, and none is started
    /// after. `report` must not charge or start anything on this tree.
    pub fn charge_then<T>(&self, spend: Spend, report: impl FnOnce(Spend) -> T) -> T {
        // A tree without limits is never exhausted: nothing to keep in order.
        let _in = self.node.limited.then(|| enter(&self.node.section));
        self.add(spend);
        report(self.spent())
    }

    /// Start a model call with `start` unless this node is exhausted: `None` then, and
    /// `start` is not called. Checked and started in the tree's critical section, so a call
    /// is started before the charge that exhausts the node is in, or not at all. `start`
    /// should only begin the call (build its stream), not wait on it.
    pub fn start<T>(&self, start: impl FnOnce() -> T) -> Option<T> {
        let _in = self.node.limited.then(|| enter(&self.node.section));
        self.exceeded().is_none().then(start)
    }

    fn add(&self, spend: Spend) {
        let mut node = Some(&self.node);
        while let Some(n) = node {
            let total = {
                let mut s = match n.spent.lock() {
                    Ok(g) => g,
                    Err(p) => p.into_inner(),
                };
                s.add(&spend);
                *s
            };
            if let Some(kind) = n.limits.reached(&total) {
                n.end.mark(kind);
            }
            node = n.parent.as_ref();
        }
    }

    /// What this node and everything under it has spent.
    pub fn spent(&self) -> Spend {
        match self.node.spent.lock() {
            Ok(g) => *g,
            Err(p) => *p.into_inner(),
        }
    }

    /// The limit that ended this node (its own or the nearest ancestor's), if one did.
    pub fn exceeded(&self) -> Option<LimitKind> {
        let mut node = Some(&self.node);
        while let Some(n) = node {
            if let Some(kind) = n.end.hit.get() {
                return Some(*kind);
            }
            node = n.parent.as_ref();
        }
        None
    }

    /// Resolves when this node is exhausted (its limit or an ancestor's was reached).
    pub async fn exhausted(&self) {
        self.node.end.token.cancelled().await
    }

    /// True when this node or an ancestor has a limit (otherwise it can never be exhausted).
    pub fn is_limited(&self) -> bool {
        self.node.limited
    }

    /// True when this node or an ancestor has a budget in dollars: a run on a model without
    /// a price spends from it without adding to it, which its caller should say.
    pub fn is_cost_limited(&self) -> bool {
        let mut node = Some(&self.node);
        while let Some(n) = node {
            if n.limits.max_cost_nano_usd.is_some() {
                return true;
            }
            node = n.parent.as_ref();
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(n: u64) -> Spend {
        Spend::tokens(Usage {
            input_tokens: n,
            output_tokens: 0,
            ..Usage::default()
        })
    }

    fn max(tokens: u64) -> BudgetLimits {
        BudgetLimits {
            max_tokens: Some(tokens),
            ..BudgetLimits::default()
        }
    }

    #[test]
    fn a_childs_spend_counts_for_every_ancestor() {
        let root = Budget::unlimited();
        let run = root.child(BudgetLimits::default());
        let child = run.child(BudgetLimits::default());
        let grandchild = child.child(BudgetLimits::default());
        run.charge(tokens(5));
        grandchild.charge(tokens(7));
        assert_eq!(grandchild.spent(), tokens(7));
        assert_eq!(child.spent(), tokens(7));
        assert_eq!(run.spent(), tokens(12));
        assert_eq!(root.spent(), tokens(12));
        assert!(!run.is_limited());
        assert_eq!(run.exceeded(), None);
    }

    #[test]
    fn a_child_ends_at_the_smaller_of_its_own_limit_and_what_its_parent_has_left() {
        // The parent has 3000, spends 1000 itself: a child with its own 5000 gets 2000.
        let parent = Budget::unlimited().child(max(3000));
        parent.charge(tokens(1000));
        let child = parent.child(max(5000));
        assert!(child.is_limited());
        child.charge(tokens(1999));
        assert_eq!(child.exceeded(), None);
        child.charge(tokens(1));
        assert_eq!(child.exceeded(), Some(LimitKind::Tokens));
        assert_eq!(parent.exceeded(), Some(LimitKind::Tokens));
        // A child with a smaller limit of its own ends first, alone.
        let parent = Budget::unlimited().child(max(3000));
        let small = parent.child(max(100));
        let sibling = parent.child(BudgetLimits::default());
        small.charge(tokens(100));
        assert_eq!(small.exceeded(), Some(LimitKind::Tokens));
        assert_eq!(parent.exceeded(), None);
        assert_eq!(sibling.exceeded(), None);
    }

    #[tokio::test]
    async fn exhaustion_reaches_every_descendant_and_siblings_spend_together() {
        let parent = Budget::unlimited().child(max(3000));
        let a = parent.child(BudgetLimits::default());
        let b = parent.child(BudgetLimits::default());
        let under_b = b.child(BudgetLimits::default());
        a.charge(tokens(2200));
        assert_eq!(b.exceeded(), None);
        b.charge(tokens(2200));
        for n in [&parent, &a, &b, &under_b] {
            assert_eq!(n.exceeded(), Some(LimitKind::Tokens));
            n.exhausted().await;
        }
        assert_eq!(parent.spent(), tokens(4400));
    }

    #[test]
    fn dollars_are_a_budget_down_the_tree_and_unpriced_calls_add_nothing() {
        let dollars = |n: u64| {
            Spend::tokens(
                Usage {
                    input_tokens: 1,
                    ..Usage::default()
                }
                .priced(Some(n as f64)),
            )
        };
        let parent = Budget::unlimited().child(BudgetLimits {
            max_cost_nano_usd: Some(cadre_types::usd_to_nanos(2.0)),
            ..BudgetLimits::default()
        });
        let child = parent.child(BudgetLimits::default());
        assert!(child.is_cost_limited());
        assert!(!Budget::unlimited().child(max(10)).is_cost_limited());
        child.charge(dollars(1));
        child.charge(Spend::tokens(Usage::default().priced(None)));
        assert_eq!(parent.exceeded(), None);
        child.charge(dollars(1));
        assert_eq!(child.exceeded(), Some(LimitKind::Cost));
        assert_eq!(parent.exceeded(), Some(LimitKind::Cost));
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_of_a_node_ends_it_and_everything_under_it() {
        let parent = Budget::unlimited().child(BudgetLimits {
            wall_clock: Some(Duration::from_secs(30)),
            ..BudgetLimits::default()
        });
        let child = parent.child(BudgetLimits {
            wall_clock: Some(Duration::from_secs(600)),
            ..BudgetLimits::default()
        });
        let started = tokio::time::Instant::now();
        child.exhausted().await;
        assert_eq!(started.elapsed(), Duration::from_secs(30));
        assert_eq!(child.exceeded(), Some(LimitKind::WallClock));
        assert_eq!(parent.exceeded(), Some(LimitKind::WallClock));
    }

    #[test]
    fn no_call_starts_once_the_crossing_charge_is_in() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        // Siblings under one limited parent, each starting calls and charging them from
        // its own thread; a start sees the crossing charge's report or comes before it.
        for _ in 0..20 {
            let parent = Budget::unlimited().child(max(2_000));
            let crossed = Arc::new(AtomicBool::new(false));
            let (late, admitted) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    let node = parent.child(BudgetLimits::default());
                    let (crossed, late, admitted) =
                        (crossed.clone(), late.clone(), admitted.clone());
                    std::thread::spawn(move || {
                        while let Some(()) = node.start(|| {
                            admitted.fetch_add(1, Ordering::SeqCst);
                            if crossed.load(Ordering::SeqCst) {
                                late.fetch_add(1, Ordering::SeqCst);
                            }
                        }) {
                            std::thread::yield_now();
                            node.charge_then(tokens(7), |_| {
                                if node.exceeded().is_some() {
                                    crossed.store(true, Ordering::SeqCst);
                                }
                            });
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            assert!(crossed.load(Ordering::SeqCst));
            assert_eq!(
                late.load(Ordering::SeqCst),
                0,
                "calls started after the stop"
            );
            // Every admitted call was charged: the spend is what the calls cost.
            assert_eq!(
                parent.spent().usage.total(),
                7 * admitted.load(Ordering::SeqCst)
            );
        }
    }
}
