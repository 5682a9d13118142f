//! Helpers shared by the integration tests: parse a scenario, run it with
//! the trace and the invariant checker on, or collect the error it gives.

#![allow(dead_code)] // each test file uses a different subset

use hetsched_core::metrics::RunResults;
use hetsched_core::run;
use hetsched_core::scenario::{parse, Format, Scenario};
use hetsched_core::sim::RunOptions;

/// Parse a TOML scenario; a parse error fails the test with its message.
pub fn scn(text: &str) -> Scenario {
    parse(text, "test.toml", Format::Toml, &[]).unwrap_or_else(|e| panic!("{e}"))
}

/// Run a scenario with the trace recorded and the invariant checker on.
pub fn go(text: &str) -> RunResults {
    run(
        &scn(text),
        RunOptions {
            trace: true,
            check: true,
        },
        None,
        vec![],
        None,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The error message a scenario gives, at parse time or at run time; fails
/// the test if there is none.
pub fn err(text: &str) -> String {
    match parse(text, "bad.toml", Format::Toml, &[]) {
        Ok(s) => match run(&s, RunOptions::default(), None, vec![], None) {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}
