//! SASS instruction text of sampled instructions, where the machine has `nvdisasm` (CUDA
//! toolkit): the cubins of the most-sampled functions (kept by `capture::cubins`) are
//! disassembled and each instruction is found by function and offset. Without `nvdisasm` the
//! text is blank: gmprof needs no tool beyond CUPTI.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

/// Cubins disassembled at most (those of the most-sampled instructions).
pub const MAX_CUBINS: usize = 12;
/// A cubin larger than this is not disassembled (cuBLAS's are tens of MiB).
pub const MAX_CUBIN_BYTES: usize = 64 << 20;

/// Where `nvdisasm` is: `GMPROF_NVDISASM`, then `$CUDA_HOME/bin`, `/usr/local/cuda/bin`, `PATH`.
pub fn nvdisasm() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GMPROF_NVDISASM") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = std::env::var_os(var) {
            dirs.push(PathBuf::from(home).join("bin"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter().map(|d| d.join("nvdisasm")).find(|p| p.is_file())
}

/// The instructions of `nvdisasm -c` output: (function, offset) → text (without the `;`).
pub fn parse_disassembly(text: &str) -> HashMap<(String, u64), String> {
    let mut out = HashMap::new();
    let mut function: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix(".section") {
            let name = rest.trim().split(',').next().unwrap_or("").trim().trim_matches('"');
            function = name.strip_prefix(".text.").map(str::to_owned);
            continue;
        }
        if let Some(label) = t.strip_suffix(':') {
            if let Some(name) = label.strip_prefix(".text.") {
                function = Some(name.to_owned());
            }
            continue;
        }
        let (Some(f), Some(rest)) = (&function, t.strip_prefix("/*")) else { continue };
        let Some((offset, instruction)) = rest.split_once("*/") else { continue };
        let Ok(offset) = u64::from_str_radix(offset.trim(), 16) else { continue };
        // Drop a trailing encoding comment and the `;`.
        let instruction = instruction.split("/*").next().unwrap_or("").trim();
        let instruction = instruction.strip_suffix(';').unwrap_or(instruction).trim();
        if !instruction.is_empty() {
            out.insert((f.clone(), offset), instruction.to_owned());
        }
    }
    out
}

/// The text of each `(function, cubin CRC, offset)` of `wanted` (most-sampled first), from
/// `cubins` (CRC → bytes), with `tool`; what could not be disassembled is left out.
pub fn instructions(
    tool: &std::path::Path,
    cubins: &HashMap<u64, &[u8]>,
    wanted: &[(String, u64, u64)],
) -> HashMap<(String, u64, u64), String> {
    let mut order: Vec<u64> = Vec::new();
    for (_, crc, _) in wanted {
        if !order.contains(crc) && cubins.get(crc).is_some_and(|c| c.len() <= MAX_CUBIN_BYTES) {
            order.push(*crc);
        }
    }
    order.truncate(MAX_CUBINS);
    let mut out = HashMap::new();
    let dir = std::env::temp_dir();
    for crc in order {
        let path = dir.join(format!("gmprof-{}-{crc:016x}.cubin", std::process::id()));
        if std::fs::write(&path, cubins[&crc]).is_err() {
            continue;
        }
        let result = Command::new(tool).arg("-c").arg(&path).output();
        let _ = std::fs::remove_file(&path);
        let Ok(output) = result else { continue };
        if !output.status.success() {
            tracing::debug!("gmprof: nvdisasm failed on a cubin: {}", String::from_utf8_lossy(&output.stderr));
            continue;
        }
        let parsed = parse_disassembly(&String::from_utf8_lossy(&output.stdout));
        for (function, c, pc) in wanted.iter().filter(|(_, c, _)| *c == crc) {
            if let Some(text) = parsed.get(&(function.clone(), *pc)) {
                out.insert((function.clone(), *c, *pc), text.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvdisasm_output_maps_function_and_offset_to_the_instruction() {
        let text = "\t.headerflags\t@\"EF_CUDA_SM90\"\n\
            \t.section\t.text._Z4axpyfPfS_,\"ax\",@progbits\n\
            \t.sectioninfo\t@\"SHI_REGISTERS=12\"\n\
            _Z4axpyfPfS_:\n\
            .text._Z4axpyfPfS_:\n\
            \x20       /*0000*/                   LDC R1, c[0x0][0x28] ;\n\
            \x20       /*0010*/                   S2R R0, SR_TID.X ;\n\
            \x20       /*0080*/              @!P0 LDG.E R2, desc[UR4][R2.64] ;  /* 0x000000040202a981 */\n\
            .L_x_0:\n\
            \t.section\t.text.spin,\"ax\",@progbits\n\
            .text.spin:\n\
            \x20       /*0000*/                   BRA `(.L_x_1) ;\n";
        let m = parse_disassembly(text);
        assert_eq!(m[&("_Z4axpyfPfS_".to_owned(), 0x10)], "S2R R0, SR_TID.X");
        assert_eq!(m[&("_Z4axpyfPfS_".to_owned(), 0x80)], "@!P0 LDG.E R2, desc[UR4][R2.64]");
        assert_eq!(m[&("spin".to_owned(), 0)], "BRA `(.L_x_1)");
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn without_nvdisasm_nothing_is_disassembled() {
        let cubin = [0u8; 4];
        let cubins = HashMap::from([(7u64, &cubin[..])]);
        let out = instructions(std::path::Path::new("/nonexistent/nvdisasm"), &cubins, &[("k".into(), 7, 0)]);
        assert!(out.is_empty());
    }
}
