//! Budgets that end runaway runs (docs/agent-loop.md, docs/security.md S10), and the 85%
//! wrap-up warning.

use std::time::{Duration, Instant};

use crate::core::{Cost, Reason, Usage};

/// Fully resolved limits of one task.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub max_iterations: u32,
    pub timeout: Option<Duration>,
    pub max_total_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub max_tool_output_chars: usize,
    /// At most this many tool calls in one turn (S10); more are refused.
    pub max_tool_calls_per_turn: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_iterations: 25,
            timeout: None,
            max_total_tokens: None,
            max_cost_usd: None,
            max_tool_output_chars: 10_000,
            max_tool_calls_per_turn: 32,
        }
    }
}

/// The fraction of a limit at which the model is told to wrap up.
pub const WRAP_UP_AT: f64 = 0.85;

/// Tracks consumption against the limits.
#[derive(Debug)]
pub struct Budget {
    limits: Limits,
    started: Instant,
    pub iterations: u32,
    pub usage: Usage,
    pub cost: Cost,
    warned: bool,
}

impl Budget {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            started: Instant::now(),
            iterations: 0,
            usage: Usage::default(),
            cost: Cost::Usd(0.0),
            warned: false,
        }
    }

    /// Counts what earlier halves of a paused task spent (`ybs resume`).
    pub fn carry(&mut self, iterations: u32, usage: Usage, cost: Cost, elapsed: Duration) {
        self.iterations += iterations;
        self.usage.add(usage);
        self.cost = self.cost.plus(cost);
        self.started = self.started.checked_sub(elapsed).unwrap_or(self.started);
    }

    /// Whether the wrap-up warning was given (in this half or, once
    /// [`Self::carry_warned`], an earlier one).
    pub fn warned(&self) -> bool {
        self.warned
    }

    /// `ybs resume`: an earlier half gave the warning already; it is not
    /// given again.
    pub fn carry_warned(&mut self, warned: bool) {
        self.warned |= warned;
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Time left before the task timeout, if there is one.
    pub fn remaining(&self) -> Option<Duration> {
        self.limits
            .timeout
            .map(|timeout| timeout.saturating_sub(self.started.elapsed()))
    }

    /// The limit already reached, if any, checked before each request.
    pub fn exceeded(&self) -> Option<Reason> {
        if self.iterations >= self.limits.max_iterations {
            return Some(Reason::MaxIterations);
        }
        if self.remaining().is_some_and(|left| left.is_zero()) {
            return Some(Reason::Timeout);
        }
        if self
            .limits
            .max_total_tokens
            .is_some_and(|max| self.usage.total() >= max)
        {
            return Some(Reason::TokenBudget);
        }
        if let (Some(max), Some(spent)) = (self.limits.max_cost_usd, self.cost.usd())
            && spent >= max
        {
            return Some(Reason::CostBudget);
        }
        None
    }

    /// Returns a wrap-up message the first time any limit passes 85%.
    #[expect(clippy::cast_precision_loss, reason = "ratios of small counts")]
    pub fn wrap_up_warning(&mut self) -> Option<String> {
        if self.warned {
            return None;
        }
        let mut near = Vec::new();
        if f64::from(self.iterations + 1) >= f64::from(self.limits.max_iterations) * WRAP_UP_AT {
            near.push(format!(
                "iteration {} of {}",
                self.iterations + 1,
                self.limits.max_iterations
            ));
        }
        if let Some(timeout) = self.limits.timeout
            && self.elapsed().as_secs_f64() >= timeout.as_secs_f64() * WRAP_UP_AT
        {
            near.push(format!(
                "{}s of {}s",
                self.elapsed().as_secs(),
                timeout.as_secs()
            ));
        }
        if let Some(max) = self.limits.max_total_tokens
            && self.usage.total() as f64 >= max as f64 * WRAP_UP_AT
        {
            near.push(format!("{} of {max} tokens", self.usage.total()));
        }
        if let (Some(max), Some(spent)) = (self.limits.max_cost_usd, self.cost.usd())
            && spent >= max * WRAP_UP_AT
        {
            near.push(format!("${spent:.4} of ${max:.4}"));
        }
        if near.is_empty() {
            return None;
        }
        self.warned = true;
        Some(format!(
            "[ybs] You are close to this task's limits ({}). Finish now: make the last necessary change and answer without further tool calls.",
            near.join(", ")
        ))
    }
}
