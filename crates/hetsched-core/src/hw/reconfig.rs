//! Reconfiguration mechanisms of dynamic processors as per-step cost models.
//!
//! A reconfiguration takes CPUs out of the operating system's online set
//! (offline; for a fused execution object, the CPUs it borrows) or brings them
//! back (online; splitting the object). How long it takes, and what it costs
//! the rest of the machine, depends on the mechanism. Each mechanism is a
//! sequence of [`Step`]s whose durations come from [`ReconfigCosts`]; the
//! engine (`sim::dynamic`) walks the steps in simulated time and applies their
//! side effects (a stop-machine step halts every other online CPU).
//!
//! Sources: "Dynamic processors demand dynamic operating systems"
//! (Panneerselvam & Swift, HotPar 2010; here *HotOS*) Table 2 for the steps of
//! native hotplug and Table 1 for the notifier callbacks; "Chameleon: operating
//! system support for dynamic processors" (ASPLOS 2012; here *Chameleon*) §3.1
//! and §4.1 for hardware start and processor proxies. Which published numbers
//! calibrate a parameter and which ones are left as predictions is said at
//! each parameter and in `docs/dynamic.md`.
//!
//! Mechanisms:
//! * [`Mechanism::Hotplug`] — Linux `cpu_down`/`cpu_up`, one CPU at a time.
//!   Offline: global lock, correctness checks, `CPU_DOWN_PREPARE` notifiers,
//!   migration of tasks, interrupts and timers, stop-machine (every other
//!   online CPU halts while the CPU leaves `cpu_online_mask`), teardown of
//!   processor state, `CPU_DEAD` notifiers, unlock. Online: lock, checks,
//!   `CPU_UP_PREPARE` notifiers, hardware start, architecture initialisation,
//!   `CPU_ONLINE` notifiers, unlock.
//! * [`Mechanism::ParallelHotplug`] — several CPUs in one operation: one lock,
//!   one notification round with a mask, one stop-machine for all, and the
//!   per-CPU local work (hardware start, architecture initialisation,
//!   teardown) done by the CPUs in parallel.
//! * [`Mechanism::DeferredHotplug`] — a proxy first (as `ProxyApic`); the real
//!   (parallel) hotplug runs only once the configuration has lasted longer
//!   than [`ReconfigCosts::deferred_threshold_us`]. The engine does that part.
//! * [`Mechanism::ProxyApic`] / [`Mechanism::ProxyLogical`] — processor
//!   proxies: no notifiers, no stop-machine. Proxies for several CPUs are
//!   created one after another. With `ProxyApic` the IOAPIC redirection table
//!   is reprogrammed to steer device interrupts away from the proxied CPUs on
//!   offline (fuse) only; splitting does not reprogram it (as Linux hotplug
//!   does not). With `ProxyLogical` the proxied CPU's logical APIC id is added
//!   to the proxying CPU's mask (renaming), so no IOAPIC access is needed.
//! * [`Mechanism::Halt`] — for hardware whose disabled contexts can still
//!   receive interrupts (Chameleon §4.1, last paragraph): no proxy, no IOAPIC.
//!   A CPU leaves by being switched to the idle thread, which halts it in a
//!   sleep state (a hyperthread whose sibling then runs un-shared; a core
//!   parked so that another runs at a Turbo-Boost-like speed); it still takes
//!   its own interrupts. It comes back by waking from that sleep state.

use std::fmt;

/// A reconfiguration mechanism.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    /// Native Linux hotplug, one CPU at a time.
    Hotplug,
    /// Parallel hotplug: a set of CPUs per operation.
    ParallelHotplug,
    /// Deferred hotplug: proxies first, hotplug once the configuration lasts.
    DeferredHotplug,
    /// Processor proxies with IOAPIC reprogramming.
    ProxyApic,
    /// Processor proxies with logical-address renaming.
    ProxyLogical,
    /// Halting: the CPUs sleep in the idle thread and still take their own
    /// interrupts, so no proxy is needed (SMT siblings, Turbo-Boost-like
    /// parking).
    Halt,
}

