//! Injecting probes into one kernel of a (pruned) module.
//!
//! For each probe the kernel gets a parameter `gmprof_map_<probe>` (a `.u64` global address
//! appended after its own parameters) and, after its leading declarations, a prologue that
//! plans the maps: it computes the linear thread, warp and block indices and each probe's
//! record address (`MAP`), then zeroes the probes' registers and runs their `kernel.entry`
//! hooks. `kernel.exit` hooks go before every `ret` and `exit` of the kernel (a guarded one
//! is rewritten as a branch over the hook and an unguarded `ret`); instruction hooks go
//! before or after each matching instruction. All added names start with `gmp_`/`%gmp_`, and
//! a module that already uses that prefix is refused.
//!
//! The device functions the kernel calls directly are probed too ([`calls`]):
//! they get the probes' state through an extra parameter, so their loads, stores and
//! instructions count in the same registers as the kernel's. Those whose address is taken
//! are not, and their global loads and stores are counted in [`InjectReport::unprobed`]. A
//! snippet's `warpred` reductions become warp-aggregated ones ([`warp`]).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::calls::{self, StateLayout};
use super::ptx::{parse_body, Function, FunctionKind, Instr, Item, Module, Param, Stmt};
use super::spec::{Hook, Layout, Position, ProbeSpec};
use super::warp;

/// How the kernel finds its map buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MapVia {
    /// A `.param .u64 gmprof_map_<probe>` appended to the kernel's parameters: the launch
    /// passes the addresses as extra arguments.
    #[default]
    Param,
    /// A module-scope `.global .u64 gmprof_map_<probe>` the host sets before the launch:
    /// the kernel's parameters are unchanged, so the launch's arguments are too.
    Global,
}

/// What injection did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InjectReport {
    /// The map parameters (or, with [`MapVia::Global`], variables) added, in order (one per
    /// probe).
    pub map_params: Vec<String>,
    /// Hooks placed, per probe, in probe order.
    pub hooks_placed: Vec<usize>,
    /// Kernel exits (`ret`/`exit`) found.
    pub exits: usize,
    /// Memory instructions the probes cannot see, as `(what, count)`: global loads and
    /// stores in device functions called through a pointer (when a probe hooks instructions),
    /// and generic-address loads and stores, atomics and asynchronous copies in the kernel and
    /// the functions it calls.
    pub unprobed: Vec<(String, usize)>,
}

/// An injection error.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("injecting into {kernel}: {message}")]
pub struct InjectError {
    /// The kernel.
    pub kernel: String,
    /// What went wrong.
    pub message: String,
}

/// The width in bytes of a load or store (`ld.global.v4.f32` → 16), if its type is known.
pub fn access_bytes(instr: &Instr) -> Option<u64> {
    let mut vec = 1;
    let mut size = None;
    for m in instr.opcode.split('.').skip(1) {
        match m {
            "v2" => vec = 2,
            "v4" => vec = 4,
            "v8" => vec = 8,
            "b8" | "u8" | "s8" => size = Some(1),
            "b16" | "u16" | "s16" | "f16" | "bf16" => size = Some(2),
            "b32" | "u32" | "s32" | "f32" | "f16x2" | "bf16x2" | "tf32" => size = Some(4),
            "b64" | "u64" | "s64" | "f64" => size = Some(8),
            "b128" => size = Some(16),
            _ => {}
        }
    }
    size.map(|s| s * vec)
}

/// Whether `instr` is at tracepoint `at`: its opcode's first word is `at`'s and it has all
/// of `at`'s modifiers.
pub fn matches(at: &str, instr: &Instr) -> bool {
    let mut parts = at.split('.');
    parts.next() == Some(instr.base()) && parts.all(|m| instr.has(m))
}

fn is_exit(i: &Instr) -> bool {
    matches!(i.base(), "ret" | "exit")
}

fn ends_block(i: &Instr) -> bool {
    matches!(i.base(), "bra" | "brx" | "ret" | "exit" | "trap")
}

