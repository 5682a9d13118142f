//! Typed trace events and the Perfetto / Chrome trace writer.
//!
//! Every event carries its time first (`t_ns`). A run records events only
//! when asked (`RunOptions::trace`), but every event is always folded into the
//! run's trace hash, so determinism can be checked cheaply on any run.

use serde::Serialize;
use serde_json::{json, Value};

/// One trace event.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TraceEvent {
    /// `task` ran on `cpu` from `t_ns` to `end_ns`.
    Run {
        /// Start of the run interval, ns of simulated time.
        t_ns: u64,
        /// End of the run interval (the task stopped running), ns.
        end_ns: u64,
        /// CPU it ran on.
        cpu: usize,
        /// Task id.
        task: usize,
    },
    /// `task` started running on `to` after last running on `from`.
    Migrate {
        /// Time it started running on `to`, ns.
        t_ns: u64,
        /// Task id.
        task: usize,
        /// CPU it last ran on.
        from: usize,
        /// CPU it now runs on.
        to: usize,
    },
    /// `task` became runnable and was placed on `cpu`.
    Wake {
        /// Time it became runnable, ns.
        t_ns: u64,
        /// Task id.
        task: usize,
        /// CPU it was queued on (for a guest thread: the vCPU index in its VM).
        cpu: usize,
    },
    /// `task` blocked (`sleep`, `io`, `barrier`, `period`).
    Block {
        /// Time it blocked, ns.
        t_ns: u64,
        /// Task id.
        task: usize,
        /// `sleep`, `io`, `barrier`, `period`, or `vcpu-idle` for a vCPU whose guest went idle.
        reason: &'static str,
    },
    /// `task` exited.
    Exit {
        /// Time it exited, ns.
        t_ns: u64,
        /// Task id.
        task: usize,
    },
    /// A frequency domain changed P-state.
    Freq {
        /// Time of the change, ns.
        t_ns: u64,
        /// Index of the frequency domain.
        domain: usize,
        /// New frequency, MHz.
        mhz: u32,
    },
    /// `task` needed ISA `feature` that `cpu` lacks.
    Fault {
        /// Time of the fault, ns.
        t_ns: u64,
        /// Task id.
        task: usize,
        /// CPU that lacks the feature.
        cpu: usize,
        /// Index of the missing ISA feature (its bit in the CPU types' feature mask).
        feature: usize,
    },
    /// An instance of a program finished.
    ProgramDone {
        /// Time its last thread exited, ns.
        t_ns: u64,
        /// Program index.
        program: usize,
        /// Instance number (0-based).
        instance: u32,
    },
    /// A reconfiguration of dynamic processors ran from `t_ns` to `end_ns`.
    Reconfig {
        /// Time it was requested, ns.
        t_ns: u64,
        /// Time it completed, ns.
        end_ns: u64,
        /// `offline`, `online`, `fuse`, `split` or `deferred-hotplug`.
        op: &'static str,
        /// CPUs reconfigured (for fuse and split: all of the object's CPUs).
        cpus: Vec<usize>,
        /// Mechanism name (`hotplug`, `proxy-apic`, ...).
        mechanism: &'static str,
    },
    /// Stop-machine step of reconfiguration `op` halted the other online cpus.
    StopMachine {
        /// Start of the halt, ns.
        t_ns: u64,
        /// End of the halt, ns.
        end_ns: u64,
        /// Index of the reconfiguration (its `id` in the dynamic results).
        op: usize,
    },
}

/// Names used to label slices: per task, its program name and thread index.
pub struct Labels<'a> {
    /// `(program name, thread)` per task.
    pub tasks: &'a [(String, u32)],
    /// `"cpu N (type)"` per CPU.
    pub cpus: &'a [String],
}

/// Build a Chrome trace-event JSON document (opens in ui.perfetto.dev): one
/// track per CPU, a complete ("X") slice per run interval named after the
/// task's program, and instant markers for migrations, faults and frequency
/// changes.
pub fn chrome_trace(events: &[Value], labels: &Labels) -> Value {
    let mut out: Vec<Value> = Vec::with_capacity(events.len() + labels.cpus.len() + 1);
    out.push(json!({"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "machine"}}));
    for (i, name) in labels.cpus.iter().enumerate() {
        out.push(
            json!({"ph": "M", "pid": 0, "tid": i, "name": "thread_name", "args": {"name": name}}),
        );
        out.push(json!({"ph": "M", "pid": 0, "tid": i, "name": "thread_sort_index", "args": {"sort_index": i}}));
    }
    let us = |v: &Value| v.as_u64().unwrap_or(0) as f64 / 1000.0;
    let label = |t: u64| -> String {
        labels
            .tasks
            .get(t as usize)
            .map(|(p, th)| format!("{p}#{th}"))
            .unwrap_or_else(|| format!("task {t}"))
    };
    for e in events {
        let ty = e.get("type").and_then(Value::as_str).unwrap_or("");
        match ty {
            "run" => {
                let t = e["task"].as_u64().unwrap_or(0);
                let start = us(&e["t_ns"]);
                let dur = us(&e["end_ns"]) - start;
                let name = label(t);
                let prog = name.split('#').next().unwrap_or("").to_string();
                out.push(json!({
                    "ph": "X", "pid": 0, "tid": e["cpu"], "ts": start, "dur": dur,
                    "name": name, "cat": prog, "args": {"task": t}
                }));
            }
            "migrate" => out.push(json!({
                "ph": "i", "s": "t", "pid": 0, "tid": e["to"], "ts": us(&e["t_ns"]),
                "name": "migrate", "args": {"task": e["task"], "from": e["from"], "to": e["to"]}
            })),
            "fault" => out.push(json!({
                "ph": "i", "s": "t", "pid": 0, "tid": e["cpu"], "ts": us(&e["t_ns"]),
                "name": "isa fault", "args": {"task": e["task"], "feature": e["feature"]}
            })),
            "reconfig" => out.push(json!({
                "ph": "X", "pid": 0, "tid": e["cpus"][0], "ts": us(&e["t_ns"]),
                "dur": us(&e["end_ns"]) - us(&e["t_ns"]),
                "name": format!("{} ({})", e["op"].as_str().unwrap_or(""), e["mechanism"].as_str().unwrap_or("")),
                "cat": "reconfig", "args": {"cpus": e["cpus"]}
            })),
            "stop_machine" => out.push(json!({
                "ph": "i", "s": "g", "pid": 0, "ts": us(&e["t_ns"]),
                "name": "stop-machine", "args": {"op": e["op"], "end_us": us(&e["end_ns"])}
            })),
            "freq" => out.push(json!({
                "ph": "i", "s": "g", "pid": 0, "ts": us(&e["t_ns"]),
                "name": "freq", "args": {"domain": e["domain"], "mhz": e["mhz"]}
            })),
            _ => {}
        }
    }
    json!({"traceEvents": out, "displayTimeUnit": "ms"})
}