impl Mechanism {
    /// Every mechanism, in registry order.
    pub const ALL: [Mechanism; 6] = [
        Mechanism::ProxyApic,
        Mechanism::ProxyLogical,
        Mechanism::Hotplug,
        Mechanism::ParallelHotplug,
        Mechanism::DeferredHotplug,
        Mechanism::Halt,
    ];
    /// Name used in scenarios and policy parameters.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Hotplug => "hotplug",
            Mechanism::ParallelHotplug => "parallel-hotplug",
            Mechanism::DeferredHotplug => "deferred-hotplug",
            Mechanism::ProxyApic => "proxy-apic",
            Mechanism::ProxyLogical => "proxy-logical",
            Mechanism::Halt => "halt",
        }
    }
    /// Every name, for error messages.
    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|m| m.name()).collect()
    }
    /// Parse a name; the error lists the allowed ones.
    pub fn parse(s: &str) -> Result<Mechanism, String> {
        Self::ALL
            .iter()
            .copied()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown reconfiguration mechanism \"{s}\"; allowed: {}",
                    Self::names().join(", ")
                )
            })
    }
    /// Whether the CPUs it takes away are stood in for by proxies (and stay
    /// in the OS's online mask).
    pub fn uses_proxies(self) -> bool {
        matches!(
            self,
            Mechanism::ProxyApic | Mechanism::ProxyLogical | Mechanism::DeferredHotplug
        )
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Direction of a reconfiguration.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Direction {
    /// CPUs leave (hot-unplug; fusing borrows them).
    Offline,
    /// CPUs come back (hotplug; splitting returns them).
    Online,
}

impl Direction {
    /// `offline` or `online`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::Offline => "offline",
            Direction::Online => "online",
        }
    }
}

/// What a step does besides taking time.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// Work of the reconfiguring context only.
    Local,
    /// Stop-machine: every other online CPU is halted for the step.
    StopMachine,
}

/// One step of a reconfiguration.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// What it is (`lock`, `notify-down-prepare`, `stop-machine`, ...).
    pub name: &'static str,
    /// Duration, µs.
    pub us: f64,
    /// Side effect.
    pub kind: StepKind,
}

