//! probe_kernels.csv: one row per loaded variant of a kernel name, not per name. The two
//! variants are the real Triton cache of tests/data/ptx/triton_cache/ (torch.compile's
//! autotuning compiled `triton_poi_fused_add_mul_relu_0` twice: `num_warps` 8, `.reqntid 256`,
//! and `num_warps` 4, `.reqntid 128`), as the probe engine records them when the PTX
//! directory holds only the first entry: the first variant probed, the second not, each with
//! its own module, reason, thread limits, launches and load time.
//!
//! Rewrite the golden file with `GMPROF_BLESS=1 cargo test --test probe_kernels`.

use std::path::{Path, PathBuf};

use gmprof::probe::select::{candidates, choose, dims, ImageId};
use gmprof::report::probe_kernels::{write_probe_kernels_csv, KernelTable, ProbeKernel, PROBE_KERNELS_CSV};

#[path = "common/golden.rs"]
mod golden;
use golden::check_golden;

const KERNEL: &str = "triton_poi_fused_add_mul_relu_0";
/// The `num_warps` 8 entry (`.reqntid 256`).
const WARPS8: &str = "JPMUXDQUMFBMSOZF3SQVSES6ODJDH5QURY7JVQAXRVZBQALFZHHA";
/// The `num_warps` 4 entry (`.reqntid 128`).
const WARPS4: &str = "PQPTOQI5XB3L7A35FWNRMJK3VFHALKZSOXMU7KM743HAB5BYX2UQ";
/// capture::probe's reason for a module loaded from a cubin.
const CUBIN: &str = "SASS only: the module was loaded from a cubin";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A cache entry's cubin, as the repository names it.
fn cubin_file(hash: &str) -> PathBuf {
    PathBuf::from("tests/data/ptx/triton_cache").join(hash).join(format!("{KERNEL}.cubin"))
}

/// `cubin <len> B #<xxh64>` of an entry's cubin, as the load hook shows it.
fn module(hash: &str) -> (ImageId, String) {
    let id = ImageId::of(&std::fs::read(root().join(cubin_file(hash))).unwrap());
    (id, format!("cubin {id}"))
}

/// The loaded functions: both variants launched in one context, the first also in a second
/// one, and a kernel the glob did not select.
fn table() -> KernelTable {
    let only8: Vec<_> = candidates(&root().join("tests/data/ptx/triton_cache"), KERNEL)
        .into_iter()
        .filter(|c| c.path.to_string_lossy().contains(WARPS8))
        .collect();
    assert_eq!(only8.len(), 1);
    let relative = |text: String| text.replace(&format!("{}/", root().display()), "");
    let row = |hash: &str| ProbeKernel {
        kernel: KERNEL.into(),
        mangled: KERNEL.into(),
        module: Some(module(hash).1),
        module_file: Some(cubin_file(hash).display().to_string()),
        ..ProbeKernel::default()
    };
    // What capture::probe's prepare records: the variant whose cubin is beside the PTX is
    // probed with that PTX, its limits read there.
    let chosen = choose(&only8, Some(module(WARPS8).0), [256, 1, 1]).unwrap();
    let probed = ProbeKernel {
        status: "probed".into(),
        detail: relative(format!("name match: exact; {}", chosen.how)),
        reqntid: chosen.limits.reqntid.map(dims),
        maxntid: chosen.limits.maxntid.map(dims),
        max_threads_per_block: Some(256),
        ..row(WARPS8)
    };
    // The other has no PTX of its own there, and the one PTX cannot take its 128-thread block.
    let refused = choose(&only8, Some(module(WARPS4).0), [128, 1, 1]).unwrap_err();
    let not_probed = ProbeKernel {
        status: "not probed".into(),
        detail: relative(format!("{CUBIN}; {refused}")),
        max_threads_per_block: Some(128),
        ..row(WARPS4)
    };
    let mut t = KernelTable::default();
    // First launches in this order: the 8-warp variant, the 4-warp one, the 8-warp one in a
    // second context, then an unselected kernel.
    assert_eq!(t.insert(0x7000, ProbeKernel { launches: 3, load_ms: Some(40.0), ..probed.clone() }), 1);
    assert_eq!(t.insert(0x5000, ProbeKernel { launches: 4, ..not_probed }), 2);
    assert_eq!(t.insert(0x9000, ProbeKernel { launches: 2, load_ms: Some(35.5), ..probed }), 1);
    let other = ProbeKernel {
        kernel: "vector_add".into(),
        mangled: "_Z10vector_addPKfS0_Pfi".into(),
        status: "not probed".into(),
        detail: "not selected".into(),
        module: Some(format!("PTX {}", ImageId::of(b".entry _Z10vector_addPKfS0_Pfi()"))),
        max_threads_per_block: Some(1024),
        ..ProbeKernel::default()
    };
    assert_eq!(t.insert(0x1000, other), 1);
    // A launch counted after the first.
    t.get_mut(0x5000).unwrap().launches += 1;
    t
}

