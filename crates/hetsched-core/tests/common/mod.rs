//! Helpers shared by the integration tests: parse a scenario, run it with
//! the trace and the invariant checker on, or collect the error it gives;
//! build machines and programs; read run intervals, end times and frequency
//! changes back from the results.

#![allow(dead_code)] // each test file uses a different subset

use hetsched_core::metrics::RunResults;
use hetsched_core::run;
use hetsched_core::scenario::{parse, Format, Scenario};
use hetsched_core::sim::RunOptions;
use hetsched_core::trace::TraceEvent;

/// One millisecond in nanoseconds.
pub const MS: u64 = 1_000_000;

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

/// `n` CPUs of one type `c` of capacity 1024 (speed 1: 1 ms of work takes
/// 1 ms): the `[machine.types.c]` table and `n` `[[machine.cpus]]` entries.
pub fn cpus(n: usize) -> String {
    let mut s = String::from("[machine.types.c]\ncapacity = 1024\n");
    for _ in 0..n {
        s += "[[machine.cpus]]\ntype = \"c\"\n";
    }
    s
}

/// A sequential program `name` of `work_ms`, followed by the lines `extra`.
pub fn sequential(name: &str, work_ms: f64, extra: &str) -> String {
    format!(
        "[[workload.programs]]\nname = \"{name}\"\nkind = \"sequential\"\nwork_ms = {work_ms}\n{extra}\n"
    )
}

/// A sequential program `name` of `work_ms`, pinned to `cpu`.
pub fn pinned(name: &str, cpu: u32, work_ms: f64) -> String {
    sequential(name, work_ms, &format!("affinity = [{cpu}]"))
}

/// A `phases` program `name` whose phases are `phases` (the items of the
/// TOML list); more keys of the program may follow it.
pub fn phases(name: &str, phases: &str) -> String {
    format!("[[workload.programs]]\nname = \"{name}\"\nkind = \"phases\"\nphases = [{phases}]\n")
}

/// The run intervals of `task` from the trace, in trace order, as (cpu,
/// start ns, end ns); zero-length ones are dropped.
pub fn run_intervals(r: &RunResults, task: usize) -> Vec<(usize, u64, u64)> {
    r.trace
        .iter()
        .filter_map(|e| match *e {
            TraceEvent::Run {
                t_ns,
                end_ns,
                cpu,
                task: t,
            } if t == task && end_ns > t_ns => Some((cpu, t_ns, end_ns)),
            _ => None,
        })
        .collect()
}

/// End time of `task`, ms; fails the test if it did not end.
pub fn end_ms(r: &RunResults, task: usize) -> f64 {
    r.tasks[task].end_s.expect("task ended") * 1e3
}

/// Run time of `task` on CPUs of type `ty`, s (0 if it ran on none).
pub fn on_type(r: &RunResults, task: usize, ty: &str) -> f64 {
    r.tasks[task].run_s_by_type.get(ty).copied().unwrap_or(0.0)
}

/// Frequency changes of domain 0 as (time in ns, MHz), from the trace.
pub fn freqs(r: &RunResults) -> Vec<(u64, u32)> {
    r.trace
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Freq { t_ns, domain, mhz } if *domain == 0 => Some((*t_ns, *mhz)),
            _ => None,
        })
        .collect()
}

/// `a` and `b` equal to within 1e-6 (ms or s, as the caller counts).
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

/// Completion time of program `name`, s.
pub fn completion(r: &RunResults, name: &str) -> f64 {
    r.programs
        .iter()
        .find(|p| p.program == name)
        .unwrap_or_else(|| panic!("no program {name}"))
        .completion_s
}