/// Step costs of every mechanism. The defaults ([`ReconfigCosts::default`])
/// are the calibration described in the module doc and `docs/dynamic.md`;
/// scenarios may override any of them.
#[derive(Clone, Debug, PartialEq)]
pub struct ReconfigCosts {
    /// Taking (and later releasing) the global hotplug lock, µs (steps 1 and
    /// 10 of HotOS Table 2). Not measured in the papers; an uncontended mutex.
    pub lock_us: f64,
    /// Correctness checks (step 2: at least one CPU stays, the CPU is
    /// online), µs. Not measured; a few mask tests.
    pub check_us: f64,
    /// Notifier callbacks registered by the subsystems: 35 in 15 subsystems
    /// (HotOS Table 1). Each reconfigured CPU runs every callback twice
    /// (`DOWN_PREPARE` + `DEAD`, or `UP_PREPARE` + `ONLINE`).
    pub callbacks: u32,
    /// Cost of one callback invocation per CPU in the online mask, µs: the
    /// callbacks rebuild or initialise per-CPU state (sched domains, slab
    /// caches, per-CPU counters) by walking the online CPUs. Calibrated on
    /// HotOS Table 3's 1-CPU native offline (25 ms on 4 CPUs) after the
    /// stop-machine share: (25000 − fixed − 4 × 650) / (70 × 4).
    pub callback_per_cpu_us: f64,
    /// Migrating interrupts, timers, bottom halves and tasklets off the
    /// outgoing CPU (step 4), µs, fixed. Not measured; small next to the
    /// callbacks. (Tasks are moved by the engine and pay their own cost.)
    pub migrate_us: f64,
    /// Stop-machine, per online CPU, µs: a stopper thread on every online CPU
    /// disables interrupts and spins until the CPU is out of
    /// `cpu_online_mask`. Calibrated on HotOS §3: every other CPU halted
    /// 2.6 ms per offline on the 4-CPU machine → 650 µs per CPU.
    pub stop_machine_per_cpu_us: f64,
    /// Cleanup of processor-related state after stop-machine (steps 6–8), µs.
    /// Not measured; small.
    pub teardown_us: f64,
    /// Hardware start of a CPU on online, µs: Chameleon §3.1, "the hardware
    /// latency of starting a processor is only 10 ms".
    pub hw_start_us: f64,
    /// Architecture initialisation of an onlined CPU (registers, probing),
    /// µs. Calibrated on HotOS Table 3's 1-CPU native online (106 ms on 4
    /// CPUs) after hardware start and notifiers.
    pub arch_init_us: f64,
    /// Creating one processor proxy, µs: notify the proxied CPU, switch it to
    /// the idle thread, redirect its IPIs (redirection-table entry or logical
    /// renaming). Calibrated on Chameleon Table 4's proxy-logical fuse of 2
    /// CPUs (2 µs, one proxy, no IOAPIC); the APIC variant's software part is
    /// taken to be the same.
    pub proxy_create_us: f64,
    /// Reprogramming the IOAPIC redirection table to steer device interrupts
    /// away from the proxied CPUs (proxy-apic, fuse only), once per fuse, µs.
    /// Calibrated on Chameleon Table 4's proxy-APIC fuse of 2 CPUs (250 µs)
    /// minus one proxy creation.
    pub ioapic_reprogram_us: f64,
    /// Tearing down one proxy with IOAPIC-mode redirection (flush the TLB,
    /// replay possibly lost IPIs, restore the redirection table, wake the
    /// CPU), µs. Calibrated on Chameleon Table 4's proxy-APIC split of 2
    /// CPUs (20 µs).
    pub proxy_teardown_apic_us: f64,
    /// Tearing down one proxy with logical renaming, µs. Calibrated on
    /// Chameleon Table 4's proxy-logical split of 2 CPUs (1.5 µs).
    pub proxy_teardown_logical_us: f64,
    /// Deferred hotplug: how long a configuration must last before the real
    /// hotplug runs, µs. Not from the papers (HotOS §4.2 gives no value);
    /// 100 ms, a few scheduling periods.
    pub deferred_threshold_us: f64,
    /// Halting one CPU (mechanism `halt`), µs: a rescheduling IPI tells it to
    /// switch to the idle thread, which enters a sleep state. Not measured in
    /// the papers; an assumption taken equal to a proxy creation (2 µs,
    /// Chameleon Table 4), which does the same notification and switch to
    /// the idle thread and in addition redirects the CPU's IPIs — so an
    /// upper bound. CPUs are halted one after another, as proxies are made.
    pub halt_enter_us: f64,
    /// Waking one halted CPU (mechanism `halt`), µs: the exit latency of
    /// its sleep state. Default 3 µs, Linux `intel_idle`'s C1 exit latency
    /// on Nehalem/Westmere (Chameleon's Xeon X5650), the state an idle
    /// hyperthread sits in. A Turbo-Boost-like configuration parks cores in a
    /// deeper state (C3: 20 µs, C6: 200 µs in the same table); scenarios set
    /// it with `dynamic.halt_exit_us`.
    pub halt_exit_us: f64,
}

impl Default for ReconfigCosts {
    fn default() -> Self {
        let lock_us = 1.0;
        let check_us = 1.0;
        let migrate_us = 10.0;
        let teardown_us = 5.0;
        let callbacks = 35;
        // HotOS §3: other CPUs halted 2.6 ms per offline on 4 CPUs.
        let stop_machine_per_cpu_us = 2600.0 / 4.0;
        // HotOS Table 3: native offline of 1 CPU on 4 CPUs = 25 ms.
        let fixed_off = 2.0 * lock_us + check_us + migrate_us + teardown_us;
        let callback_per_cpu_us =
            (25_000.0 - fixed_off - 4.0 * stop_machine_per_cpu_us) / (2.0 * callbacks as f64 * 4.0);
        // Chameleon §3.1: hardware start 10 ms.
        let hw_start_us = 10_000.0;
        // HotOS Table 3: native online of 1 CPU on 4 CPUs = 106 ms.
        let fixed_on = 2.0 * lock_us + check_us + hw_start_us;
        let arch_init_us =
            106_000.0 - fixed_on - 2.0 * callbacks as f64 * 4.0 * callback_per_cpu_us;
        // Chameleon Table 4, fuse/split of 2 CPUs (one proxy).
        let proxy_create_us = 2.0;
        ReconfigCosts {
            lock_us,
            check_us,
            callbacks,
            callback_per_cpu_us,
            migrate_us,
            stop_machine_per_cpu_us,
            teardown_us,
            hw_start_us,
            arch_init_us,
            proxy_create_us,
            ioapic_reprogram_us: 250.0 - proxy_create_us,
            proxy_teardown_apic_us: 20.0,
            proxy_teardown_logical_us: 1.5,
            deferred_threshold_us: 100_000.0,
            halt_enter_us: proxy_create_us,
            halt_exit_us: 3.0,
        }
    }
}

