//! Per-call handles: label capping for `method` and `tool`, and the cache that resolves each
//! (method, tool) pair's series once so the data path only increments.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use foldhash::fast::RandomState;
use prometheus::{Histogram, IntCounter};
use thread_local::ThreadLocal;

use super::labels::{MAX_LABEL_BYTES, OTHER, RetryReason, SuppressReason};
use super::{CounterFamily, HistogramFamily};
use crate::classify::Outcome;
use crate::runtime::per_worker::PerWorker;

/// A map with foldhash (see [`CacheInner`]).
type FastMap<K, V> = HashMap<K, V, RandomState>;
type FastSet<K> = HashSet<K, RandomState>;

/// The families labelled by (method, tool), shared by the cache and every pair's handles.
pub(super) struct CallFamilies {
    /// `[method, tool, layer, outcome]`
    pub(super) calls: CounterFamily<4>,
    /// `[method, tool, outcome]`
    pub(super) duration: HistogramFamily<3>,
    /// `[method, tool, reason]`
    pub(super) retries: CounterFamily<3>,
    /// `[method, tool, reason]`
    pub(super) suppressed: CounterFamily<3>,
}

/// Resolves [`CallHandles`] for a (method, tool) pair, capping distinct values.
pub(super) struct CallCache {
    families: Arc<CallFamilies>,
    max_methods: usize,
    max_tools: usize,
    inner: RwLock<CacheInner>,
    /// Each thread's copy of the pairs it met, by the values as called: a call's handles
    /// without the shared lock and without an `Arc` clone, both writes to lines every worker
    /// thread writes on every call (`with_handles`). Mappings never change once made (the
    /// capped sets only grow), so a copy never goes stale.
    local: ThreadLocal<RefCell<LocalPairs>>,
}

/// A thread's pairs by raw (method, tool), at most [`LOCAL_PAIRS`] of them.
#[derive(Default)]
struct LocalPairs {
    pairs: FastMap<Box<str>, FastMap<Box<str>, CallHandles>>,
    len: usize,
}

/// Raw (method, tool) values one thread keeps: agents choose them, so past this many the
/// thread asks the shared cache (whose own sets are capped) as before.
pub(super) const LOCAL_PAIRS: usize = 256;

/// The metric handles for one call, from [`super::Metrics::call`].
///
/// Cheap to clone. Recording never formats or looks up labels after the first time a given
/// outcome or reason is seen for this (method, tool) pair.
#[derive(Clone)]
pub struct CallHandles {
    pair: Arc<PairHandles>,
}

/// Hashed with foldhash, not SipHash: a call looks up four short keys here, and SipHash is
/// the slower of the two on short keys. The keys come from
/// agents, but the sets are capped (`metrics.max_methods`, `metrics.max_tools`) and the seed
/// is random per process, so crafted collisions cannot grow the work past the caps.
#[derive(Default)]
struct CacheInner {
    /// Method values admitted under the cap (they are exported as themselves).
    methods: FastSet<Box<str>>,
    /// Tool values admitted under the cap; "" is never stored, it is always allowed.
    tools: FastSet<Box<str>>,
    /// Capped method → capped tool → handles. Bounded by (max_methods + 1) × (max_tools + 2).
    pairs: FastMap<Box<str>, FastMap<Box<str>, Arc<PairHandles>>>,
}

/// Handles for one capped (method, tool) pair.
///
/// Each outcome's and reason's series is resolved on first use rather than up front: resolving
/// all of them eagerly would export 11 histograms (16 lines each) of zeros for every tool.
struct PairHandles {
    families: Arc<CallFamilies>,
    method: Box<str>,
    tool: Box<str>,
    outcomes: [OnceLock<OutcomeHandles>; Outcome::ALL.len()],
    retries: [OnceLock<PerWorker<IntCounter>>; RetryReason::COUNT],
    suppressed: [OnceLock<PerWorker<IntCounter>>; SuppressReason::COUNT],
}

struct OutcomeHandles {
    calls: PerWorker<IntCounter>,
    duration: PerWorker<Histogram>,
}

// === impl CallCache ===

impl CallCache {
    pub(super) fn new(families: CallFamilies, max_methods: usize, max_tools: usize) -> Self {
        CallCache {
            families: Arc::new(families),
            max_methods,
            max_tools,
            inner: RwLock::new(CacheInner::default()),
            local: ThreadLocal::new(),
        }
    }

    /// `f` of the pair's handles, from this thread's copy when it has one.
    pub(super) fn with_handles<T>(
        &self,
        method: &str,
        tool: &str,
        f: impl FnOnce(&CallHandles) -> T,
    ) -> T {
        let local = self.local.get_or_default();
        if let Ok(known) = local.try_borrow()
            && let Some(handles) = known.pairs.get(method).and_then(|tools| tools.get(tool))
        {
            return f(handles);
        }
        let handles = self.handles(method, tool);
        if let Ok(mut known) = local.try_borrow_mut()
            && known.len < LOCAL_PAIRS
        {
            known.len += 1;
            known
                .pairs
                .entry(method.into())
                .or_default()
                .insert(tool.into(), handles.clone());
        }
        f(&handles)
    }

