//! Probing the device functions a kernel calls.
//!
//! A `.func` has no map parameters and its own registers, so the probes' state travels with
//! the thread through each call: the kernel keeps a per-thread `.local` buffer
//! (`gmp_state_buf`) holding each probe's record address, the `LEADER`/`LANE0` flags and the
//! probes' registers, and passes its generic address to every probed function as an extra
//! last parameter (`gmp_state_param`). Around each direct call the caller stores its probe
//! registers there and loads them back after; the callee loads everything at entry and stores
//! its registers back before each `ret`. So a function's loads and stores add to the same
//! registers the kernel's do, its `exit` runs the `kernel.exit` hooks, and nothing is shared
//! between threads or launches (a module-scope variable holding the map address would be
//! overwritten by a concurrent launch of the same kernel, and cannot hold per-warp record
//! addresses).
//!
//! Only functions whose every use is a direct call from the kernel or another probed
//! function change signature; one whose address is taken (an indirect call, a function
//! pointer in a variable), or that such a function calls, is left alone and its global loads
//! and stores are reported as unseen.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::ptx::{identifiers, parse_body, Function, FunctionKind, Instr, Item, Module, Stmt};
use super::spec::ProbeSpec;

/// The name of the extra parameter of a probed device function.
pub const STATE_PARAM: &str = "gmp_state_param";
/// The kernel's per-thread state buffer.
pub const STATE_BUF: &str = "gmp_state_buf";

/// The device functions of `module` (pruned to `kernel`) that can be probed.
pub fn probed_functions(module: &Module, kernel: &str) -> BTreeSet<String> {
    let funcs: BTreeSet<&str> = module
        .functions()
        .filter(|f| f.kind == FunctionKind::Func && f.body.is_some())
        .map(|f| f.name.as_str())
        .collect();
    let mut probed: BTreeSet<String> = funcs.iter().map(|s| s.to_string()).collect();
    // Address taken: named anywhere but as a direct call's callee.
    for item in &module.items {
        match item {
            Item::Variable(v) => {
                for w in identifiers(v.text.split('=').nth(1).unwrap_or("")) {
                    probed.remove(w);
                }
            }
            Item::Function(f) => {
                for i in instrs(f) {
                    let callee = callee(i);
                    for (k, op) in i.operands.iter().enumerate() {
                        if callee.is_some_and(|(at, _)| at == k) {
                            continue;
                        }
                        for w in identifiers(op) {
                            probed.remove(w);
                        }
                    }
                }
            }
            Item::Other(_) => {}
        }
    }
    // A function called from one left alone is left alone too.
    loop {
        let left: Vec<&str> = module
            .functions()
            .filter(|f| f.body.is_some() && f.name != kernel && !probed.contains(&f.name))
            .flat_map(|f| instrs(f).filter_map(callee).map(|(_, name)| name))
            .filter(|name| probed.contains(*name))
            .collect();
        if left.is_empty() {
            break;
        }
        for name in left {
            probed.remove(name);
        }
    }
    probed.retain(|n| funcs.contains(n.as_str()));
    probed
}

fn instrs(f: &Function) -> impl Iterator<Item = &Instr> {
    f.body.iter().flatten().filter_map(|s| if let Stmt::Instr(i) = s { Some(i) } else { None })
}

/// A direct call's callee: its operand index and name.
pub fn callee(i: &Instr) -> Option<(usize, &str)> {
    if i.base() != "call" {
        return None;
    }
    let (k, op) = i.operands.iter().enumerate().find(|(_, o)| !o.starts_with('('))?;
    let name = op.trim();
    (!name.starts_with('%') && identifiers(name).count() == 1).then_some((k, name))
}

/// Where each piece of state lies in the buffer: the probes' record addresses, a flags word
/// (bit 0 `LEADER`, bit 1 `LANE0`), then each probe register, 8 bytes apiece.
pub struct StateLayout {
    maps: Vec<String>,
    regs: Vec<(String, String)>,
}

impl StateLayout {
    /// The layout for `probes`.
    pub fn new(probes: &[ProbeSpec]) -> StateLayout {
        let maps = probes.iter().map(|p| format!("%gmp_map_{}", p.name)).collect();
        let regs = probes
            .iter()
            .flat_map(|p| p.registers.iter().map(move |r| (format!("%gmp_{}_{}", p.name, r.name), r.ty.clone())))
            .collect();
        StateLayout { maps, regs }
    }

    fn flags_at(&self) -> usize {
        8 * self.maps.len()
    }

    fn reg_at(&self, k: usize) -> usize {
        8 * (self.maps.len() + 1 + k)
    }

