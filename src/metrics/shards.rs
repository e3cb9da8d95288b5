//! Series every call writes, kept once per worker and summed when scraped.
//!
//! Why: a counter is one atomic in memory both workers write. At 64 agents every call adds to
//! the call counter, the duration histogram (its count, bucket and sum), the in-flight gauge
//! (up, and down) and the request and byte counters, and each write pulls the cache line from
//! the other core. Measured on the harness's rig (wrk, 64 agents, 2 workers): with these
//! writes left out, strata's user time per call fell by ~0.2–0.3 µs of ~4.2. With a shard per
//! worker each line stays on its core; the sum is made when Prometheus scrapes, so a scrape
//! still sees every call counted before it.
//!
//! A thread writes the shard [`enter`] gave it (a worker's own), or shard 0 (the main thread,
//! tests). At most [`SHARDS`] shards: workers past the third share one, which only costs
//! them the contention there was before, while a series costs [`SHARDS`] times its memory.

use std::cell::Cell;
use std::collections::HashMap;
use std::collections::hash_map::Entry;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Bucket, Counter, Gauge, Histogram, Metric, MetricFamily, MetricType};

/// Shards per series: one for threads that are not workers, three for workers.
pub(super) const SHARDS: usize = 4;

thread_local! {
    static SHARD: Cell<usize> = const { Cell::new(0) };
}

/// Makes this thread write worker `worker`'s shard from now on.
pub fn enter(worker: usize) {
    SHARD.set(1 + worker % (SHARDS - 1));
}

/// One value per shard: a series (`IntCounter`, `Histogram`, `IntGauge`) or a family of them.
#[derive(Clone)]
pub(super) struct Shards<T>([T; SHARDS]);

impl<T> Shards<T> {
    /// Each shard made by `make`.
    pub(super) fn try_new<E>(mut make: impl FnMut() -> Result<T, E>) -> Result<Self, E> {
        Ok(Shards([make()?, make()?, make()?, make()?]))
    }

    /// This thread's shard.
    #[inline]
    pub(super) fn here(&self) -> &T {
        &self.0[SHARD.get() % SHARDS]
    }

    /// Each shard's `f`.
    pub(super) fn map<U>(&self, f: impl FnMut(&T) -> U) -> Shards<U> {
        Shards(self.0.each_ref().map(f))
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.0.iter()
    }
}

/// Registered in place of the shards: one family, each series summed over the shards.
pub(super) struct Merged<C>(pub(super) Shards<C>);

impl<C: Collector> Collector for Merged<C> {
    fn desc(&self) -> Vec<&Desc> {
        // Every shard has the same descriptors (same options); the first speaks for all.
        self.0.0[0].desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut shards = self.0.iter().map(Collector::collect);
        let Some(mut families) = shards.next() else {
            return Vec::new();
        };
        for other in shards {
            for (family, more) in families.iter_mut().zip(other) {
                add_family(family, more);
            }
        }
        families
    }
}

/// Adds `more`'s series into `into`'s: the same labels summed, new ones appended.
fn add_family(into: &mut MetricFamily, more: MetricFamily) {
    let kind = into.get_field_type();
    // Every shard has the same label names in the same order: the values tell series apart.
    let values = |m: &Metric| -> Vec<String> {
        m.get_label().iter().map(|l| l.value().to_owned()).collect()
    };
    let mut at: HashMap<Vec<String>, usize> = into
        .get_metric()
        .iter()
        .enumerate()
        .map(|(i, m)| (values(m), i))
        .collect();
    for metric in more.get_metric() {
        match at.entry(values(metric)) {
            Entry::Occupied(i) => {
                if let Some(sum) = into.mut_metric().get_mut(*i.get()) {
                    add_metric(kind, sum, metric);
                }
            }
            Entry::Vacant(slot) => {
                slot.insert(into.get_metric().len());
                into.mut_metric().push(metric.clone());
            }
        }
    }
}

/// `into` += `more`, for the kinds strata shards: counters, gauges, histograms.
fn add_metric(kind: MetricType, into: &mut Metric, more: &Metric) {
    match kind {
        MetricType::COUNTER => {
            let mut sum = Counter::default();
            sum.set_value(into.get_counter().get_value() + more.get_counter().get_value());
            into.set_counter(sum);
        }
        MetricType::GAUGE => {
            let mut sum = Gauge::default();
            sum.set_value(into.get_gauge().get_value() + more.get_gauge().get_value());
            into.set_gauge(sum);
        }
        MetricType::HISTOGRAM => {
            let (a, b) = (into.get_histogram(), more.get_histogram());
            let mut sum = Histogram::default();
            sum.set_sample_count(a.get_sample_count() + b.get_sample_count());
            sum.set_sample_sum(a.get_sample_sum() + b.get_sample_sum());
            // The same bounds in the same order: every shard was made with the same buckets.
            let buckets = a
                .get_bucket()
                .iter()
                .zip(b.get_bucket())
                .map(|(x, y)| {
                    let mut bucket = Bucket::default();
                    bucket.set_upper_bound(x.upper_bound());
                    bucket.set_cumulative_count(x.cumulative_count() + y.cumulative_count());
                    bucket
                })
                .collect();
            sum.set_bucket(buckets);
            into.set_histogram(sum);
        }
        // Not made by strata's shards.
        MetricType::SUMMARY | MetricType::UNTYPED => {}
    }
}
