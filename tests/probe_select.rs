//! Choosing the PTX of a kernel loaded from a cubin, on a real Triton cache
//! (tests/data/ptx/triton_cache/: one torch.compile'd function whose autotuning compiled
//! `triton_poi_fused_add_mul_relu_0` twice, `num_warps` 8 and 4, each entry's `.ptx`,
//! `.cubin` and `.json` as Triton 3.6 wrote them on an H100); and holding launches to the
//! kernel's `.reqntid`.

use std::path::{Path, PathBuf};

use gmprof::probe::fatbin;
use gmprof::probe::select::{candidates, choose, ImageId, ThreadLimits};
use gmprof::probe::{parse_probe_list, probe_ptx, Module};

const KERNEL: &str = "triton_poi_fused_add_mul_relu_0";
/// The `num_warps` 8 entry (`.reqntid 256`).
const WARPS8: &str = "JPMUXDQUMFBMSOZF3SQVSES6ODJDH5QURY7JVQAXRVZBQALFZHHA";
/// The `num_warps` 4 entry (`.reqntid 128`).
const WARPS4: &str = "PQPTOQI5XB3L7A35FWNRMJK3VFHALKZSOXMU7KM743HAB5BYX2UQ";

fn cache() -> PathBuf {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ptx/triton_cache");
    if built.is_dir() {
        built
    } else {
        PathBuf::from("tests/data/ptx/triton_cache")
    }
}

fn entry(hash: &str, ext: &str) -> PathBuf {
    cache().join(hash).join(format!("{KERNEL}.{ext}"))
}

fn cubin(hash: &str) -> Vec<u8> {
    std::fs::read(entry(hash, "cubin")).unwrap()
}

fn json_num_warps(hash: &str) -> u32 {
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(entry(hash, "json")).unwrap()).unwrap();
    v["num_warps"].as_u64().unwrap() as u32
}

#[test]
fn the_reqntid_of_each_variant_is_its_num_warps_times_32() {
    for (hash, threads) in [(WARPS8, 256), (WARPS4, 128)] {
        assert_eq!(json_num_warps(hash) * 32, threads);
        let m = Module::parse(&std::fs::read_to_string(entry(hash, "ptx")).unwrap()).unwrap();
        let k = m.kernels().find(|k| k.name == KERNEL).unwrap();
        assert_eq!(ThreadLimits::of(k), ThreadLimits { reqntid: Some([threads, 1, 1]), maxntid: None });
    }
}

#[test]
fn the_probed_kernel_keeps_its_reqntid() {
    let probes = parse_probe_list("block_sched,gmem_bytes").unwrap();
    for (hash, threads) in [(WARPS8, 256), (WARPS4, 128)] {
        let k = probe_ptx(&std::fs::read_to_string(entry(hash, "ptx")).unwrap(), KERNEL, &probes).unwrap();
        assert_eq!(k.limits.reqntid, Some([threads, 1, 1]));
        assert!(k.ptx.contains(&format!(".reqntid {threads}\n{{")), "{}", &k.ptx[..600.min(k.ptx.len())]);
        assert!(k.limits.check([threads, 1, 1]).is_ok());
        let e = k.limits.check([384 - threads, 1, 1]).unwrap_err();
        assert!(e.contains(&format!(".reqntid {threads}x1x1")), "{e}");
    }
}

#[test]
fn both_cache_entries_are_candidates_with_their_cubins() {
    let found = candidates(&cache(), KERNEL);
    assert_eq!(found.len(), 2);
    let hashes: Vec<String> =
        found.iter().map(|c| c.path.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(hashes, vec![WARPS8, WARPS4]);
    assert_eq!(found[0].cubin, Some(ImageId::of(&cubin(WARPS8))));
    assert_eq!(found[1].cubin, Some(ImageId::of(&cubin(WARPS4))));
    assert_eq!((found[0].num_warps, found[1].num_warps), (Some(8), Some(4)));
    assert_eq!((found[0].limits.reqntid, found[1].limits.reqntid), (Some([256, 1, 1]), Some([128, 1, 1])));
    assert!(candidates(&cache(), "triton_no_such_kernel").is_empty());
    // A name that is a prefix of the kernel's is not the kernel.
    assert!(candidates(&cache(), "triton_poi_fused_add_mul_relu").is_empty());
}

#[test]
fn the_loaded_cubin_picks_its_own_ptx_whatever_the_order() {
    let found = candidates(&cache(), KERNEL);
    for (hash, threads) in [(WARPS4, 128u32), (WARPS8, 256)] {
        let loaded = ImageId::of(&cubin(hash));
        // The block plays no part when the cubin matches (the launch check refuses a
        // disagreeing block later).
        for block in [[128, 1, 1], [256, 1, 1]] {
            let c = choose(&found, Some(loaded), block).unwrap();
            assert_eq!(c.path, entry(hash, "ptx"));
            assert!(c.ptx.contains(&format!(".reqntid {threads}")));
            assert!(c.how.contains("its .cubin is the image the program loaded"), "{}", c.how);
        }
        let mut reversed = found.clone();
        reversed.reverse();
        assert_eq!(choose(&reversed, Some(loaded), [1, 1, 1]).unwrap().path, entry(hash, "ptx"));
    }
}

#[test]
fn without_a_matching_cubin_the_name_and_the_block_decide_and_say_so() {
    let found = candidates(&cache(), KERNEL);
    let other = ImageId::of(b"\x7fELF not one of them");
    let c = choose(&found, Some(other), [128, 1, 1]).unwrap();
    assert_eq!(c.path, entry(WARPS4, "ptx"));
    assert!(
        c.how.contains("chosen by name") && c.how.contains("no .cubin beside the 2 PTX file(s) is the loaded image")
    );
    assert!(c.how.contains("1 of 2 admit the launch's 128x1x1 block"), "{}", c.how);
    let c = choose(&found, None, [256, 1, 1]).unwrap();
    assert_eq!(c.path, entry(WARPS8, "ptx"));
    assert!(c.how.contains("not a cubin gmprof could identify"), "{}", c.how);
    let e = choose(&found, Some(other), [64, 1, 1]).unwrap_err();
    assert!(e.contains("none of them admits the launch's 64x1x1 block"), "{e}");
    assert!(e.contains(".reqntid 256x1x1; .reqntid 128x1x1"), "{e}");
    assert!(choose(&[], None, [128, 1, 1]).unwrap_err().contains("no .ptx file"));
}

#[test]
fn a_cubin_in_memory_is_measured_from_its_elf_headers() {
    for hash in [WARPS8, WARPS4] {
        let file = cubin(hash);
        // In memory the image is followed by whatever lies after it.
        let mut memory = file.clone();
        memory.extend(std::iter::repeat_n(0xAB, 4096));
        let tables = fatbin::elf_extent(&memory[..64]).unwrap();
        assert!(tables > 64 && tables <= file.len());
        let len = fatbin::elf_extent(&memory[..tables]).unwrap();
        assert_eq!(len, file.len());
        assert_eq!(ImageId::of(&memory[..len]), ImageId::of(&file));
    }
    assert_eq!(fatbin::elf_extent(b"not an elf at all, and long enough to be a header.............."), None);
}
