//! Pruning a module to one kernel, and finding that kernel by name.
//!
//! The kernel's name is matched exactly against the mangled names in the module. When no
//! name matches (a name that lost characters on its way, a demangled name), the best match
//! is taken: first an equal demangled name, then the closest by normalized Levenshtein
//! similarity over the demangled names. Which rule matched is returned, so a fallback is
//! always reported.

use std::collections::BTreeSet;

use super::ptx::{identifiers, Item, Module};

/// How the kernel was found.
#[derive(Clone, Debug, PartialEq)]
pub enum NameMatch {
    /// The mangled name matched exactly.
    Exact,
    /// The demangled names are equal.
    Demangled,
    /// The closest name, with its similarity (0 to 1).
    BestMatch(f64),
}

impl std::fmt::Display for NameMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameMatch::Exact => f.write_str("exact"),
            NameMatch::Demangled => f.write_str("demangled name"),
            NameMatch::BestMatch(s) => write!(f, "best match (similarity {s:.2})"),
        }
    }
}

/// Below this similarity the best match is refused.
pub const MIN_SIMILARITY: f64 = 0.8;

/// A C++ name demangled for display, or the name itself.
pub fn demangle(name: &str) -> String {
    cpp_demangle::Symbol::new(name).ok().and_then(|s| s.demangle().ok()).unwrap_or_else(|| name.to_string())
}

/// The module's kernel for `wanted`, and how it matched; `None` if nothing is close enough.
pub fn find_kernel(module: &Module, wanted: &str) -> Option<(String, NameMatch)> {
    let names: Vec<&str> = module.kernels().map(|f| f.name.as_str()).collect();
    if names.contains(&wanted) {
        return Some((wanted.to_string(), NameMatch::Exact));
    }
    let wanted_d = demangle(wanted);
    if let Some(n) = names.iter().find(|n| demangle(n) == wanted_d) {
        return Some((n.to_string(), NameMatch::Demangled));
    }
    names
        .iter()
        .map(|n| (n, strsim::normalized_levenshtein(&demangle(n), &wanted_d)))
        .filter(|(_, s)| *s >= MIN_SIMILARITY)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(n, s)| (n.to_string(), NameMatch::BestMatch(s)))
}

/// The module reduced to `kernel` and the device functions and variables it uses,
/// transitively (other kernels, unused functions and variables, line info and debug
/// sections are dropped). `None` if the module has no kernel of that exact name.
pub fn prune(module: &Module, kernel: &str) -> Option<Module> {
    module.kernels().find(|f| f.name == kernel)?;
    let mut keep: BTreeSet<String> = BTreeSet::new();
    let mut todo = vec![kernel.to_string()];
    while let Some(name) = todo.pop() {
        if !keep.insert(name.clone()) {
            continue;
        }
        for item in &module.items {
            let refs: Vec<&str> = match item {
                Item::Function(f) if f.name == name => f.referenced(),
                Item::Variable(v) if v.name == name => identifiers(v.text.split('=').nth(1).unwrap_or("")).collect(),
                _ => continue,
            };
            for r in refs {
                if !r.starts_with('%') && !keep.contains(r) {
                    todo.push(r.to_string());
                }
            }
        }
    }
    let items = module
        .items
        .iter()
        .filter(|item| match item {
            Item::Function(f) => keep.contains(&f.name),
            Item::Variable(v) => keep.contains(&v.name),
            Item::Other(_) => false,
        })
        .cloned()
        .collect();
    Some(Module { header: module.header.clone(), items })
}