/// Replaces whole words of `text` (identifier characters `[A-Za-z0-9_]`) by `f(word)`,
/// leaving words that follow `%`, `.` or `$` alone.
fn replace_words(text: &str, mut f: impl FnMut(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let mut prev = ' ';
    let mut flush = |word: &mut String, out: &mut String, prev: char| {
        if !word.is_empty() {
            match (!matches!(prev, '%' | '.' | '$')).then(|| f(word)).flatten() {
                Some(r) => out.push_str(&r),
                None => out.push_str(word),
            }
            word.clear();
        }
    };
    let mut before_word = ' ';
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            if word.is_empty() {
                before_word = prev;
            }
            word.push(c);
        } else {
            flush(&mut word, &mut out, before_word);
            out.push(c);
        }
        prev = c;
    }
    flush(&mut word, &mut out, before_word);
    out
}

struct Ctx<'a> {
    kernel: &'a str,
    skip_labels: usize,
    /// Call arguments added so far (their names are numbered).
    args: usize,
    /// The module's target has `redux.sync`.
    reduce: bool,
    /// The layout of the probe whose snippet is being expanded.
    layout: Option<Layout>,
}

impl Ctx<'_> {
    fn err(&self, message: impl Into<String>) -> InjectError {
        InjectError { kernel: self.kernel.to_string(), message: message.into() }
    }

    /// A probe's snippet with its names filled in, parsed.
    fn expand(&self, probe: &ProbeSpec, hook: &Hook, at: Option<&Instr>) -> Result<Vec<Stmt>, InjectError> {
        let mut text = hook.snippet.clone();
        for r in &probe.registers {
            text = text.replace(&format!("%%{}", r.name), &format!("%gmp_{}_{}", probe.name, r.name));
        }
        if text.contains("%%") {
            return Err(self.err(format!("probe {}: a %% name in {:?} is not one of its registers", probe.name, text)));
        }
        let operands: Vec<String> = at.map(|i| i.operands.clone()).unwrap_or_default();
        let addr = operands
            .iter()
            .find_map(|o| o.strip_prefix('[').and_then(|o| o.strip_suffix(']')).map(|o| o.trim().to_string()));
        let bytes = at.and_then(access_bytes);
        let mut missing = None;
        let text = replace_words(&text, |w| {
            let got = match w {
                "MAP" => Some(format!("%gmp_map_{}", probe.name)),
                "LEADER" => Some("%gmp_leader".to_string()),
                "LANE0" => Some("%gmp_lane0".to_string()),
                "OUT" => operands.first().cloned(),
                "IN1" | "IN2" | "IN3" => operands.get(w[2..].parse::<usize>().unwrap_or(9)).cloned(),
                "ADDR" => addr.clone(),
                "BYTES" => bytes.map(|b| b.to_string()),
                _ => return None,
            };
            if got.is_none() {
                missing = Some(w.to_string());
            }
            got
        });
        if let Some(w) = missing {
            let place = at.map_or_else(|| hook.at.clone(), Instr::text);
            return Err(self.err(format!("probe {}: {w} has no value at {place}", probe.name)));
        }
        let stmts = parse_body(&text, 1).map_err(|e| self.err(format!("probe {}: snippet: {e}", probe.name)))?;
        let aggregate = self.reduce && self.layout.is_some_and(|l| l != Layout::Thread);
        let mut out = Vec::with_capacity(stmts.len());
        for s in stmts {
            match s {
                Stmt::Instr(i) if i.base() == warp::OPCODE => {
                    out.extend(
                        warp::expand(&i, aggregate).map_err(|e| self.err(format!("probe {}: {e}", probe.name)))?,
                    );
                }
                Stmt::Instr(i) if i.base() == warp::SECTORS => {
                    let grouped = warp::expand_sectors(&i, self.reduce);
                    out.extend(grouped.map_err(|e| self.err(format!("probe {}: {e}", probe.name)))?);
                }
                other => out.push(other),
            }
        }
        Ok(out)
    }

    /// `stmts` run under `guard`: each instruction guarded when they are all plain
    /// instructions, else a scope branched over.
    fn guarded(&mut self, guard: Option<&str>, stmts: Vec<Stmt>) -> Vec<Stmt> {
        let Some(g) = guard else {
            return scoped(stmts);
        };
        if stmts.iter().all(|s| matches!(s, Stmt::Instr(i) if i.pred.is_none())) {
            return stmts
                .into_iter()
                .map(|s| match s {
                    Stmt::Instr(mut i) => {
                        i.pred = Some(g.to_string());
                        Stmt::Instr(i)
                    }
                    other => other,
                })
                .collect();
        }
        let label = self.skip_label();
        let mut out =
            vec![Stmt::Instr(Instr { pred: Some(negate(g)), opcode: "bra".into(), operands: vec![label.clone()] })];
        out.extend(scoped(stmts));
        out.push(Stmt::Label(label));
        out
    }

    fn skip_label(&mut self) -> String {
        self.skip_labels += 1;
        format!("$gmp_skip_{}", self.skip_labels)
    }
}

