//! A log-linear latency histogram in nanoseconds: exact below 256 ns, then 128 buckets per
//! power of two (each bucket under 0.8 % wide), 7,424 counters in all. Cheap to record (a
//! shift and an add) and to merge, so every agent keeps its own and the round merges them.

/// Buckets per power of two above the exact range.
const SUB: u64 = 128;
/// Values below this are counted exactly.
const EXACT: u64 = 2 * SUB;
const LEN: usize = (EXACT + (64 - 8) * SUB) as usize;

#[derive(Clone)]
pub(crate) struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
}

impl Histogram {
    pub(crate) fn new() -> Self {
        Histogram {
            counts: vec![0; LEN],
            total: 0,
            max: 0,
        }
    }

    pub(crate) fn record(&mut self, ns: u64) {
        self.counts[index(ns)] += 1;
        self.total += 1;
        self.max = self.max.max(ns);
    }

    pub(crate) fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }

    pub(crate) fn count(&self) -> u64 {
        self.total
    }

    /// The value at quantile `q` (0..=1), as the middle of its bucket, in nanoseconds.
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return middle(i).min(self.max);
            }
        }
        self.max
    }
}

fn index(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let msb = 63 - u64::from(v.leading_zeros());
    let shift = msb - 7;
    (EXACT + (msb - 8) * SUB + ((v >> shift) - SUB)) as usize
}

fn middle(i: usize) -> u64 {
    let i = i as u64;
    if i < EXACT {
        return i;
    }
    let k = (i - EXACT) / SUB;
    let shift = k + 1;
    let lower = ((i - EXACT) % SUB + SUB) << shift;
    lower + (1 << shift) / 2
}
