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

/// Patel's cpuset partition of the `patel-opteron-8` preset: 4 × 800 MHz,
/// 2 × 1400 MHz, 2 × 2300 MHz.
pub const PATEL_CPUSETS: &str = r#"
[[cpusets]]
name = "slow"
cpus = [0, 1, 2, 3]
mhz = 800
[[cpusets]]
name = "medium"
cpus = [4, 5]
mhz = 1400
[[cpusets]]
name = "fast"
cpus = [6, 7]
mhz = 2300
"#;

/// A random machine and workload for property tests. `head` holds the
/// top-level lines (duration, seed, scheduler); `big_extra` extra lines of
/// the `big` CPU type. `clusters` are (type selector, cores, SMT threads);
/// `progs` are (kind selector, threads, work ms, sleep ms, nice, pinned).
pub fn random_scenario(
    head: &str,
    big_extra: &str,
    clusters: &[(u32, u32, u32)],
    progs: &[(u8, u32, u32, u32, i32, bool)],
) -> String {
    let mut s = head.to_string();
    s += &format!(
        "[machine.types.big]\ncapacity = 1024\nsmt_factor = 0.7\n{big_extra}[machine.types.little]\ncapacity = 400\n"
    );
    for (i, (cap, cores, smt)) in clusters.iter().enumerate() {
        let ty = if cap % 2 == 0 { "big" } else { "little" };
        s += &format!(
            "[[machine.clusters]]\ntype = \"{ty}\"\ncores = {cores}\nsmt = {smt}\nnode = {}\n",
            i % 2
        );
    }
    let total: u32 = clusters.iter().map(|c| c.1 * c.2).sum();
    for &(kind, threads, work, sleep, nice, pin) in progs {
        s += "[[workload.programs]]\n";
        match kind % 5 {
            0 => s += &format!("kind = \"sequential\"\nwork_ms = {work}\n"),
            1 => s += &format!("kind = \"parallel\"\nthreads = {threads}\nwork_ms = {work}\niterations = 3\n"),
            2 => s += &format!("kind = \"dynamic\"\nthreads = {threads}\nwork_ms = {work}\nchunks = 17\n"),
            3 => s += &format!("kind = \"fork_join\"\nthreads = {threads}\nwork_ms = {work}\nseq_fraction = 0.3\niterations = 2\n"),
            _ => s += &format!("kind = \"phases\"\nthreads = {threads}\nloops = 5\njitter = 0.3\nphases = [{{ compute_ms = {} }}, {{ sleep_ms = {sleep} }}, {{ barrier = true }}]\n", work / 10 + 1),
        }
        s += &format!("nice = {nice}\n");
        if pin {
            s += &format!("affinity = [0, {}]\n", total - 1);
        }
    }
    s
}

/// Four identical CPUs at full speed, no migration cost (2 simulated s).
pub const FOUR: &str = r#"
duration_s = 2
[machine]
migration.enabled = false
[machine.types.core]
capacity = 1024
[[machine.clusters]]
type = "core"
cores = 4
"#;

/// A sequential program `name` of `work_ms`, pinned to `cpu`.
pub fn pinned(name: &str, cpu: u32, work_ms: f64) -> String {
    format!(
        "[[workload.programs]]\nname = \"{name}\"\nkind = \"sequential\"\nwork_ms = {work_ms}\naffinity = [{cpu}]\n"
    )
}

/// Completion time of program `name`, s.
pub fn completion(r: &RunResults, name: &str) -> f64 {
    r.programs
        .iter()
        .find(|p| p.program == name)
        .unwrap_or_else(|| panic!("no program {name}"))
        .completion_s
}
