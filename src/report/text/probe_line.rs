//! The summary's probe line: launches PTX-probed, counted by SASS metrics and not probed,
//! the CUDA graph nodes probed inside their graphs, and the host cost.
//!
//! Imports only the report's model; `summary` uses it.

use crate::report::model::ProbedLaunch;

/// `probes: 2109 launch(es): 0 PTX-probed, 2109 counted by SASS metrics, 0 not probed |
/// host cost 2118.9 ms (1005 us per probed launch: the wait for the launch and reading its
/// counts)`.
pub(crate) fn probe_line(probes: &[ProbedLaunch]) -> Option<String> {
    if probes.is_empty() {
        return None;
    }
    let (nodes, launches): (Vec<_>, Vec<_>) = probes.iter().partition(|l| l.graph_launches.is_some());
    let by = |s: &str| launches.iter().filter(|l| l.status == "probed" && l.source.as_deref() == Some(s)).count();
    let (ptx, sass) = (by("ptx-probe"), by("sass-metrics"));
    let not = launches.len() - ptx - sass;
    let us: f64 = launches.iter().map(|l| l.readback_us).sum();
    let per = if ptx + sass > 0 { us / (ptx + sass) as f64 } else { 0.0 };
    let graphs = if nodes.is_empty() {
        String::new()
    } else {
        let counted = nodes.iter().filter(|l| !l.totals.is_empty()).count();
        let sass_rows = nodes.iter().filter(|l| l.source.as_deref() == Some("sass-metrics")).count();
        let sass = if sass_rows > 0 {
            format!(", {sass_rows} counted by SASS metrics (a function's nodes in one graph share a row)")
        } else {
            String::new()
        };
        format!(
            " | CUDA graph nodes: {} built probed{sass}, {counted} with counts per graph launch",
            nodes.len() - sass_rows
        )
    };
    Some(format!(
        "probes: {} launch(es): {ptx} PTX-probed, {sass} counted by SASS metrics, {not} not probed{graphs} | host cost \
         {:.1} ms ({per:.0} us per probed launch: the wait for the launch and reading its counts)",
        launches.len(),
        us / 1e3
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::ProbeTotal;

    fn launch(status: &str, source: Option<&str>, graph_launches: Option<u64>, counted: bool) -> ProbedLaunch {
        ProbedLaunch {
            status: status.into(),
            source: source.map(Into::into),
            graph_launches,
            readback_us: if graph_launches.is_some() { 0.0 } else { 100.0 },
            totals: if counted {
                vec![ProbeTotal {
                    probe: "exec_count".into(),
                    field: "thread_instructions".into(),
                    total: 7,
                    records: 1,
                }]
            } else {
                Vec::new()
            },
            ..Default::default()
        }
    }

    #[test]
    fn graph_nodes_are_counted_apart_from_launches() {
        let probes = vec![
            launch("probed", Some("ptx-probe"), None, true),
            launch("probed", Some("sass-metrics"), None, true),
            launch("not probed: no PTX", None, None, false),
            launch(
                "probed in a CUDA graph: counts per graph launch, over 5 launch(es)",
                Some("ptx-probe"),
                Some(5),
                true,
            ),
            launch("not probed: its CUDA graph was never launched", None, Some(0), false),
        ];
        assert_eq!(
            probe_line(&probes).unwrap(),
            "probes: 3 launch(es): 1 PTX-probed, 1 counted by SASS metrics, 1 not probed | CUDA graph nodes: 2 built \
             probed, 1 with counts per graph launch | host cost 0.3 ms (150 us per probed launch: the wait for the \
             launch and reading its counts)"
        );
        assert_eq!(probe_line(&[]), None);
        let mut with_sass = probes.clone();
        with_sass.push(launch(
            "counted by SASS metrics in a CUDA graph: counts per graph launch, over 5 launch(es)",
            Some("sass-metrics"),
            Some(5),
            true,
        ));
        assert!(
            probe_line(&with_sass).unwrap().contains(
                "CUDA graph nodes: 2 built probed, 1 counted by SASS metrics (a function's nodes in one graph share a \
                 row), 2 with counts per graph launch"
            ),
            "{}",
            probe_line(&with_sass).unwrap()
        );
    }
}
