//! Metric series kept once per worker (`runtime/per_worker.rs`) and summed, series by series,
//! when Prometheus scrapes: a scrape still sees every call counted before it.
//!
//! Why: series shared by the workers move their cache lines between cores on every call; a
//! copy per worker takes most of the metric writes' cost out of a call's user time (measured
//! in `bench/README.md`).

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Bucket, Counter, Gauge, Histogram, Metric, MetricFamily, MetricType};

use crate::runtime::per_worker::PerWorker;

/// Registered in place of the shards: one family, each series summed over the shards.
pub(super) struct Merged<C>(pub(super) PerWorker<C>);

impl<C: Collector> Collector for Merged<C> {
    fn desc(&self) -> Vec<&Desc> {
        // Every shard has the same descriptors (same options); the first speaks for all.
        self.0.iter().next().map_or_else(Vec::new, Collector::desc)
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
