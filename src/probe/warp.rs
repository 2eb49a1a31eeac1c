//! Warp-aggregated reductions: the `warpred` pseudo-instruction of probe snippets.
//!
//! A snippet may write `warpred.global.add.u64 [MAP+0], %%n;` (also `max`/`min`, on `u32`,
//! `s32` or `u64`): the value is reduced over the lanes of the warp that execute it together
//! (`activemask`, then `redux.sync` on 32-bit parts) and one of them (the highest active
//! lane) does the single `red`. The sum of 64-bit values is exact modulo 2⁶⁴, as the `red`s
//! it replaces were: the low 32 bits go through `redux` as two 16-bit halves (32 lanes × 2¹⁶
//! fit in 32 bits) and the high 32 bits, which only count modulo 2³², as one part. A 64-bit
//! maximum (minimum) reduces the high halves, then the low halves of the lanes that hold the
//! extreme high half.
//!
//! The reduction is only right when every lane of the warp names the same address, so it is
//! made only for per-warp and per-block records; with per-thread records, or a module whose
//! target has no `redux.sync` (below `sm_80`), `warpred` is the plain `red` it stands for.
//!
//! `sectorbytes dst, [address], width;` counts memory traffic the way the L1 does (ncu's
//! `l1tex__t_bytes_*`): among the lanes that run it together, those whose (naturally
//! aligned, at most 32-byte) access falls in the same 32-byte sector are grouped
//! (`match.any.sync`) and one of each group adds 32 to `dst`. A warp's float4 loads of
//! consecutive elements count 16 bytes a lane, a load of one address by the whole warp 32
//! bytes in all. Without `match.any.sync` it adds `width`, the thread's own bytes.

use std::fmt::Write as _;

use super::ptx::{parse_body, Instr, Stmt};

/// The reduction's opcode word.
pub const OPCODE: &str = "warpred";
/// The sector count's opcode word.
pub const SECTORS: &str = "sectorbytes";

/// The statements `sectorbytes dst, [address], width` stands for (see the module doc):
/// grouped by sector when `grouped`, else `dst += width`.
pub fn expand_sectors(instr: &Instr, grouped: bool) -> Result<Vec<Stmt>, String> {
    let [dst, addr, width] = instr.operands.as_slice() else {
        return Err(format!("{} needs a register, an [address] and a width", instr.text()));
    };
    let Some(addr) = addr.strip_prefix('[').and_then(|a| a.strip_suffix(']')).map(str::trim) else {
        return Err(format!("{}: the address must be in [ ]", instr.text()));
    };
    if instr.pred.is_some() {
        return Err(format!("{} takes no guard", instr.text()));
    }
    if !grouped {
        return parse_body(&format!("add.u64 {dst}, {dst}, {width};\n"), 1).map_err(|e| e.to_string());
    }
    let (base, offset) = match addr.split_once('+') {
        Some((b, o)) => (b.trim(), o.trim().parse::<i64>().map_err(|_| format!("{}: offset {o:?}", instr.text()))?),
        None => (addr, 0),
    };
    let mut s =
        format!("{{\n.reg .b32 %gmp_m<3>;\n.reg .b64 %gmp_ma;\n.reg .pred %gmp_mp;\nmov.u64 %gmp_ma, {base};\n");
    if offset != 0 {
        let _ = writeln!(s, "add.s64 %gmp_ma, %gmp_ma, {offset};");
    }
    let _ = write!(
        s,
        "shr.u64 %gmp_ma, %gmp_ma, 5;\n\
         activemask.b32 %gmp_m0;\n\
         match.any.sync.b64 %gmp_m1, %gmp_ma, %gmp_m0;\n\
         bfind.u32 %gmp_m1, %gmp_m1;\n\
         mov.u32 %gmp_m2, %laneid;\n\
         setp.eq.u32 %gmp_mp, %gmp_m1, %gmp_m2;\n\
         @%gmp_mp add.u64 {dst}, {dst}, 32;\n}}\n"
    );
    parse_body(&s, 1).map_err(|e| e.to_string())
}

/// Whether a module of this header can use `activemask` and `redux.sync` (`.target sm_80`
/// or later, `.version` 7.0 or later).
pub fn can_reduce(header: &[String]) -> bool {
    let mut sm = None;
    let mut version = None;
    for h in header {
        let mut words = h.split(|c: char| c.is_whitespace() || c == ',').filter(|w| !w.is_empty());
        match words.next() {
            Some(".target") => {
                sm = words.find_map(|w| {
                    w.strip_prefix("sm_").map(|n| n.trim_end_matches(char::is_alphabetic).parse::<u32>().unwrap_or(0))
                });
            }
            Some(".version") => {
                version = words.next().and_then(|v| {
                    let (a, b) = v.split_once('.')?;
                    Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?))
                });
            }
            _ => {}
        }
    }
    sm.is_some_and(|s| s >= 80) && version.is_some_and(|v| v >= (7, 0))
}

