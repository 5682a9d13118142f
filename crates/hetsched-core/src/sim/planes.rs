//! Shared voltage planes (docs/power.md §1): the CPUs of a plane run at the
//! highest voltage any of its frequency domains' P-states asks for, each at
//! its own frequency. A frequency change that moves the plane's voltage
//! changes the power of every CPU of the plane at that instant; their
//! energy is integrated up to that instant at the old power first, so the
//! integral stays exact.

use super::Engine;
use crate::hw::{CpuId, Machine};

/// The planes of a machine in which some plane holds more than one domain.
pub(super) struct Planes {
    /// Plane of each domain.
    of_domain: Vec<usize>,
    /// Domains of each plane.
    domains: Vec<Vec<usize>>,
    /// Present supply voltage of each plane, V.
    volt: Vec<f64>,
}

impl Planes {
    /// `None` when every domain has its own plane: the P-state's voltage is
    /// then the plane's and the engine asks for nothing more.
    pub(super) fn new(m: &Machine, dom_mhz: &[u32]) -> Option<Box<Planes>> {
        if !m.has_shared_planes() {
            return None;
        }
        let of_domain: Vec<usize> = (0..m.domains.len()).map(|d| m.plane_of(d)).collect();
        let n = of_domain.iter().copied().max().map_or(0, |p| p + 1);
        let mut domains = vec![Vec::new(); n];
        for (d, &p) in of_domain.iter().enumerate() {
            domains[p].push(d);
        }
        let volt = domains.iter().map(|ds| m.plane_volt(ds, dom_mhz)).collect();
        Some(Box::new(Planes {
            of_domain,
            domains,
            volt,
        }))
    }
}

impl Engine {
    /// Supply voltage of the plane of `domain`, if planes are shared.
    #[inline]
    pub(super) fn plane_volt(&self, domain: usize) -> Option<f64> {
        self.planes.as_ref().map(|p| p.volt[p.of_domain[domain]])
    }

    /// `domain` has just changed frequency (its CPUs are synced, not yet
    /// refreshed). If its plane's voltage changes, sync the CPUs of the
    /// plane's other domains at their old power, forget every cached power of
    /// the plane's CPUs and return the other domains' CPUs, which the caller
    /// refreshes after the domain's own.
    pub(super) fn plane_update(&mut self, domain: usize) -> Vec<CpuId> {
        let Some(p) = self.planes.as_ref() else {
            return Vec::new();
        };
        let plane = p.of_domain[domain];
        let v = self.m.plane_volt(&p.domains[plane], &self.hv.domain_mhz);
        if v == p.volt[plane] {
            return Vec::new();
        }
        let doms = p.domains[plane].clone();
        let mut peers = Vec::new();
        for d in doms {
            for i in 0..self.m.domains[d].cpus.len() {
                let c = self.m.domains[d].cpus[i];
                if d != domain {
                    self.sync(c);
                    peers.push(c);
                }
                let rt = &mut self.cpus[c];
                rt.idle_key = None;
                rt.rate_key = None;
            }
        }
        if let Some(p) = self.planes.as_mut() {
            p.volt[plane] = v;
        }
        peers
    }
}
