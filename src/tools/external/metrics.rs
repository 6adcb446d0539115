//! Call metrics per external tool: counts and durations.
//!
//! A [`Metrics`] is shared by the tools of one task (or one `ybs tools
//! invoke`); each finished process records one [`Sample`]. The runner
//! emits the snapshot in the transcript and merges it into the persisted
//! totals that `ybs tools list` shows ([`super::cache::record_metrics`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::core::event::ToolMetrics;

/// Durations kept per tool for the percentiles (the most recent ones).
pub const KEPT_DURATIONS: usize = 512;

/// How one call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
    Timeout,
}

/// The counts and recent durations of one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolStats {
    pub calls: u64,
    pub successes: u64,
    pub failures: u64,
    pub timeouts: u64,
    pub total_ms: u64,
    /// The most recent durations, oldest first, at most [`KEPT_DURATIONS`].
    #[serde(default)]
    pub durations_ms: Vec<u64>,
}

impl ToolStats {
    pub fn record(&mut self, outcome: Outcome, duration: Duration) {
        let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        self.calls += 1;
        match outcome {
            Outcome::Success => self.successes += 1,
            Outcome::Failure => self.failures += 1,
            Outcome::Timeout => {
                self.failures += 1;
                self.timeouts += 1;
            }
        }
        self.total_ms = self.total_ms.saturating_add(millis);
        self.durations_ms.push(millis);
        self.trim();
    }

    /// Adds `other`'s counts and durations (newer) to these.
    pub fn merge(&mut self, other: &Self) {
        self.calls += other.calls;
        self.successes += other.successes;
        self.failures += other.failures;
        self.timeouts += other.timeouts;
        self.total_ms = self.total_ms.saturating_add(other.total_ms);
        self.durations_ms.extend_from_slice(&other.durations_ms);
        self.trim();
    }

    fn trim(&mut self) {
        if self.durations_ms.len() > KEPT_DURATIONS {
            let cut = self.durations_ms.len() - KEPT_DURATIONS;
            self.durations_ms.drain(..cut);
        }
    }

    /// The `p`th percentile (nearest rank) of the kept durations.
    pub fn percentile(&self, p: u64) -> u64 {
        if self.durations_ms.is_empty() {
            return 0;
        }
        let mut sorted = self.durations_ms.clone();
        sorted.sort_unstable();
        let count = sorted.len() as u64;
        let rank = (p * count).div_ceil(100).clamp(1, count);
        sorted[usize::try_from(rank - 1).unwrap_or(0)]
    }

    /// The wire form, under `name`.
    pub fn summary(&self, name: &str) -> ToolMetrics {
        ToolMetrics {
            name: name.to_owned(),
            calls: self.calls,
            successes: self.successes,
            failures: self.failures,
            timeouts: self.timeouts,
            total_ms: self.total_ms,
            p50_ms: self.percentile(50),
            p95_ms: self.percentile(95),
        }
    }
}

/// Metrics of several tools, shared by the tools and their owner.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// Keyed by (tool name, executable path).
    stats: Arc<Mutex<BTreeMap<(String, String), ToolStats>>>,
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn record(&self, name: &str, path: &str, outcome: Outcome, duration: Duration) {
        let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        stats
            .entry((name.to_owned(), path.to_owned()))
            .or_default()
            .record(outcome, duration);
    }

    /// Everything recorded so far: ((name, path), stats).
    pub fn snapshot(&self) -> Vec<((String, String), ToolStats)> {
        let stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        stats
            .iter()
            .map(|(key, stats)| (key.clone(), stats.clone()))
            .collect()
    }

    /// The wire form of everything recorded, one entry per tool name.
    pub fn summaries(&self) -> Vec<ToolMetrics> {
        let mut by_name: BTreeMap<String, ToolStats> = BTreeMap::new();
        for ((name, _), stats) in self.snapshot() {
            by_name.entry(name).or_default().merge(&stats);
        }
        by_name
            .iter()
            .map(|(name, stats)| stats.summary(name))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_percentiles() {
        let metrics = Metrics::new();
        for millis in 1..=100 {
            metrics.record("t", "/t", Outcome::Success, Duration::from_millis(millis));
        }
        metrics.record("t", "/t", Outcome::Timeout, Duration::from_millis(1000));
        metrics.record("t", "/t", Outcome::Failure, Duration::from_millis(0));
        let summary = &metrics.summaries()[0];
        assert_eq!(summary.calls, 102);
        assert_eq!(summary.successes, 100);
        assert_eq!(summary.failures, 2);
        assert_eq!(summary.timeouts, 1);
        assert_eq!(summary.total_ms, 5050 + 1000);
        assert_eq!(summary.p50_ms, 50);
        assert_eq!(summary.p95_ms, 96);
        assert_eq!(ToolStats::default().percentile(95), 0);
    }

    #[test]
    fn merge_keeps_the_most_recent_durations() {
        let mut old = ToolStats::default();
        for _ in 0..KEPT_DURATIONS {
            old.record(Outcome::Success, Duration::from_millis(1));
        }
        let mut new = ToolStats::default();
        new.record(Outcome::Failure, Duration::from_millis(7));
        old.merge(&new);
        assert_eq!(old.calls, KEPT_DURATIONS as u64 + 1);
        assert_eq!(old.durations_ms.len(), KEPT_DURATIONS);
        assert_eq!(old.durations_ms.last(), Some(&7));
    }
}