impl ReconfigCosts {
    /// The costs of the HotOS prototype's processor proxies, whose creation
    /// and teardown took milliseconds (HotOS Table 3, "Proxy" column) rather
    /// than Chameleon's microseconds. Its per-proxy costs are calibrated on
    /// the 1-CPU rows (1.7 ms offline, 1.2 ms online); the 2- and 3-CPU rows
    /// are predictions (proxies one after another). The hotplug steps are
    /// the defaults.
    pub fn hotos_prototype() -> Self {
        ReconfigCosts {
            // The prototype steers interrupts through the IOAPIC in both
            // directions; its whole per-proxy cost is in these two numbers.
            proxy_create_us: 1700.0,
            ioapic_reprogram_us: 0.0,
            proxy_teardown_apic_us: 1200.0,
            proxy_teardown_logical_us: 1200.0,
            ..Default::default()
        }
    }

    /// Today's Linux, measured: the hotplug steps fitted by
    /// `hetsched linux hotplug-bench` to `data/hotplug/linux-6.1-tcg.json`
    /// (Linux 6.1.0 in a 5-vCPU QEMU VM under software emulation, TCG, which
    /// inflates every absolute time). Calibrated on that file's serial 1-CPU
    /// offline (129.9 ms) and online (171.5 ms) with 5 CPUs online and on the
    /// 51.5 ms halt a co-running spinner saw: stop-machine = the halt / 5;
    /// the two notifier rounds = the rest of the offline, over the 33
    /// offline callbacks of the `cpuhp` trace; hardware start = the traced
    /// `bringup_cpu`; architecture initialisation = the rest of the online.
    /// `reconfig_costs` in `python/hetsched/linux/hotplug.py` computes these
    /// numbers and `tests/test_linux_hotplug.py` checks that they are the
    /// file's. Proxy costs are the defaults (Linux has no proxies).
    pub fn linux_6_1_tcg() -> Self {
        ReconfigCosts {
            lock_us: 1.0,
            check_us: 1.0,
            callbacks: 33,
            callback_per_cpu_us: 237.56121212121215,
            migrate_us: 10.0,
            stop_machine_per_cpu_us: 10306.24,
            teardown_us: 5.0,
            hw_start_us: 90545.0000000001,
            arch_init_us: 2547.099999999875,
            ..Default::default()
        }
    }

    /// Validate every cost (finite and ≥ 0; the threshold > 0). `path`
    /// prefixes the errors.
    pub fn check(&self, path: &str) -> Result<(), String> {
        let fields = [
            ("lock_us", self.lock_us),
            ("check_us", self.check_us),
            ("callback_per_cpu_us", self.callback_per_cpu_us),
            ("migrate_us", self.migrate_us),
            ("stop_machine_per_cpu_us", self.stop_machine_per_cpu_us),
            ("teardown_us", self.teardown_us),
            ("hw_start_us", self.hw_start_us),
            ("arch_init_us", self.arch_init_us),
            ("proxy_create_us", self.proxy_create_us),
            ("ioapic_reprogram_us", self.ioapic_reprogram_us),
            ("proxy_teardown_apic_us", self.proxy_teardown_apic_us),
            ("proxy_teardown_logical_us", self.proxy_teardown_logical_us),
            ("deferred_threshold_us", self.deferred_threshold_us),
            ("halt_enter_us", self.halt_enter_us),
            ("halt_exit_us", self.halt_exit_us),
        ];
        for (name, v) in fields {
            if !v.is_finite() || !(0.0..=1e9).contains(&v) {
                return Err(format!(
                    "{path}.{name}: {v} is out of range; allowed 0 to 1e9 µs"
                ));
            }
        }
        if self.deferred_threshold_us <= 0.0 {
            return Err(format!(
                "{path}.deferred_threshold_us: must be > 0 µs, got {}",
                self.deferred_threshold_us
            ));
        }
        Ok(())
    }