fn scoped(stmts: Vec<Stmt>) -> Vec<Stmt> {
    if stmts.iter().any(|s| matches!(s, Stmt::Directive(_))) {
        let mut out = vec![Stmt::Open];
        out.extend(stmts);
        out.push(Stmt::Close);
        out
    } else {
        stmts
    }
}

fn negate(guard: &str) -> String {
    guard.strip_prefix('!').map_or_else(|| format!("!{guard}"), str::to_string)
}

fn instr(text: &str) -> Stmt {
    // The injector's own instructions are fixed text: parse_instr cannot fail on them.
    Stmt::Instr(super::ptx::parse_instr(text).unwrap_or_else(|e| Instr { pred: None, opcode: e, operands: vec![] }))
}

/// The prologue that plans the maps (see the module doc).
fn prologue(probes: &[ProbeSpec], via: MapVia) -> Vec<Stmt> {
    let mut s = String::new();
    s.push_str(
        "{\n.reg .b32 %gmp_s;\n.reg .b64 %gmp_v<8>;\n.reg .b64 %gmp_thread, %gmp_block, %gmp_bsize, %gmp_warp;\n",
    );
    for (i, sreg) in ["%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z"].iter().enumerate() {
        let _ = writeln!(s, "mov.u32 %gmp_s, {sreg};\ncvt.u64.u32 %gmp_v{i}, %gmp_s;");
    }
    s.push_str(
        "mad.lo.u64 %gmp_thread, %gmp_v2, %gmp_v4, %gmp_v1;\n\
         mad.lo.u64 %gmp_thread, %gmp_thread, %gmp_v3, %gmp_v0;\n\
         mul.lo.u64 %gmp_bsize, %gmp_v3, %gmp_v4;\n\
         mul.lo.u64 %gmp_bsize, %gmp_bsize, %gmp_v5;\n",
    );
    for (i, sreg) in ["%ctaid.x", "%ctaid.y", "%ctaid.z", "%nctaid.x", "%nctaid.y"].iter().enumerate() {
        let _ = writeln!(s, "mov.u32 %gmp_s, {sreg};\ncvt.u64.u32 %gmp_v{i}, %gmp_s;");
    }
    s.push_str(
        "mad.lo.u64 %gmp_block, %gmp_v2, %gmp_v4, %gmp_v1;\n\
         mad.lo.u64 %gmp_block, %gmp_block, %gmp_v3, %gmp_v0;\n\
         add.u64 %gmp_v6, %gmp_bsize, 31;\n\
         shr.u64 %gmp_v6, %gmp_v6, 5;\n\
         shr.u64 %gmp_v7, %gmp_thread, 5;\n\
         mad.lo.u64 %gmp_warp, %gmp_block, %gmp_v6, %gmp_v7;\n\
         setp.eq.u64 %gmp_leader, %gmp_thread, 0;\n\
         and.b64 %gmp_v7, %gmp_thread, 31;\n\
         setp.eq.u64 %gmp_lane0, %gmp_v7, 0;\n",
    );
    for p in probes {
        let (_, size) = p.record_layout();
        let index = match p.layout {
            Layout::Thread => {
                s.push_str("mad.lo.u64 %gmp_v0, %gmp_block, %gmp_bsize, %gmp_thread;\n");
                "%gmp_v0"
            }
            Layout::Warp => "%gmp_warp",
            Layout::Block => "%gmp_block",
        };
        let m = format!("%gmp_map_{}", p.name);
        let _ = write!(
            s,
            "ld.{space}.u64 {m}, [gmprof_map_{name}];\ncvta.to.global.u64 {m}, {m};\n\
             mul.lo.u64 %gmp_v1, {index}, {size};\nadd.u64 {m}, {m}, %gmp_v1;\n",
            name = p.name,
            space = if via == MapVia::Param { "param" } else { "global" },
        );
    }
    s.push_str("}\n");
    for p in probes {
        for r in &p.registers {
            let zero = match r.ty.as_str() {
                "pred" => continue,
                "f32" => "0f00000000",
                "f64" => "0d0000000000000000",
                _ => "0",
            };
            let _ = writeln!(s, "mov.{} %gmp_{}_{}, {zero};", r.ty, p.name, r.name);
        }
    }
    // Fixed text built above: it parses.
    parse_body(&s, 1).unwrap_or_default()
}

