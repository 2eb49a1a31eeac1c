//! Probe specifications: the built-in probes and custom ones read from TOML.
//!
//! A probe has a map (one record per thread, warp or block, of named fields), registers of
//! its own (zeroed at kernel entry, private to each thread), and hooks: a PTX snippet placed
//! before or after a tracepoint. The built-in probes are written in the same TOML form
//! ([`BUILTIN`]), so a custom probe can start from one of them:
//!
//! ```toml
//! name = "loads"
//! layout = "warp"                  # thread | warp | block
//! [[fields]]
//! name = "count"
//! type = "u64"                     # u32 u64 s32 s64 f32 f64; laid out in order, naturally aligned
//! [[registers]]
//! name = "n"
//! type = "b64"                     # b32 b64 u32 u64 s32 s64 f32 f64 pred
//! [[hooks]]
//! at = "ld.global"                 # kernel.entry | kernel.exit | an opcode with required modifiers
//! position = "before"              # before | after (after is refused on ret, exit and branches)
//! snippet = "add.u64 %%n, %%n, 1;"
//! [[hooks]]
//! at = "kernel.exit"
//! snippet = "warpred.global.add.u64 [MAP+0], %%n;"
//! ```
//!
//! In a snippet, `%%name` is one of the probe's registers; `MAP` is a 64-bit register
//! holding the address of this thread's record (its thread's, warp's or block's); `LEADER`
//! is a predicate true in the first thread of the block and `LANE0` in the first thread of
//! each warp; at an instruction, `OUT` and `IN1`...`IN3` are its operands (the first is
//! `OUT`), `ADDR` the address inside its first `[...]` operand and `BYTES` the width of a
//! memory access. A snippet of plain instructions at a guarded instruction runs under the
//! same guard; one with declarations of its own runs in its own `{ }` scope, branched over
//! when the guard is false.
//!
//! `warpred.global.<add|max|min>.<u32|s32|u64> [address], value` is a `red` that first
//! reduces the value over the warp's lanes that run it together, so that one lane per warp
//! does the atomic ([`warp`](super::warp); per-warp and per-block records only, a plain `red`
//! otherwise). `sectorbytes %%reg, [ADDR], BYTES` adds the 32-byte sectors the warp's access
//! touches, as the L1 counts them, in one lane per sector (`gmem_bytes`). The hooks also run inside the device functions the kernel calls directly, with
//! the same registers and `MAP` (their `exit` runs the `kernel.exit` hooks).

use serde::Deserialize;
use thiserror::Error;

/// A probe specification error.
#[derive(Debug, Error)]
pub enum SpecError {
    /// The TOML did not parse or did not fit the schema.
    #[error("probe spec: {0}")]
    Toml(#[from] toml::de::Error),
    /// No built-in probe has this name.
    #[error("no built-in probe named {0:?} (built in: block_sched, gmem_bytes, exec_count)")]
    Unknown(String),
    /// The spec parsed but is not usable.
    #[error("probe {probe}: {message}")]
    Invalid {
        /// The probe's name.
        probe: String,
        /// What is wrong.
        message: String,
    },
}

/// Which thread group owns a map record.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// One record per thread.
    Thread,
    /// One record per warp (32 consecutive linear thread indices of a block).
    Warp,
    /// One record per block.
    Block,
}

impl Layout {
    /// Records for a launch of `blocks` blocks of `threads` threads each.
    pub fn records(self, blocks: u64, threads: u64) -> u64 {
        match self {
            Layout::Thread => blocks * threads,
            Layout::Warp => blocks * threads.div_ceil(32),
            Layout::Block => blocks,
        }
    }
}

/// A field's type.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    /// Unsigned 32-bit.
    U32,
    /// Unsigned 64-bit.
    U64,
    /// Signed 32-bit.
    S32,
    /// Signed 64-bit.
    S64,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
}

impl FieldType {
    /// Size in bytes.
    pub fn size(self) -> usize {
        match self {
            FieldType::U32 | FieldType::S32 | FieldType::F32 => 4,
            FieldType::U64 | FieldType::S64 | FieldType::F64 => 8,
        }
    }
}

/// A field of a map record.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Field {
    /// Column name in probes.csv.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub ty: FieldType,
}

/// A register of the probe's own.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Register {
    /// Name, used as `%%name` in snippets.
    pub name: String,
    /// PTX register type without the dot (`b64`, `pred`).
    #[serde(rename = "type")]
    pub ty: String,
}

/// Before or after the tracepoint.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Position {
    /// Before it (the default).
    #[default]
    Before,
    /// After it.
    After,
}

/// A snippet at a tracepoint.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Hook {
    /// `kernel.entry`, `kernel.exit` (before every `ret` and `exit` of the kernel), or an
    /// opcode with the modifiers it must have (`ld.global` matches `ld.global.nc.v4.f32`
    /// and `ld.relaxed.gpu.global.u32`).
    pub at: String,
    /// Before or after.
    #[serde(default)]
    pub position: Position,
    /// PTX statements.
    pub snippet: String,
}

/// A probe.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// Name, also the map parameter's suffix; letters, digits and `_`.
    pub name: String,
    /// Record owner.
    pub layout: Layout,
    /// Record fields.
    #[serde(default)]
    pub fields: Vec<Field>,
    /// Registers of its own.
    #[serde(default)]
    pub registers: Vec<Register>,
    /// Snippets.
    #[serde(default)]
    pub hooks: Vec<Hook>,
    /// The probe counts the kernel's instructions: the injector adds each basic block's
    /// PTX instruction count to `%%count` at the block's start (built-in `exec_count`).
    #[serde(default)]
    pub count_instructions: bool,
}

