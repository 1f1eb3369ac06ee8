//! A tiny in-memory store for core tests: plans are applied to a `MemoryView` under a clock
//! the test moves by hand.

use std::convert::Infallible;

use crate::Event;
use crate::plan::{Plan, WriteContext};
use crate::time::UnixMillis;
use crate::view::MemoryView;

pub(crate) const T0: UnixMillis = UnixMillis(1_795_219_200_000);

pub(crate) struct Sim {
    pub(crate) view: MemoryView,
    pub(crate) now: UnixMillis,
    /// Every event committed so far, in order.
    pub(crate) events: Vec<Event>,
}

impl Sim {
    pub(crate) fn new() -> Sim {
        Sim { view: MemoryView::default(), now: T0, events: Vec::new() }
    }

    pub(crate) fn ctx(&self) -> WriteContext {
        WriteContext { now: self.now, revision: self.view.revision }
    }

    pub(crate) fn advance(&mut self, millis: u64) {
        self.now = self.now.plus_millis(millis);
    }

    /// Plans against the current state and applies the plan, like the store's writer.
    pub(crate) fn run<T>(&mut self, plan: impl FnOnce(&MemoryView, &WriteContext) -> Result<Plan<T>, Infallible>) -> T {
        let ctx = self.ctx();
        let plan = match plan(&self.view, &ctx) {
            Ok(plan) => plan,
            Err(never) => match never {},
        };
        self.view.apply(&plan);
        self.events.extend(plan.events.iter().cloned());
        plan.outcome
    }

    pub(crate) fn read<T>(&self, read: impl FnOnce(&MemoryView) -> Result<T, Infallible>) -> T {
        match read(&self.view) {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }

    /// The ops of every committed event on keys of this id, as history would show them.
    pub(crate) fn ops_of(&self, id: &str) -> Vec<crate::ops::history::HistoryOp> {
        self.events
            .iter()
            .filter(|e| crate::keyspace::classify(&e.key).1 == id)
            .map(|e| crate::ops::history::HistoryOp::of(e.kind, e.action))
            .collect()
    }
}

/// A small deterministic generator (xorshift64) for randomized tests: a failing seed replays.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        // Spread small seeds over the whole state; xorshift never leaves zero.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).max(1))
    }

    /// A number below `n`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
