//! `--jobs N` (N > 1): the worktrees of a batch made when their slots
//! come (docs/performance.md). Every task was checked before the run;
//! a [`Feed`] thread makes the worktree of each task that waits for one,
//! in the batch's order, overlapped with the tasks already running, and
//! never more than `--jobs` plus [`LOOK_AHEAD`] at once: a task's
//! worktree counts from when it is made until its task ends (a kept
//! worktree of a failed task no longer counts).

use std::sync::{Condvar, Mutex, OnceLock, PoisonError};

use super::prepare::provider::Cassettes;
use super::{PrepareError, PreparedTask, RedactingSink, RunContext, TaskResult};
use super::{breaker, discard, materialize};
use crate::core::Reason;

/// Worktrees made ahead of the slots that will take them.
pub const LOOK_AHEAD: usize = 2;

/// One deferred task's worktree, as the feed and the batch see it.
enum Slot {
    /// Not made yet.
    Waiting,
    /// Made (or failed); the batch has not taken it.
    Made(Box<Result<PreparedTask, PrepareError>>),
    /// Taken by the batch, or never to be made (the task will not start).
    Done,
}

/// The batch's deferred tasks, made one at a time by [`Self::work`].
pub struct Feed {
    slots: Vec<Mutex<Slot>>,
    /// Worktrees that may still be made before one goes; `None`: stop.
    allowance: Mutex<Option<usize>>,
    turn: Condvar,
    made: tokio::sync::Notify,
}

impl Feed {
    /// A feed for `prepared` under `jobs`; `None` when no task waits for
    /// a worktree.
    pub fn new(prepared: &[PreparedTask], jobs: usize) -> Option<Self> {
        if prepared.iter().all(|task| task.deferred.is_none()) {
            return None;
        }
        Some(Self {
            slots: prepared
                .iter()
                .map(|task| {
                    Mutex::new(if task.deferred.is_some() {
                        Slot::Waiting
                    } else {
                        Slot::Done
                    })
                })
                .collect(),
            allowance: Mutex::new(Some(jobs.max(1) + LOOK_AHEAD)),
            turn: Condvar::new(),
            made: tokio::sync::Notify::new(),
        })
    }

    /// The feed's thread: makes each deferred task's worktree in order,
    /// waiting while the allowance is spent, until every one is made or
    /// [`Self::stop`].
    pub fn work(&self, run: &RunContext, prepared: &[PreparedTask]) {
        let mut cassettes = Cassettes::default();
        for (index, task) in prepared.iter().enumerate() {
            if !matches!(*self.slot(index), Slot::Waiting) {
                continue;
            }
            if !self.take_turn() {
                return;
            }
            let made = materialize(run, &mut cassettes, task);
            let mut slot = self.slot(index);
            if matches!(*slot, Slot::Waiting) {
                *slot = Slot::Made(Box::new(made));
                drop(slot);
                self.made.notify_waiters();
            } else {
                // The task will not start (skipped, interrupted).
                drop(slot);
                if let Ok(task) = made {
                    discard(std::slice::from_ref(&task));
                }
                self.release();
            }
        }
    }

    /// The made task `index`, waited for: `None` if it will never be
    /// (the feed stopped).
    pub async fn take(&self, index: usize) -> Option<Result<PreparedTask, PrepareError>> {
        loop {
            let notified = self.made.notified();
            {
                let mut slot = self.slot(index);
                match std::mem::replace(&mut *slot, Slot::Done) {
                    Slot::Made(made) => return Some(*made),
                    Slot::Done => return None,
                    Slot::Waiting => *slot = Slot::Waiting,
                }
            }
            notified.await;
        }
    }

    /// The task to start in slot `(index, ready)`: `checked` itself, or,
    /// deferred, the one made for it, kept in `ready`. A worktree that
    /// could not be made skips the task, saying why.
    pub async fn made<'t>(
        feed: Option<&Self>,
        run: &RunContext,
        checked: &'t PreparedTask,
        (index, ready): (usize, &'t OnceLock<PreparedTask>),
        sink: &Mutex<RedactingSink<'_>>,
    ) -> Result<&'t PreparedTask, TaskResult> {
        let Some(feed) = feed.filter(|_| checked.deferred.is_some()) else {
            return Ok(checked);
        };
        let (reason, message) = match feed.take(index).await {
            Some(Ok(made)) => return Ok(ready.get_or_init(|| made)),
            Some(Err(error)) => {
                let hint = error
                    .hint
                    .map(|hint| format!(" ({hint})"))
                    .unwrap_or_default();
                (
                    Reason::GitError,
                    format!("not started: {}{hint}", error.message),
                )
            }
            None => (
                Reason::Interrupted,
                "not started: the run stopped before its worktree was made".to_owned(),
            ),
        };
        let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
        Err(breaker::skip(run, checked, reason, message, &mut *sink))
    }

    /// Task `index` will not start: its worktree, made or not, goes.
    pub fn drop_task(&self, index: usize) {
        let before = std::mem::replace(&mut *self.slot(index), Slot::Done);
        if let Slot::Made(made) = before {
            if let Ok(task) = *made {
                discard(std::slice::from_ref(&task));
            }
            self.release();
        }
    }

    /// A task that had its worktree made ended: another may be made.
    pub fn release(&self) {
        let mut allowance = self.allowance();
        if let Some(left) = allowance.as_mut() {
            *left += 1;
        }
        drop(allowance);
        self.turn.notify_all();
    }

    /// No more worktrees are made; the ones made and not taken go.
    pub fn stop(&self) {
        *self.allowance() = None;
        self.turn.notify_all();
        for index in 0..self.slots.len() {
            self.drop_task(index);
        }
        self.made.notify_waiters();
    }

    /// Waits for the allowance to make one more worktree; `false` once
    /// stopped.
    fn take_turn(&self) -> bool {
        let mut allowance = self.allowance();
        loop {
            match allowance.as_mut() {
                None => return false,
                Some(0) => {
                    allowance = self
                        .turn
                        .wait(allowance)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                Some(left) => {
                    *left -= 1;
                    return true;
                }
            }
        }
    }

    fn slot(&self, index: usize) -> std::sync::MutexGuard<'_, Slot> {
        self.slots[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn allowance(&self) -> std::sync::MutexGuard<'_, Option<usize>> {
        self.allowance
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Stops its feed when dropped: however the batch ends, the feed's
/// thread ends and the worktrees made for no task go.
pub struct StopOnDrop<'f>(pub &'f Feed);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}