    /// One notification round (every callback once) walking `online` CPUs, µs.
    fn notify(&self, online: usize) -> f64 {
        self.callbacks as f64 * self.callback_per_cpu_us * online as f64
    }

    /// The steps of reconfiguring `count` CPUs in direction `dir` with
    /// mechanism `mech` when `online` CPUs are in the online mask before the
    /// operation (the CPUs going offline included; the CPUs coming online
    /// not). For deferred hotplug these are the steps of its immediate
    /// (proxy) part; [`Self::deferred_hotplug_steps`] gives the later part.
    pub fn steps(&self, mech: Mechanism, dir: Direction, count: usize, online: usize) -> Vec<Step> {
        let local = |name, us| Step {
            name,
            us,
            kind: StepKind::Local,
        };
        let mut v = Vec::new();
        if count == 0 {
            return v;
        }
        match (mech, dir) {
            (Mechanism::Hotplug, Direction::Offline) => {
                for i in 0..count {
                    let n = online - i;
                    self.offline_one(&mut v, n);
                }
            }
            (Mechanism::Hotplug, Direction::Online) => {
                for i in 0..count {
                    let n = online + i + 1;
                    v.push(local("lock", self.lock_us));
                    v.push(local("checks", self.check_us));
                    v.push(local("notify-up-prepare", self.notify(n)));
                    v.push(local("hardware-start", self.hw_start_us));
                    v.push(local("arch-init", self.arch_init_us));
                    v.push(local("notify-online", self.notify(n)));
                    v.push(local("unlock", self.lock_us));
                }
            }
            (Mechanism::ParallelHotplug, Direction::Offline) => {
                v.push(local("lock", self.lock_us));
                v.push(local("checks", self.check_us));
                // One notification round with a mask; each callback still
                // cleans up every CPU of the mask.
                let walk: f64 = (0..count).map(|i| self.notify(online - i)).sum();
                v.push(local("notify-down-prepare", walk));
                v.push(local("migrate", self.migrate_us));
                v.push(Step {
                    name: "stop-machine",
                    us: self.stop_machine_per_cpu_us * online as f64,
                    kind: StepKind::StopMachine,
                });
                v.push(local("teardown", self.teardown_us));
                v.push(local("notify-dead", walk));
                v.push(local("unlock", self.lock_us));
            }
            (Mechanism::ParallelHotplug, Direction::Online) => {
                v.push(local("lock", self.lock_us));
                v.push(local("checks", self.check_us));
                let walk: f64 = (0..count).map(|i| self.notify(online + i + 1)).sum();
                v.push(local("notify-up-prepare", walk));
                // The CPUs start and initialise themselves in parallel.
                v.push(local("hardware-start", self.hw_start_us));
                v.push(local("arch-init", self.arch_init_us));
                v.push(local("notify-online", walk));
                v.push(local("unlock", self.lock_us));
            }
            (Mechanism::ProxyApic | Mechanism::DeferredHotplug, Direction::Offline) => {
                v.push(local("ioapic-reprogram", self.ioapic_reprogram_us));
                for _ in 0..count {
                    v.push(local("proxy-create", self.proxy_create_us));
                }
            }
            (Mechanism::ProxyApic | Mechanism::DeferredHotplug, Direction::Online) => {
                for _ in 0..count {
                    v.push(local("proxy-teardown", self.proxy_teardown_apic_us));
                }
            }
            (Mechanism::ProxyLogical, Direction::Offline) => {
                for _ in 0..count {
                    v.push(local("proxy-create", self.proxy_create_us));
                }
            }
            (Mechanism::ProxyLogical, Direction::Online) => {
                for _ in 0..count {
                    v.push(local("proxy-teardown", self.proxy_teardown_logical_us));
                }
            }
            // No proxy and no IOAPIC: the CPUs still take their interrupts.
            (Mechanism::Halt, Direction::Offline) => {
                for _ in 0..count {
                    v.push(local("halt", self.halt_enter_us));
                }
            }
            (Mechanism::Halt, Direction::Online) => {
                for _ in 0..count {
                    v.push(local("wake", self.halt_exit_us));
                }
            }
        }
        v
    }

