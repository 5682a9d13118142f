//! Engine throughput on a scenario file: `cargo bench -p hetsched-core --bench
//! engine -- FILE [RUNS]`. Prints one JSON object with the median events per
//! second over the runs (the engine alone, no Python), so that profilers see
//! only the engine.

use hetsched_core::scenario::{parse, Format};
use hetsched_core::sim::RunOptions;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let file = args
        .first()
        .cloned()
        .unwrap_or_else(|| "bench/standard.toml".into());
    let runs: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        eprintln!("cannot read {file}: {e}");
        std::process::exit(2)
    });
    let scn = parse(&text, &file, Format::Toml, &[]).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let mut rates = Vec::new();
    let mut events = 0;
    let mut hash = String::new();
    for _ in 0..runs {
        let t0 = Instant::now();
        let r = hetsched_core::run(&scn, RunOptions::default(), None, vec![], None).unwrap_or_else(
            |e| {
                eprintln!("{e}");
                std::process::exit(1)
            },
        );
        let wall = t0.elapsed().as_secs_f64();
        events = r.summary.events;
        hash = r.summary.trace_hash.clone();
        rates.push(events as f64 / wall);
    }
    rates.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    let median = rates[rates.len() / 2];
    // Peak resident memory of this process (Linux: VmHWM in /proc/self/status).
    let peak_kib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_string)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<f64>().ok())
        });
    let peak = peak_kib
        .map(|k| format!("{:.2}", k / 1024.0))
        .unwrap_or_else(|| "null".into());
    println!(
        "{{\"file\": \"{file}\", \"runs\": {runs}, \"events\": {events}, \"events_per_sec\": {median:.0}, \"peak_rss_mib\": {peak}, \"trace_hash\": \"{hash}\"}}"
    );
}
