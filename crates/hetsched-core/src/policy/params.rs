//! Policy specs (`"cfs[latency_ms=24]"`) and their parameters, checked
//! against each policy's documented definitions.

use std::collections::BTreeMap;

/// A documented parameter of a policy.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ParamDef {
    /// Its name, as written between the brackets of a spec.
    pub name: &'static str,
    /// Its default value, as text.
    pub default: &'static str,
    /// What it means, with its unit and range.
    pub doc: &'static str,
}

/// `params` with the boolean parameters `names` on by default: the
/// parameter list of an entry that is another entry with features switched
/// on (`eas` is `cfs` with `capacity_aware` and `eas`).
pub fn switched_on(params: Vec<ParamDef>, names: &[&str]) -> Vec<ParamDef> {
    params
        .into_iter()
        .map(|mut p| {
            if names.contains(&p.name) {
                p.default = "true";
            }
            p
        })
        .collect()
}

/// What a policy's file says about it: its registry name, a one-line
/// description and its parameters.
#[derive(Clone, Debug)]
pub struct About {
    /// Registry name.
    pub name: &'static str,
    /// One-line description.
    pub doc: &'static str,
    /// Parameters with their defaults.
    pub params: Vec<ParamDef>,
}

/// A policy name with parameters, parsed from `"name[key=value, ...]"`.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicySpec {
    /// The registry name.
    pub name: String,
    /// The parameters given, by name, as text.
    pub params: BTreeMap<String, String>,
}

/// Parse `"cfs[min_granularity_ms=4, latency_ms=24]"`.
pub fn parse_spec(s: &str) -> Result<PolicySpec, String> {
    let s = s.trim();
    let (name, rest) = match s.find('[') {
        None => (s, None),
        Some(i) => {
            if !s.ends_with(']') {
                return Err(format!("\"{s}\": missing closing ']' after the parameters"));
            }
            (&s[..i], Some(&s[i + 1..s.len() - 1]))
        }
    };
    let name = name.trim();
    if name.is_empty() {
        return Err(format!("\"{s}\": empty policy name"));
    }
    let mut params = BTreeMap::new();
    if let Some(rest) = rest {
        for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = part.split_once('=') else {
                return Err(format!(
                    "\"{s}\": parameter \"{part}\" is not of the form key=value"
                ));
            };
            let k = k.trim().to_string();
            if params.insert(k.clone(), v.trim().to_string()).is_some() {
                return Err(format!("\"{s}\": parameter \"{k}\" given twice"));
            }
        }
    }
    Ok(PolicySpec {
        name: name.to_string(),
        params,
    })
}

/// Parameters of one policy instance, checked against its definitions.
pub struct Params<'a> {
    policy: &'a str,
    given: &'a BTreeMap<String, String>,
    defs: &'a [ParamDef],
}

impl<'a> Params<'a> {
    /// Check that every given parameter is defined.
    pub fn new(
        policy: &'a str,
        given: &'a BTreeMap<String, String>,
        defs: &'a [ParamDef],
    ) -> Result<Self, String> {
        for k in given.keys() {
            if !defs.iter().any(|d| d.name == k) {
                let known: Vec<_> = defs.iter().map(|d| d.name).collect();
                return Err(if known.is_empty() {
                    format!("policy \"{policy}\" takes no parameters, got \"{k}\"")
                } else {
                    format!(
                        "policy \"{policy}\" has no parameter \"{k}\"; known: {}",
                        known.join(", ")
                    )
                });
            }
        }
        Ok(Params {
            policy,
            given,
            defs,
        })
    }
    fn raw(&self, name: &str) -> &str {
        match self.given.get(name) {
            Some(v) => v,
            None => self
                .defs
                .iter()
                .find(|d| d.name == name)
                .map(|d| d.default)
                .unwrap_or(""),
        }
    }
    /// A number parameter within `[lo, hi]`.
    pub fn f64(&self, name: &str, lo: f64, hi: f64) -> Result<f64, String> {
        let raw = self.raw(name);
        let v: f64 = raw
            .parse()
            .map_err(|_| format!("{}[{name}]: \"{raw}\" is not a number", self.policy))?;
        if !(v.is_finite() && v >= lo && v <= hi) {
            return Err(format!(
                "{}[{name}]: {v} is out of range; allowed {lo} to {hi}",
                self.policy
            ));
        }
        Ok(v)
    }
    /// A boolean parameter (`true`/`false`/`1`/`0`).
    pub fn bool(&self, name: &str) -> Result<bool, String> {
        match self.raw(name) {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            other => Err(format!(
                "{}[{name}]: \"{other}\" is not a boolean; allowed true or false",
                self.policy
            )),
        }
    }
    /// A parameter from a fixed set of words.
    pub fn choice(&self, name: &str, allowed: &[&str]) -> Result<String, String> {
        let v = self.raw(name);
        if allowed.contains(&v) {
            Ok(v.to_string())
        } else {
            Err(format!(
                "{}[{name}]: \"{v}\" is not allowed; allowed: {}",
                self.policy,
                allowed.join(", ")
            ))
        }
    }
    /// Whether the parameter was given explicitly.
    pub fn given(&self, name: &str) -> bool {
        self.given.contains_key(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_parsing() {
        let s = parse_spec("cfs[min_granularity_ms=4, latency_ms = 24]").unwrap();
        assert_eq!(s.name, "cfs");
        assert_eq!(s.params["min_granularity_ms"], "4");
        assert_eq!(s.params["latency_ms"], "24");
        assert_eq!(parse_spec("pinned").unwrap().params.len(), 0);
        assert!(parse_spec("cfs[x=1")
            .unwrap_err()
            .contains("missing closing"));
        assert!(parse_spec("cfs[x]").unwrap_err().contains("key=value"));
        assert!(parse_spec("cfs[x=1,x=2]").unwrap_err().contains("twice"));
    }
}