#[test]
fn two_variants_of_one_name_are_two_rows() {
    let rows = table().rows();
    assert_eq!(rows.len(), 3, "{rows:#?}");
    let (eight, four) = (&rows[0], &rows[1]);
    assert_eq!((eight.kernel.as_str(), four.kernel.as_str()), (KERNEL, KERNEL));
    assert_eq!((eight.variant, four.variant), (1, 2));
    assert_ne!(eight.module, four.module);
    assert_eq!(eight.module.as_deref(), Some(module(WARPS8).1.as_str()));
    assert_eq!(four.module.as_deref(), Some(module(WARPS4).1.as_str()));
    assert!(eight.module_file.as_deref().unwrap().contains(WARPS8));
    assert!(four.module_file.as_deref().unwrap().contains(WARPS4));
    // Its own status and reason each.
    assert_eq!(eight.status, "probed");
    assert!(eight.detail.contains(&format!("{WARPS8}/{KERNEL}.ptx: its .cubin is the image the program loaded")));
    assert_eq!(four.status, "not probed");
    assert!(four.detail.starts_with(CUBIN), "{}", four.detail);
    assert!(
        four.detail.contains("and none of them admits the launch's 128x1x1 block (.reqntid 256x1x1)"),
        "{}",
        four.detail
    );
    // Its own values: the 8-warp variant's two functions (two contexts) are one row.
    assert_eq!((eight.reqntid.as_deref(), eight.maxntid.as_deref()), (Some("256x1x1"), None));
    assert_eq!((four.reqntid.as_deref(), four.maxntid.as_deref()), (None, None));
    assert_eq!((eight.functions, eight.launches, eight.load_ms), (2, 5, Some(75.5)));
    assert_eq!((four.functions, four.launches, four.load_ms), (1, 5, None));
    assert_eq!((eight.max_threads_per_block, four.max_threads_per_block), (Some(256), Some(128)));
    assert_eq!((rows[2].kernel.as_str(), rows[2].variant, rows[2].functions), ("vector_add", 1, 1));
}

#[test]
fn probe_kernels_csv_keeps_its_columns_and_adds_the_variant_after_them() {
    let dir = tempfile::tempdir().unwrap();
    write_probe_kernels_csv(dir.path(), &table().rows()).unwrap();
    let text = std::fs::read_to_string(dir.path().join(PROBE_KERNELS_CSV)).unwrap();
    assert_eq!(
        text.lines().next().unwrap(),
        "kernel,mangled,status,detail,launches,load_ms,variant,module,module_file,reqntid,maxntid,\
         max_threads_per_block,functions,source"
    );
    check_golden(PROBE_KERNELS_CSV, &text);
}

#[test]
fn a_function_of_one_variant_with_another_outcome_keeps_its_own_row() {
    let mut t = table();
    // The 8-warp image in a third context whose driver JIT failed: same variant, own row.
    let failed = ProbeKernel {
        status: "not probed".into(),
        detail: "the driver JIT failed".into(),
        launches: 1,
        ..t.get(0x7000).unwrap().clone()
    };
    assert_eq!(t.insert(0x8000, ProbeKernel { load_ms: None, ..failed }), 1);
    let rows = t.rows();
    let ones: Vec<&ProbeKernel> = rows.iter().filter(|r| r.kernel == KERNEL && r.variant == 1).collect();
    assert_eq!(ones.len(), 2);
    assert_eq!(
        ones.iter().map(|r| (r.status.as_str(), r.functions, r.launches)).collect::<Vec<_>>(),
        vec![("not probed", 1, 1), ("probed", 2, 5)]
    );
}