    pub(super) fn handles(&self, method: &str, tool: &str) -> CallHandles {
        if let Some(pair) = self
            .read()
            .find(method, tool, self.max_methods, self.max_tools)
        {
            return CallHandles { pair };
        }
        let mut inner = self.write();
        // Admission is decided again under the write lock: another call may have filled the
        // cap, or created this pair, since the read lock was released.
        let method = admit(&mut inner.methods, self.max_methods, method);
        let tool = if tool.is_empty() {
            ""
        } else {
            admit(&mut inner.tools, self.max_tools, tool)
        };
        let pair = inner
            .pairs
            .entry(method.into())
            .or_default()
            .entry(tool.into())
            .or_insert_with(|| Arc::new(PairHandles::new(&self.families, method, tool)));
        CallHandles { pair: pair.clone() }
    }

    // A poisoned lock only means another thread panicked while holding it; the sets and maps
    // inside are still consistent (every mutation is a single insert), so keep going.
    fn read(&self) -> RwLockReadGuard<'_, CacheInner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, CacheInner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
}

// === impl CacheInner ===

impl CacheInner {
    /// The pair's handles if every decision can be made without admitting a new value.
    fn find(
        &self,
        method: &str,
        tool: &str,
        max_methods: usize,
        max_tools: usize,
    ) -> Option<Arc<PairHandles>> {
        let method = capped(&self.methods, max_methods, method)?;
        let tool = if tool.is_empty() {
            ""
        } else {
            capped(&self.tools, max_tools, tool)?
        };
        self.pairs.get(method)?.get(tool).cloned()
    }
}

/// The label for `value` in a capped set, or `None` when it would have to be admitted first.
fn capped<'a>(set: &FastSet<Box<str>>, cap: usize, value: &'a str) -> Option<&'a str> {
    if value.len() > MAX_LABEL_BYTES {
        Some(OTHER)
    } else if set.contains(value) {
        Some(value)
    } else if set.len() >= cap {
        Some(OTHER)
    } else {
        None
    }
}

/// The label for `value`, admitting it into the set while the cap allows.
fn admit<'a>(set: &mut FastSet<Box<str>>, cap: usize, value: &'a str) -> &'a str {
    capped(set, cap, value).unwrap_or_else(|| {
        set.insert(value.into());
        value
    })
}

// === impl CallHandles ===

impl CallHandles {
    /// Counts one finished call with its outcome (and thus layer), and observes its duration.
    pub fn record(&self, outcome: Outcome, duration: Duration) {
        let h = self.pair.outcome(outcome);
        h.calls.here().inc();
        h.duration.here().observe(duration.as_secs_f64());
    }

    /// Counts one re-send of this call.
    pub fn retry(&self, reason: RetryReason) {
        self.pair.retries[reason as usize]
            .get_or_init(|| {
                self.pair
                    .reason(&self.pair.families.retries, reason.as_str())
            })
            .here()
            .inc();
    }

    /// Counts one retry that was wanted but not made.
    pub fn suppressed(&self, reason: SuppressReason) {
        self.pair.suppressed[reason as usize]
            .get_or_init(|| {
                self.pair
                    .reason(&self.pair.families.suppressed, reason.as_str())
            })
            .here()
            .inc();
    }

    /// The exported `method` label (the method itself, or `_other` past the cap).
    pub fn method_label(&self) -> &str {
        &self.pair.method
    }

    /// The exported `tool` label ("" for methods other than tools/call, or `_other`).
    pub fn tool_label(&self) -> &str {
        &self.pair.tool
    }
}

impl std::fmt::Debug for CallHandles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallHandles")
            .field("method", &self.pair.method)
            .field("tool", &self.pair.tool)
            .finish()
    }
}

// === impl PairHandles ===

impl PairHandles {
    fn new(families: &Arc<CallFamilies>, method: &str, tool: &str) -> Self {
        PairHandles {
            families: families.clone(),
            method: method.into(),
            tool: tool.into(),
            outcomes: std::array::from_fn(|_| OnceLock::new()),
            retries: std::array::from_fn(|_| OnceLock::new()),
            suppressed: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    fn outcome(&self, outcome: Outcome) -> &OutcomeHandles {
        // `Outcome::ALL` is in declaration order, so the discriminant is the index.
        self.outcomes[outcome as usize].get_or_init(|| {
            let (method, tool, name) = (&*self.method, &*self.tool, outcome.as_str());
            OutcomeHandles {
                calls: self
                    .families
                    .calls
                    .get([method, tool, outcome.layer().as_str(), name]),
                duration: self.families.duration.get([method, tool, name]),
            }
        })
    }

    fn reason(&self, family: &CounterFamily<3>, reason: &str) -> PerWorker<IntCounter> {
        family.get([&self.method, &self.tool, reason])
    }
}