/// The statements `warpred` stands for: the reduction over the warp's active lanes and one
/// lane's `red` when `aggregate`, else the plain `red`.
pub fn expand(instr: &Instr, aggregate: bool) -> Result<Vec<Stmt>, String> {
    let red = instr.opcode.strip_prefix("warp").unwrap_or(&instr.opcode).to_string();
    if instr.pred.is_some() {
        return Err(format!("{} takes no guard", instr.text()));
    }
    let [addr, value] = instr.operands.as_slice() else {
        return Err(format!("{} needs an address and a value", instr.text()));
    };
    let op = ["add", "max", "min"].into_iter().find(|m| instr.has(m));
    let ty = ["u32", "s32", "u64"].into_iter().find(|m| instr.has(m));
    let (Some(op), Some(ty)) = (op, ty) else {
        return Err(format!("{} must be an add, max or min on u32, s32 or u64", instr.text()));
    };
    if !aggregate {
        return Ok(vec![Stmt::Instr(Instr { pred: None, opcode: red, operands: vec![addr.clone(), value.clone()] })]);
    }
    // %gmp_w0 mask, w1..w3 parts, w4 leader lane, w5 this lane; %gmp_wd0 the result.
    let mut s =
        String::from("{\n.reg .b32 %gmp_w<6>;\n.reg .b64 %gmp_wd<2>;\n.reg .pred %gmp_wp;\nactivemask.b32 %gmp_w0;\n");
    match (op, ty) {
        (_, "u32" | "s32") => {
            let rty = if op == "add" { "u32" } else { ty };
            let _ = writeln!(s, "mov.b32 %gmp_w1, {value};\nredux.sync.{op}.{rty} %gmp_w1, %gmp_w1, %gmp_w0;");
        }
        ("add", _) => {
            let _ = write!(
                s,
                "cvt.u32.u64 %gmp_w1, {value};\n\
                 and.b32 %gmp_w2, %gmp_w1, 65535;\n\
                 shr.u32 %gmp_w1, %gmp_w1, 16;\n\
                 shr.u64 %gmp_wd0, {value}, 32;\n\
                 cvt.u32.u64 %gmp_w3, %gmp_wd0;\n\
                 redux.sync.add.u32 %gmp_w1, %gmp_w1, %gmp_w0;\n\
                 redux.sync.add.u32 %gmp_w2, %gmp_w2, %gmp_w0;\n\
                 redux.sync.add.u32 %gmp_w3, %gmp_w3, %gmp_w0;\n\
                 cvt.u64.u32 %gmp_wd0, %gmp_w1;\n\
                 shl.b64 %gmp_wd0, %gmp_wd0, 16;\n\
                 cvt.u64.u32 %gmp_wd1, %gmp_w2;\n\
                 add.u64 %gmp_wd0, %gmp_wd0, %gmp_wd1;\n\
                 cvt.u64.u32 %gmp_wd1, %gmp_w3;\n\
                 shl.b64 %gmp_wd1, %gmp_wd1, 32;\n\
                 add.u64 %gmp_wd0, %gmp_wd0, %gmp_wd1;\n"
            );
        }
        _ => {
            // The extreme high half, then the extreme low half among the lanes holding it
            // (the others offer the identity).
            let identity = if op == "max" { "0" } else { "4294967295" };
            let _ = write!(
                s,
                "shr.u64 %gmp_wd0, {value}, 32;\n\
                 cvt.u32.u64 %gmp_w1, %gmp_wd0;\n\
                 cvt.u32.u64 %gmp_w2, {value};\n\
                 redux.sync.{op}.u32 %gmp_w3, %gmp_w1, %gmp_w0;\n\
                 setp.eq.u32 %gmp_wp, %gmp_w1, %gmp_w3;\n\
                 selp.b32 %gmp_w2, %gmp_w2, {identity}, %gmp_wp;\n\
                 redux.sync.{op}.u32 %gmp_w2, %gmp_w2, %gmp_w0;\n\
                 mov.b64 %gmp_wd0, {{%gmp_w2, %gmp_w3}};\n"
            );
        }
    }
    let result = if ty == "u64" { "%gmp_wd0" } else { "%gmp_w1" };
    let _ = write!(
        s,
        "bfind.u32 %gmp_w4, %gmp_w0;\n\
         mov.u32 %gmp_w5, %laneid;\n\
         setp.eq.u32 %gmp_wp, %gmp_w4, %gmp_w5;\n\
         @%gmp_wp {red} {addr}, {result};\n}}\n"
    );
    parse_body(&s, 1).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::ptx::parse_instr;

    fn text(stmts: &[Stmt]) -> String {
        stmts
            .iter()
            .map(|s| match s {
                Stmt::Instr(i) => i.text(),
                Stmt::Directive(d) => format!("{d};"),
                Stmt::Open => "{".into(),
                Stmt::Close => "}".into(),
                Stmt::Label(l) => format!("{l}:"),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn sectors_grouped_by_match_any() {
        let i = parse_instr("sectorbytes %gmp_g_rd, [%rd5+16], 16").unwrap();
        let t = text(&expand_sectors(&i, true).unwrap());
        assert!(
            t.contains("mov.u64\t%gmp_ma, %rd5;\nadd.s64\t%gmp_ma, %gmp_ma, 16;\nshr.u64\t%gmp_ma, %gmp_ma, 5;"),
            "{t}"
        );
        assert!(t.contains("match.any.sync.b64\t%gmp_m1, %gmp_ma, %gmp_m0;"), "{t}");
        assert!(t.contains("@%gmp_mp add.u64\t%gmp_g_rd, %gmp_g_rd, 32;"), "{t}");
        let i = parse_instr("sectorbytes %gmp_g_rd, [g_scale], 4").unwrap();
        assert!(!text(&expand_sectors(&i, true).unwrap()).contains("add.s64"));
        assert_eq!(text(&expand_sectors(&i, false).unwrap()), "add.u64\t%gmp_g_rd, %gmp_g_rd, 4;");
        assert!(expand_sectors(&parse_instr("sectorbytes %r, %rd5, 4").unwrap(), true).is_err());
    }

    #[test]
    fn targets_with_redux() {
        let h = |v: &str, t: &str| vec![format!(".version {v}"), format!(".target {t}"), ".address_size 64".into()];
        assert!(can_reduce(&h("8.7", "sm_90a")));
        assert!(can_reduce(&h("7.0", "sm_80")));
        assert!(!can_reduce(&h("7.0", "sm_75")));
        assert!(!can_reduce(&h("6.4", "sm_80")));
        assert!(can_reduce(&h("9.0", "sm_120, debug")));
    }

    #[test]
    fn sums_u64_in_three_exact_parts() {
        let i = parse_instr("warpred.global.add.u64 [%gmp_map_x+8], %gmp_x_wr").unwrap();
        let t = text(&expand(&i, true).unwrap());
        assert!(t.starts_with("{\n.reg .b32 %gmp_w<6>;"), "{t}");
        assert_eq!(t.matches("redux.sync.add.u32").count(), 3, "{t}");
        assert!(t.contains("and.b32\t%gmp_w2, %gmp_w1, 65535;"), "{t}");
        assert!(t.ends_with("@%gmp_wp red.global.add.u64\t[%gmp_map_x+8], %gmp_wd0;\n}"), "{t}");
        let plain = text(&expand(&i, false).unwrap());
        assert_eq!(plain, "red.global.add.u64\t[%gmp_map_x+8], %gmp_x_wr;");
    }

    #[test]
    fn max_u64_and_u32_and_refusals() {
        let i = parse_instr("warpred.global.max.u64 [M], %t").unwrap();
        let t = text(&expand(&i, true).unwrap());
        assert_eq!(t.matches("redux.sync.max.u32").count(), 2, "{t}");
        assert!(t.contains("selp.b32\t%gmp_w2, %gmp_w2, 0, %gmp_wp;"), "{t}");
        let i = parse_instr("warpred.global.min.u64 [M], %t").unwrap();
        assert!(text(&expand(&i, true).unwrap()).contains("4294967295"));
        let i = parse_instr("warpred.global.add.u32 [M+20], 1").unwrap();
        let t = text(&expand(&i, true).unwrap());
        assert!(t.contains("redux.sync.add.u32\t%gmp_w1, %gmp_w1, %gmp_w0;"), "{t}");
        assert!(t.contains("red.global.add.u32\t[M+20], %gmp_w1;"), "{t}");
        for bad in
            ["warpred.global.add.f32 [M], %f", "@%p warpred.global.add.u64 [M], %r", "warpred.global.add.u64 [M]"]
        {
            assert!(expand(&parse_instr(bad).unwrap(), true).is_err(), "{bad}");
        }
    }
}
