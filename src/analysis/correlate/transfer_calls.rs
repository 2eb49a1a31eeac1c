//! Memcpy and memset calls that no activity record timed, described for the warning that
//! counts them: grouped by API and by what their parameters asked for.
//!
//! Imports only `model`; `build` uses it.

use std::collections::BTreeMap;

use crate::model::TransferCall;

/// Transfer calls grouped by what they asked for, the largest groups first, e.g.
/// `6 × cudaMemcpyAsync_v3020 (memcpy_other, cudaMemcpyKind 0, 0 B, stream 0x0)`; at most
/// four groups, then how many calls the rest hold.
pub(super) fn describe_calls(calls: &[&TransferCall]) -> String {
    let mut groups: BTreeMap<String, (u64, u32)> = BTreeMap::new();
    for call in calls {
        let what = match &call.params {
            Some(p) => {
                let mut parts = vec![p.kind.as_str().to_owned()];
                parts.extend(p.cuda_kind.map(|k| format!("cudaMemcpyKind {k}")));
                parts.push(if p.copies == 1 {
                    format!("{} B", p.bytes)
                } else {
                    format!("{} B in {} copies", p.bytes, p.copies)
                });
                parts.extend(p.stream.map(|h| format!("stream {h:#x}")));
                parts.extend(p.error.map(|e| format!("failed with error {e}")));
                format!("{} ({})", call.api_name, parts.join(", "))
            }
            None => format!("{} (parameters not read)", call.api_name),
        };
        let g = groups.entry(what).or_insert((0, call.correlation_id));
        g.0 += 1;
    }
    let mut groups: Vec<(String, (u64, u32))> = groups.into_iter().collect();
    groups.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.1 .1.cmp(&b.1 .1)));
    let shown: Vec<String> = groups.iter().take(4).map(|(what, (n, _))| format!("{n} × {what}")).collect();
    let rest: u64 = groups.iter().skip(4).map(|(_, (n, _))| n).sum();
    let mut text = shown.join("; ");
    if rest > 0 {
        text.push_str(&format!("; {rest} other(s)"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{TransferKind, TransferParams};

    fn call(correlation_id: u32, api: &'static str, params: Option<TransferParams>) -> TransferCall {
        TransferCall { correlation_id, thread: 1, range: None, api_name: api.into(), untimed: None, params }
    }

    fn copy(cuda_kind: i32, bytes: u64, stream: u64) -> Option<TransferParams> {
        Some(TransferParams {
            kind: TransferKind::MemcpyOther,
            cuda_kind: Some(cuda_kind),
            bytes,
            copies: 1,
            stream: Some(stream),
            error: None,
        })
    }

    #[test]
    fn calls_are_grouped_by_what_they_asked_for_largest_group_first() {
        let failed = TransferParams {
            kind: TransferKind::Memset,
            cuda_kind: None,
            bytes: 4096,
            copies: 1,
            stream: None,
            error: Some(700),
        };
        let calls = [
            call(5, "cudaMemsetAsync_v3020", Some(failed)),
            call(7, "cudaMemcpyAsync_v3020", copy(0, 0, 0x20)),
            call(9, "cudaMemcpyAsync_v3020", copy(0, 0, 0x20)),
            call(11, "cudaMemcpy2D_v3020", None),
        ];
        let refs: Vec<&TransferCall> = calls.iter().collect();
        assert_eq!(
            describe_calls(&refs),
            "2 × cudaMemcpyAsync_v3020 (memcpy_other, cudaMemcpyKind 0, 0 B, stream 0x20); \
             1 × cudaMemsetAsync_v3020 (memset, 4096 B, failed with error 700); \
             1 × cudaMemcpy2D_v3020 (parameters not read)"
        );
    }

    #[test]
    fn past_four_groups_the_rest_are_counted() {
        let calls: Vec<TransferCall> =
            (0..7).map(|i| call(i, "cuMemcpyHtoDAsync_v2", copy(1, u64::from(i) * 8, 0))).collect();
        let refs: Vec<&TransferCall> = calls.iter().collect();
        let text = describe_calls(&refs);
        assert!(
            text.starts_with("1 × cuMemcpyHtoDAsync_v2 (memcpy_other, cudaMemcpyKind 1, 0 B, stream 0x0); "),
            "{text}"
        );
        assert!(text.ends_with("; 3 other(s)"), "{text}");
        assert_eq!(text.matches(" × ").count(), 4);
    }
}
