//! The metric catalog of a chip: listing, validation with suggestions, pass counts, and the
//! [`MetricSpec`]s the profiler and the aggregation rules work from.
//!
//! Layer 3, built on [`crate::checked::host::ProfilerHost`]. The host side runs on the CPU
//! alone, so everything here works from a chip name without a GPU.

use crate::checked::host::{MetricProperties, ProfilerHost};
use crate::checked::Cupti;
use crate::error::{Error, Result, UnknownMetric};
use crate::model::{MetricKind, MetricSpec};

/// One base metric of the catalog.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CatalogEntry {
    /// Base name, e.g. `dram__bytes_read`.
    pub name: String,
    /// Counter, ratio or throughput.
    pub kind: MetricKind,
    /// Unit.
    pub unit: String,
    /// CUPTI's description.
    pub description: String,
}

/// The metrics one chip supports.
#[derive(Debug)]
pub struct MetricCatalog {
    cupti: Cupti,
    chip: String,
    host: ProfilerHost,
    entries: Vec<CatalogEntry>,
    /// The tables are PM sampling's (passes are counted by a PM sampling host object).
    pm_sampling: bool,
}

const KINDS: [MetricKind; 3] = [MetricKind::Counter, MetricKind::Ratio, MetricKind::Throughput];

impl MetricCatalog {
    /// Loads the catalog of `chip` (e.g. `GH100`) from CUPTI's host tables.
    pub fn for_chip(cupti: &Cupti, chip: &str) -> Result<MetricCatalog> {
        Self::of_host(cupti, chip, ProfilerHost::new(cupti, chip, None)?, false)
    }

    /// The catalog of what `chip` can PM-sample (CUPTI's PM sampling tables: smaller than
    /// the range profiler's, and a sampled set must fit in one pass).
    pub fn for_pm_sampling(cupti: &Cupti, chip: &str) -> Result<MetricCatalog> {
        Self::of_host(cupti, chip, ProfilerHost::new_pm_sampling(cupti, chip, None)?, true)
    }

    fn of_host(cupti: &Cupti, chip: &str, host: ProfilerHost, pm_sampling: bool) -> Result<MetricCatalog> {
        let mut entries = Vec::new();
        for kind in KINDS {
            for name in host.base_metrics(kind)? {
                let props = host.metric_properties(&name).unwrap_or_else(|_| MetricProperties {
                    name: name.clone(),
                    kind,
                    hw_unit: String::new(),
                    dim_unit: String::new(),
                    description: String::new(),
                });
                entries.push(CatalogEntry {
                    unit: props.unit().to_owned(),
                    description: props.description,
                    name,
                    kind,
                });
            }
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(MetricCatalog { cupti: *cupti, chip: chip.to_owned(), host, entries, pm_sampling })
    }

    /// The chip.
    pub fn chip(&self) -> &str {
        &self.chip
    }

    /// Every base metric, sorted by name.
    pub fn entries(&self) -> &[CatalogEntry] {
        &self.entries
    }

    /// Base metrics whose name contains `word` (case-insensitive).
    pub fn filter<'a>(&'a self, word: &'a str) -> impl Iterator<Item = &'a CatalogEntry> + 'a {
        let word = word.to_ascii_lowercase();
        self.entries.iter().filter(move |e| e.name.to_ascii_lowercase().contains(&word))
    }

    /// The base entry of a full metric name (`dram__bytes_read.sum` → `dram__bytes_read`).
    pub fn base_of(&self, full: &str) -> Option<&CatalogEntry> {
        let base = full.split('.').next().unwrap_or(full);
        self.entries.binary_search_by(|e| e.name.as_str().cmp(base)).ok().map(|i| &self.entries[i])
    }

    /// Full names (base plus submetric suffix) of a base metric.
    pub fn full_names(&self, entry: &CatalogEntry) -> Vec<String> {
        self.host
            .sub_metrics(&entry.name, entry.kind)
            .unwrap_or_default()
            .into_iter()
            .map(|suffix| {
                if suffix.starts_with('.') {
                    format!("{}{}", entry.name, suffix)
                } else {
                    format!("{}.{}", entry.name, suffix)
                }
            })
            .collect()
    }