/// Injects `probes` into kernel `kernel` of `module` (normally pruned to it first), with
/// map parameters ([`MapVia::Param`]).
pub fn inject(module: &Module, kernel: &str, probes: &[ProbeSpec]) -> Result<(Module, InjectReport), InjectError> {
    inject_with(module, kernel, probes, MapVia::Param)
}

/// Injects `probes` into kernel `kernel` of `module`, the maps found as `via` says.
pub fn inject_with(
    module: &Module,
    kernel: &str,
    probes: &[ProbeSpec],
    via: MapVia,
) -> Result<(Module, InjectReport), InjectError> {
    let mut ctx = Ctx { kernel, skip_labels: 0, args: 0, reduce: warp::can_reduce(&module.header), layout: None };
    if probes.is_empty() {
        return Err(ctx.err("no probes"));
    }
    let text = module.to_ptx();
    if text.contains("gmp_") || text.contains("gmprof_map_") {
        return Err(ctx.err("the module already uses names starting with gmp_"));
    }
    if !module.kernels().any(|f| f.name == kernel && f.body.is_some()) {
        return Err(ctx.err("no kernel of that name in the module"));
    }
    let mut report = InjectReport::default();
    // Device functions get the probes' state when a probe looks inside the code (instruction
    // hooks or counting) or a function can end the thread.
    let funcs = || module.functions().filter(|f| f.kind == FunctionKind::Func && f.body.is_some());
    let inside = probes.iter().any(|p| p.count_instructions || p.hooks.iter().any(|h| !h.at.starts_with("kernel.")));
    let exits_in_funcs = funcs().any(|f| body_instrs(f).any(|i| i.base() == "exit"));
    let probed = if inside || exits_in_funcs { calls::probed_functions(module, kernel) } else { BTreeSet::new() };
    let state = StateLayout::new(probes);

    let mut unseen = 0;
    let mut generic = 0;
    let mut atomics = 0;
    let mut asyncs = 0;
    for f in module.functions().filter(|f| f.body.is_some()) {
        let seen = f.name == kernel || probed.contains(&f.name);
        for i in body_instrs(f) {
            let spaced = ["global", "shared", "local", "param", "const"].iter().any(|m| i.has(m));
            match i.base() {
                "ld" | "st" if !seen && inside && i.has("global") => unseen += 1,
                "ld" | "st" if seen && !spaced => generic += 1,
                "atom" | "red" if seen && (i.has("global") || !spaced) => atomics += 1,
                "cp" if seen && i.has("async") => asyncs += 1,
                _ => {}
            }
        }
    }
    for (what, n) in [
        ("global loads/stores in device functions called through a pointer", unseen),
        ("generic-address loads/stores", generic),
        ("global atomics/reductions", atomics),
        ("asynchronous copies", asyncs),
    ] {
        if n > 0 {
            report.unprobed.push((what.to_string(), n));
        }
    }
    report.hooks_placed = vec![0; probes.len()];
    for p in probes {
        report.map_params.push(format!("gmprof_map_{}", p.name));
    }

    let mut out = module.clone();
    for item in &mut out.items {
        let Item::Function(func) = item else { continue };
        let is_kernel = func.kind == FunctionKind::Entry && func.name == kernel;
        if !is_kernel && !probed.contains(&func.name) {
            continue;
        }
        let body = func.body.take().unwrap_or_default();
        // Declarations: the function's own leading ones, then the probes'.
        let lead = body.iter().take_while(|s| matches!(s, Stmt::Directive(_))).count();
        let mut new_body: Vec<Stmt> = body[..lead].to_vec();
        new_body.push(Stmt::Directive(".reg .pred %gmp_leader, %gmp_lane0".into()));
        for p in probes {
            new_body.push(Stmt::Directive(format!(".reg .b64 %gmp_map_{}", p.name)));
            for r in &p.registers {
                new_body.push(Stmt::Directive(format!(".reg .{} %gmp_{}_{}", r.ty, p.name, r.name)));
            }
        }
        let calls_probed = body_instrs_of(&body).any(|i| calls::callee(i).is_some_and(|(_, n)| probed.contains(n)));
        if calls_probed || !is_kernel {
            new_body.extend(StateLayout::declarations());
        }
        if is_kernel {
            if calls_probed {
                new_body.push(Stmt::Directive(format!(".local .align 8 .b8 {}[{}]", calls::STATE_BUF, state.size())));
            }
            if via == MapVia::Param {
                for name in &report.map_params {
                    func.params.push(Param { name: name.clone(), text: format!(".param .u64 {name}") });
                }
            }
            new_body.extend(prologue(probes, via));
            if calls_probed {
                new_body.extend(state.kernel_setup());
            }
            for (pi, p) in probes.iter().enumerate() {
                for h in p.hooks.iter().filter(|h| h.at == "kernel.entry") {
                    ctx.layout = Some(p.layout);
                    new_body.extend(scoped(ctx.expand(p, h, None)?));
                    report.hooks_placed[pi] += 1;
                }
            }
        } else {
            let name = calls::STATE_PARAM;
            func.params.push(Param { name: name.to_string(), text: format!(".param .b64 {name}") });
            new_body.extend(state.function_setup());
        }
        let role = Role { kernel: is_kernel, probed: &probed, state: &state };
        instrument(&mut ctx, &body[lead..], probes, &role, &mut new_body, &mut report)?;
        func.body = Some(new_body);
    }
    if via == MapVia::Global {
        let vars = report.map_params.iter().map(|name| {
            Item::Variable(super::ptx::Variable {
                name: name.clone(),
                space: "global".into(),
                text: format!(".visible .global .align 8 .u64 {name}"),
            })
        });
        out.items.splice(0..0, vars);
    }
    Ok((out, report))
}

