//! What run-level reports (JUnit, summary) say about the run as a whole,
//! beside its tasks: whether it was one shard, or a merge of several.

use crate::core::Shard;

/// The run a report covers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunScope {
    /// `ybs run --shard K/N`: this run took slice K of N.
    pub shard: Option<Shard>,
    /// `ybs report merge`: the output directories merged, in order.
    pub merged_from: Vec<String>,
    /// `ybs report merge`: the shards those directories say they hold.
    pub merged_shards: Vec<Shard>,
    /// Problems a reader must see, e.g. a shard missing from a merge.
    pub warnings: Vec<String>,
    /// `--min-pass-rate R`: under `--repeat`, a task that passed some runs
    /// passes at a rate of at least R and fails below it.
    pub min_pass_rate: Option<f64>,
}

impl RunScope {
    /// The scope of `ybs run --shard`.
    pub fn shard(shard: Option<Shard>) -> Self {
        Self {
            shard,
            ..Self::default()
        }
    }
}
