//! Errors. Nothing a user can write in a scenario makes the engine panic:
//! every bad input becomes a [`SimError::Scenario`] naming the path of the
//! field and what is allowed.

use crate::time::SimTime;
use thiserror::Error;

/// Everything that can go wrong in hetsched's core.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SimError {
    /// Invalid scenario input. The message starts with the path of the field.
    #[error("{0}")]
    Scenario(String),
    /// A policy made an invalid request, or a Python policy raised.
    #[error("{policy} at t={time}: {message}")]
    Policy {
        /// Which component, e.g. `scheduler "cfs"`.
        policy: String,
        /// Simulated time of the failure.
        time: SimTime,
        /// What was wrong.
        message: String,
    },
    /// The invariant checker found a broken invariant.
    #[error("invariant broken at t={time}: {message}")]
    Invariant {
        /// Simulated time.
        time: SimTime,
        /// Which invariant.
        message: String,
    },
    /// The run was interrupted (Ctrl-C from the progress callback).
    #[error("interrupted: {0}")]
    Interrupted(String),
}

/// Shorthand for a scenario error at `path`.
pub fn at(path: impl AsRef<str>, msg: impl AsRef<str>) -> SimError {
    let p = path.as_ref();
    if p.is_empty() {
        SimError::Scenario(msg.as_ref().to_string())
    } else {
        SimError::Scenario(format!("{}: {}", p, msg.as_ref()))
    }
}