    /// The buffer's size in bytes.
    pub fn size(&self) -> usize {
        self.reg_at(self.regs.len())
    }

    /// Declarations every function with state needs (besides the probes' own registers).
    pub fn declarations() -> Vec<Stmt> {
        [".reg .b64 %gmp_state", ".reg .b32 %gmp_t<2>"].iter().map(|d| Stmt::Directive(d.to_string())).collect()
    }

    /// The kernel's part: point `%gmp_state` at the buffer and store the record addresses and
    /// flags (after the prologue).
    pub fn kernel_setup(&self) -> Vec<Stmt> {
        let mut s = format!("mov.u64 %gmp_state, {STATE_BUF};\ncvta.local.u64 %gmp_state, %gmp_state;\n");
        for (k, m) in self.maps.iter().enumerate() {
            let _ = writeln!(s, "st.u64 [%gmp_state+{}], {m};", 8 * k);
        }
        let _ = write!(
            s,
            "selp.b32 %gmp_t0, 1, 0, %gmp_leader;\nselp.b32 %gmp_t1, 2, 0, %gmp_lane0;\n\
             or.b32 %gmp_t0, %gmp_t0, %gmp_t1;\nst.u32 [%gmp_state+{}], %gmp_t0;\n",
            self.flags_at()
        );
        body(&s)
    }

    /// A probed function's part: load the buffer's address, the record addresses, the flags
    /// and the registers.
    pub fn function_setup(&self) -> Vec<Stmt> {
        let mut s = format!("ld.param.u64 %gmp_state, [{STATE_PARAM}];\n");
        for (k, m) in self.maps.iter().enumerate() {
            let _ = writeln!(s, "ld.u64 {m}, [%gmp_state+{}];", 8 * k);
        }
        let _ = write!(
            s,
            "ld.u32 %gmp_t0, [%gmp_state+{}];\nand.b32 %gmp_t1, %gmp_t0, 1;\nsetp.ne.u32 %gmp_leader, %gmp_t1, 0;\n\
             and.b32 %gmp_t1, %gmp_t0, 2;\nsetp.ne.u32 %gmp_lane0, %gmp_t1, 0;\n",
            self.flags_at()
        );
        let mut out = body(&s);
        out.extend(self.load_registers());
        out
    }

    /// Stores the probe registers into the buffer.
    pub fn store_registers(&self) -> Vec<Stmt> {
        let mut s = String::new();
        for (k, (r, ty)) in self.regs.iter().enumerate() {
            let at = self.reg_at(k);
            if ty == "pred" {
                let _ = writeln!(s, "selp.b32 %gmp_t0, 1, 0, {r};\nst.u32 [%gmp_state+{at}], %gmp_t0;");
            } else {
                let _ = writeln!(s, "st.{ty} [%gmp_state+{at}], {r};");
            }
        }
        body(&s)
    }

    /// Loads the probe registers from the buffer.
    pub fn load_registers(&self) -> Vec<Stmt> {
        let mut s = String::new();
        for (k, (r, ty)) in self.regs.iter().enumerate() {
            let at = self.reg_at(k);
            if ty == "pred" {
                let _ = writeln!(s, "ld.u32 %gmp_t0, [%gmp_state+{at}];\nsetp.ne.u32 {r}, %gmp_t0, 0;");
            } else {
                let _ = writeln!(s, "ld.{ty} {r}, [%gmp_state+{at}];");
            }
        }
        body(&s)
    }

    /// A direct call to a probed function, passing the state: the registers stored, an
    /// argument `gmp_arg_<n>` declared and set, the call with it as its last argument, the
    /// registers loaded back.
    pub fn call(&self, call: &Instr, at: usize, n: usize) -> Vec<Stmt> {
        let arg = format!("gmp_arg_{n}");
        let mut out = self.store_registers();
        out.push(Stmt::Directive(format!(".param .b64 {arg}")));
        out.extend(body(&format!("st.param.b64 [{arg}], %gmp_state;\n")));
        let mut call = call.clone();
        match call.operands.get(at + 1).map(|o| o.trim().to_string()) {
            Some(list) if list.starts_with('(') => {
                let inner = list.trim_start_matches('(').trim_end_matches(')').trim();
                call.operands[at + 1] = if inner.is_empty() { format!("({arg})") } else { format!("({inner}, {arg})") };
            }
            _ => call.operands.insert(at + 1, format!("({arg})")),
        }
        out.push(Stmt::Instr(call));
        out.extend(self.load_registers());
        out
    }
}

fn body(s: &str) -> Vec<Stmt> {
    // Fixed text built by this module: it parses.
    parse_body(s, 1).unwrap_or_default()
}