    fn offline_one(&self, v: &mut Vec<Step>, n: usize) {
        let local = |name, us| Step {
            name,
            us,
            kind: StepKind::Local,
        };
        v.push(local("lock", self.lock_us));
        v.push(local("checks", self.check_us));
        v.push(local("notify-down-prepare", self.notify(n)));
        v.push(local("migrate", self.migrate_us));
        v.push(Step {
            name: "stop-machine",
            us: self.stop_machine_per_cpu_us * n as f64,
            kind: StepKind::StopMachine,
        });
        v.push(local("teardown", self.teardown_us));
        v.push(local("notify-dead", self.notify(n)));
        v.push(local("unlock", self.lock_us));
    }

    /// Deferred hotplug's later part: once the configuration has lasted, the
    /// proxied CPUs are taken offline for real by a parallel hotplug run on
    /// another CPU (HotOS §4.2: `take_cpu_down` disables the proxy instead of
    /// the CPU). `online` counts the proxied CPUs as online, as the OS does.
    pub fn deferred_hotplug_steps(&self, count: usize, online: usize) -> Vec<Step> {
        self.steps(
            Mechanism::ParallelHotplug,
            Direction::Offline,
            count,
            online,
        )
    }

    /// Total latency of a reconfiguration, µs (the sum of its steps).
    pub fn latency_us(&self, mech: Mechanism, dir: Direction, count: usize, online: usize) -> f64 {
        self.steps(mech, dir, count, online)
            .iter()
            .map(|s| s.us)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn calibration_points_are_reproduced_exactly() {
        let c = ReconfigCosts::default();
        let off1 = c.latency_us(Mechanism::Hotplug, Direction::Offline, 1, 4);
        assert!(close(off1, 25_000.0, 1e-12), "{off1}");
        let on1 = c.latency_us(Mechanism::Hotplug, Direction::Online, 1, 3);
        assert!(close(on1, 106_000.0, 1e-12), "{on1}");
        let stop: f64 = c
            .steps(Mechanism::Hotplug, Direction::Offline, 1, 4)
            .iter()
            .filter(|s| s.kind == StepKind::StopMachine)
            .map(|s| s.us)
            .sum();
        assert!(close(stop, 2600.0, 1e-12));
        assert_eq!(
            c.latency_us(Mechanism::ProxyApic, Direction::Offline, 1, 24),
            250.0
        );
        assert_eq!(
            c.latency_us(Mechanism::ProxyLogical, Direction::Online, 1, 23),
            1.5
        );
    }

    #[test]
    fn hand_worked_native_offline_of_two() {
        // Two sequential offlines on 4 CPUs: n = 4 then 3. Each is
        // fixed (2·1 + 1 + 10 + 5 = 18 µs) + 70·k·n + 650·n.
        let c = ReconfigCosts::default();
        let k = c.callback_per_cpu_us;
        let want = 2.0 * 18.0 + 70.0 * k * 7.0 + 650.0 * 7.0;
        let got = c.latency_us(Mechanism::Hotplug, Direction::Offline, 2, 4);
        assert!(close(got, want, 1e-12), "{got} vs {want}");
        // Two stop-machine steps, one per CPU.
        let n = c
            .steps(Mechanism::Hotplug, Direction::Offline, 2, 4)
            .iter()
            .filter(|s| s.kind == StepKind::StopMachine)
            .count();
        assert_eq!(n, 2);
    }

    #[test]
    fn parallel_hotplug_shares_local_work() {
        let c = ReconfigCosts::default();
        let seq = c.latency_us(Mechanism::Hotplug, Direction::Online, 3, 1);
        let par = c.latency_us(Mechanism::ParallelHotplug, Direction::Online, 3, 1);
        // Two hardware starts and architecture initialisations saved.
        let saved = seq - par;
        let want = 2.0 * (c.hw_start_us + c.arch_init_us) + 4.0 * c.lock_us + 2.0 * c.check_us;
        assert!(close(saved, want, 1e-9), "{saved} vs {want}");
        // One stop-machine for the whole mask.
        let stops = c
            .steps(Mechanism::ParallelHotplug, Direction::Offline, 3, 4)
            .iter()
            .filter(|s| s.kind == StepKind::StopMachine)
            .count();
        assert_eq!(stops, 1);
    }

    #[test]
    fn proxies_are_created_one_after_another_and_split_skips_the_ioapic() {
        let c = ReconfigCosts::default();
        let f2 = c.latency_us(Mechanism::ProxyApic, Direction::Offline, 1, 24);
        let f4 = c.latency_us(Mechanism::ProxyApic, Direction::Offline, 3, 24);
        assert!(close(f4 - f2, 2.0 * c.proxy_create_us, 1e-12));
        let s4 = c.latency_us(Mechanism::ProxyApic, Direction::Online, 3, 21);
        assert!(close(s4, 3.0 * c.proxy_teardown_apic_us, 1e-12));
        assert!(c
            .steps(Mechanism::ProxyApic, Direction::Online, 3, 21)
            .iter()
            .all(|s| s.name != "ioapic-reprogram"));
    }

    #[test]
    fn halting_needs_no_proxy_and_no_ioapic() {
        let c = ReconfigCosts::default();
        assert!(!Mechanism::Halt.uses_proxies());
        // One sibling halted: 2 µs; three parked cores: 3 × 2 µs; waking
        // three from C1: 3 × 3 µs.
        assert_eq!(c.latency_us(Mechanism::Halt, Direction::Offline, 1, 8), 2.0);
        assert_eq!(c.latency_us(Mechanism::Halt, Direction::Offline, 3, 8), 6.0);
        assert_eq!(c.latency_us(Mechanism::Halt, Direction::Online, 3, 5), 9.0);
        let steps = c.steps(Mechanism::Halt, Direction::Offline, 3, 8);
        assert!(steps
            .iter()
            .all(|s| s.kind == StepKind::Local && s.name == "halt"));
    }

    #[test]
    fn mechanism_names_round_trip_and_unknown_is_listed() {
        for m in Mechanism::ALL {
            assert_eq!(Mechanism::parse(m.name()), Ok(m));
        }
        let e = Mechanism::parse("teleport").unwrap_err();
        assert!(e.contains("teleport") && e.contains("proxy-apic"), "{e}");
    }

    #[test]
    fn linux_cost_set_is_valid_and_keeps_the_proxy_costs() {
        let l = ReconfigCosts::linux_6_1_tcg();
        assert!(l.check("dynamic.costs").is_ok());
        let d = ReconfigCosts::default();
        assert_eq!(l.proxy_create_us, d.proxy_create_us);
        assert_eq!(l.deferred_threshold_us, d.deferred_threshold_us);
        // Its calibration point: 1-CPU offline with 5 CPUs online, 129.9444 ms.
        let off1 = l.latency_us(Mechanism::Hotplug, Direction::Offline, 1, 5);
        assert!(close(off1, 129_944.4, 1e-9), "{off1}");
    }

    #[test]
    fn bad_costs_are_refused_with_their_path() {
        let c = ReconfigCosts {
            arch_init_us: f64::NAN,
            ..Default::default()
        };
        let e = c.check("dynamic.costs").unwrap_err();
        assert!(e.starts_with("dynamic.costs.arch_init_us"), "{e}");
        assert!(ReconfigCosts::default().check("x").is_ok());
    }
}