    /// True when CUPTI accepts `full` in a configuration.
    pub fn is_valid(&self, full: &str) -> bool {
        self.check(full).unwrap_or(false)
    }

    /// Whether CUPTI accepts `full` in a configuration; an error when the calls that tell
    /// failed for another reason than the name: CUPTI could not make a host object, or
    /// refused a name its own tables list (a failed call is not an unknown metric).
    fn check(&self, full: &str) -> Result<bool> {
        let Some(entry) = self.base_of(full) else { return Ok(false) };
        if full == entry.name {
            // A bare base name is not collectable: CUPTI needs a rollup (.sum, .avg, ...).
            return Ok(false);
        }
        let mut scratch = ProfilerHost::new(&self.cupti, &self.chip, None)?;
        match scratch.add_metrics(&[full]) {
            Ok(()) => Ok(true),
            Err(e) if self.full_names(entry).iter().any(|n| n == full) => Err(e),
            Err(_) => Ok(false),
        }
    }

    /// Up to `n` valid names closest to `wrong`, best first.
    pub fn suggest(&self, wrong: &str, n: usize) -> Vec<String> {
        let base = wrong.split('.').next().unwrap_or(wrong);
        let mut bases: Vec<(f64, &CatalogEntry)> =
            self.entries.iter().map(|e| (strsim::jaro_winkler(base, &e.name), e)).collect();
        bases.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut candidates: Vec<(f64, String)> = Vec::new();
        for (_, entry) in bases.into_iter().take(3) {
            for full in self.full_names(entry) {
                candidates.push((strsim::jaro_winkler(wrong, &full), full));
            }
        }
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0));
        candidates.dedup_by(|a, b| a.1 == b.1);
        candidates.into_iter().take(n).map(|(_, name)| name).collect()
    }

    /// Checks every name; on failure the error names each unknown metric with suggestions.
    pub fn validate(&self, names: &[&str]) -> Result<Vec<MetricSpec>> {
        let mut unknown = Vec::new();
        let mut specs = Vec::new();
        for name in names {
            if self.check(name)? {
                specs.push(self.spec(name));
            } else {
                unknown.push(UnknownMetric { name: (*name).to_owned(), suggestions: self.suggest(name, 3) });
            }
        }
        if unknown.is_empty() {
            Ok(specs)
        } else {
            Err(Error::UnknownMetrics { chip: self.chip.clone(), unknown })
        }
    }

    /// The spec of a valid full name: CUPTI's properties of the full name when it has them,
    /// else of its base, with the unit adjusted for rate and percentage suffixes.
    pub fn spec(&self, full: &str) -> MetricSpec {
        let props = self.host.metric_properties(full).ok();
        let base = self.base_of(full);
        let kind = props.as_ref().map(|p| p.kind).or(base.map(|b| b.kind)).unwrap_or(MetricKind::Counter);
        let mut unit = props
            .as_ref()
            .map(|p| p.unit().to_owned())
            .filter(|u| !u.is_empty())
            .or(base.map(|b| b.unit.clone()))
            .unwrap_or_default();
        if full.contains(".pct_of_peak") {
            unit = "%".into();
        } else if full.ends_with(".per_second") && !unit.ends_with("/second") {
            unit = format!("{unit}/second");
        }
        let description = props
            .map(|p| p.description)
            .filter(|d| !d.is_empty())
            .or(base.map(|b| b.description.clone()))
            .unwrap_or_default();
        MetricSpec { name: full.to_owned(), kind, unit, description }
    }

    /// Replay passes the set needs (validating it first).
    pub fn passes(&self, names: &[&str]) -> Result<usize> {
        self.validate(names)?;
        let mut host = if self.pm_sampling {
            ProfilerHost::new_pm_sampling(&self.cupti, &self.chip, None)?
        } else {
            ProfilerHost::new(&self.cupti, &self.chip, None)?
        };
        host.add_metrics(names)?;
        let image = host.config_image()?;
        host.num_passes(&image)
    }
}