/// The built-in probes, as TOML.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "block_sched",
        r#"
name = "block_sched"
layout = "block"
fields = [
  { name = "start_ns_inverted", type = "u64" },
  { name = "end_ns", type = "u64" },
  { name = "smid", type = "u32" },
  { name = "entries", type = "u32" },
]
registers = [{ name = "t", type = "b64" }, { name = "sm", type = "b32" }]
[[hooks]]
at = "kernel.entry"
snippet = """
mov.u64 %%t, %globaltimer;
not.b64 %%t, %%t;
warpred.global.max.u64 [MAP+0], %%t;
mov.u32 %%sm, %smid;
@LEADER st.global.u32 [MAP+16], %%sm;
@LEADER red.global.add.u32 [MAP+20], 1;
"""
[[hooks]]
at = "kernel.exit"
snippet = """
mov.u64 %%t, %globaltimer;
warpred.global.max.u64 [MAP+8], %%t;
"""
"#,
    ),
    (
        "gmem_bytes",
        r#"
name = "gmem_bytes"
layout = "warp"
fields = [{ name = "read_bytes", type = "u64" }, { name = "written_bytes", type = "u64" }]
registers = [{ name = "rd", type = "b64" }, { name = "wr", type = "b64" }]
[[hooks]]
at = "ld.global"
snippet = "sectorbytes %%rd, [ADDR], BYTES;"
[[hooks]]
at = "st.global"
snippet = "sectorbytes %%wr, [ADDR], BYTES;"
[[hooks]]
at = "kernel.exit"
snippet = """
warpred.global.add.u64 [MAP+0], %%rd;
warpred.global.add.u64 [MAP+8], %%wr;
"""
"#,
    ),
    (
        "exec_count",
        r#"
name = "exec_count"
layout = "warp"
count_instructions = true
fields = [{ name = "thread_instructions", type = "u64" }]
registers = [{ name = "count", type = "b64" }]
[[hooks]]
at = "kernel.exit"
snippet = "warpred.global.add.u64 [MAP+0], %%count;"
"#,
    ),
];

impl ProbeSpec {
    /// Parses and checks a TOML spec.
    pub fn from_toml(text: &str) -> Result<ProbeSpec, SpecError> {
        let spec: ProbeSpec = toml::from_str(text)?;
        spec.check()?;
        Ok(spec)
    }

    /// A built-in probe by name.
    pub fn builtin(name: &str) -> Result<ProbeSpec, SpecError> {
        let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name).ok_or_else(|| SpecError::Unknown(name.into()))?;
        ProbeSpec::from_toml(text)
    }

    fn invalid(&self, message: impl Into<String>) -> SpecError {
        SpecError::Invalid { probe: self.name.clone(), message: message.into() }
    }

    fn check(&self) -> Result<(), SpecError> {
        let word = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !word(&self.name) {
            return Err(self.invalid("the name must be letters, digits and _"));
        }
        if self.fields.is_empty() {
            return Err(self.invalid("a probe needs at least one field"));
        }
        for r in &self.registers {
            if !word(&r.name) {
                return Err(self.invalid(format!("register name {:?} must be letters, digits and _", r.name)));
            }
            if !matches!(r.ty.as_str(), "b32" | "b64" | "u32" | "u64" | "s32" | "s64" | "f32" | "f64" | "pred") {
                return Err(self.invalid(format!("register {} has unknown type {:?}", r.name, r.ty)));
            }
        }
        if self.count_instructions && !self.registers.iter().any(|r| r.name == "count" && r.ty == "b64") {
            return Err(self.invalid("count_instructions needs a b64 register named count"));
        }
        for h in &self.hooks {
            if h.at.is_empty() || h.at.contains(char::is_whitespace) {
                return Err(self.invalid(format!("tracepoint {:?} is not an opcode or kernel.entry/exit", h.at)));
            }
            if h.position == Position::After && (h.at == "kernel.exit" || h.at == "kernel.entry") {
                return Err(self.invalid(format!("{} takes no position = \"after\"", h.at)));
            }
        }
        Ok(())
    }

    /// Each field's offset in a record, and the record size (fields naturally aligned in
    /// order, the size rounded up to the largest alignment).
    pub fn record_layout(&self) -> (Vec<usize>, usize) {
        let mut offsets = Vec::new();
        let mut at = 0usize;
        let mut align = 1usize;
        for f in &self.fields {
            let s = f.ty.size();
            at = at.next_multiple_of(s);
            offsets.push(at);
            at += s;
            align = align.max(s);
        }
        (offsets, at.next_multiple_of(align))
    }
}

/// Reads a comma-separated list of probes: built-in names or paths to `.toml` specs.
pub fn parse_probe_list(list: &str) -> Result<Vec<ProbeSpec>, SpecError> {
    let mut out: Vec<ProbeSpec> = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let spec = if item.ends_with(".toml") {
            let text = std::fs::read_to_string(item).map_err(|e| SpecError::Invalid {
                probe: item.to_string(),
                message: format!("reading the spec: {e}"),
            })?;
            ProbeSpec::from_toml(&text)?
        } else {
            ProbeSpec::builtin(item)?
        };
        if out.iter().any(|p| p.name == spec.name) {
            return Err(spec.invalid("listed twice"));
        }
        out.push(spec);
    }
    Ok(out)
}