/// What the body being instrumented is.
struct Role<'a> {
    /// The kernel (its `ret` ends the thread) or a probed device function.
    kernel: bool,
    /// The probed device functions (their calls pass the state).
    probed: &'a BTreeSet<String>,
    state: &'a StateLayout,
}

/// Instruments the statements after a function's leading declarations into `out`: basic-block
/// counts, instruction hooks, `kernel.exit` hooks at the kernel's exits (and at `exit` in a
/// device function), the state stored back at a device function's `ret`, and the state
/// passed at calls to probed functions.
fn instrument(
    ctx: &mut Ctx,
    rest: &[Stmt],
    probes: &[ProbeSpec],
    role: &Role,
    out: &mut Vec<Stmt>,
    report: &mut InjectReport,
) -> Result<(), InjectError> {
    // Basic-block starts (for instruction counting) and their instruction counts.
    let counting: Vec<&ProbeSpec> = probes.iter().filter(|p| p.count_instructions).collect();
    let mut block_counts = vec![0usize; rest.len()];
    let mut current: Option<usize> = None;
    let mut pending = true;
    for (k, s) in rest.iter().enumerate() {
        match s {
            Stmt::Label(_) => pending = true,
            Stmt::Instr(i) => {
                if pending {
                    current = Some(k);
                    pending = false;
                }
                if let Some(c) = current {
                    block_counts[c] += 1;
                }
                if ends_block(i) {
                    pending = true;
                }
            }
            _ => {}
        }
    }

    for (k, s) in rest.iter().enumerate() {
        let Stmt::Instr(ins) = s else {
            out.push(s.clone());
            continue;
        };
        if block_counts[k] > 0 {
            for p in &counting {
                out.push(instr(&format!("add.u64 %gmp_{0}_count, %gmp_{0}_count, {1}", p.name, block_counts[k])));
            }
        }
        let mut after = Vec::new();
        for (pi, p) in probes.iter().enumerate() {
            for h in &p.hooks {
                if h.at == "kernel.entry" || h.at == "kernel.exit" || !matches(&h.at, ins) {
                    continue;
                }
                if h.position == Position::After && ends_block(ins) {
                    return Err(ctx.err(format!("probe {}: no hook can go after {}", p.name, ins.text())));
                }
                ctx.layout = Some(p.layout);
                let stmts = ctx.expand(p, h, Some(ins))?;
                let stmts = ctx.guarded(ins.pred.as_deref(), stmts);
                report.hooks_placed[pi] += 1;
                if h.position == Position::Before {
                    out.extend(stmts);
                } else {
                    after.extend(stmts);
                }
            }
        }
        if let Some((at, _)) = calls::callee(ins).filter(|(_, n)| role.probed.contains(*n)) {
            ctx.args += 1;
            out.extend(role.state.call(ins, at, ctx.args));
        } else if is_exit(ins) {
            let mut exit_code = Vec::new();
            if role.kernel || ins.base() == "exit" {
                report.exits += 1;
                for (pi, p) in probes.iter().enumerate() {
                    for h in p.hooks.iter().filter(|h| h.at == "kernel.exit") {
                        ctx.layout = Some(p.layout);
                        exit_code.extend(scoped(ctx.expand(p, h, None)?));
                        report.hooks_placed[pi] += 1;
                    }
                }
            } else {
                exit_code = role.state.store_registers();
            }
            match &ins.pred {
                None => {
                    out.extend(exit_code);
                    out.push(s.clone());
                }
                Some(g) => {
                    let label = ctx.skip_label();
                    out.push(Stmt::Instr(Instr {
                        pred: Some(negate(g)),
                        opcode: "bra".into(),
                        operands: vec![label.clone()],
                    }));
                    out.extend(exit_code);
                    out.push(Stmt::Instr(Instr { pred: None, ..ins.clone() }));
                    out.push(Stmt::Label(label));
                }
            }
        } else {
            out.push(s.clone());
        }
        out.extend(after);
    }
    Ok(())
}

fn body_instrs(f: &Function) -> impl Iterator<Item = &Instr> {
    body_instrs_of(f.body.as_deref().unwrap_or_default())
}

fn body_instrs_of(body: &[Stmt]) -> impl Iterator<Item = &Instr> {
    body.iter().filter_map(|s| if let Stmt::Instr(i) = s { Some(i) } else { None })
}
