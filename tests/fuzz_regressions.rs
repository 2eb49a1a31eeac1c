//! The fuzz targets (`fuzz/`, README "Fuzzing") run here without libFuzzer: every seed, and
//! every input a fuzzer once crashed gmprof with (`tests/data/fuzz/TARGET/`), goes through
//! the same target function the fuzzer calls, and what gmprof makes of each crashing input
//! is checked. A target's function panics where gmprof would have crashed.

#[path = "../fuzz/src/targets/mod.rs"]
mod targets;

use std::path::{Path, PathBuf};

/// This test binary's allocator: the system's, counting what each thread asks for while it
/// is armed ([`allocations_of`]), so a test can say how much an input made gmprof allocate.
#[global_allocator]
static COUNTING: counting::Counting = counting::Counting;

mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static ARMED: Cell<bool> = const { Cell::new(false) };
        static LIVE: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
        static LARGEST: Cell<usize> = const { Cell::new(0) };
    }

    /// What a thread allocated while armed.
    #[derive(Clone, Copy, Debug)]
    pub struct Allocated {
        /// The most bytes it had allocated and not freed at once.
        pub peak: usize,
        /// Its largest single allocation.
        pub largest: usize,
    }

    /// Runs `f` with this thread's allocations counted.
    pub fn allocations_of<R>(f: impl FnOnce() -> R) -> (R, Allocated) {
        LIVE.with(|c| c.set(0));
        PEAK.with(|c| c.set(0));
        LARGEST.with(|c| c.set(0));
        ARMED.with(|c| c.set(true));
        let out = f();
        ARMED.with(|c| c.set(false));
        let allocated = Allocated { peak: PEAK.with(Cell::get).max(0) as usize, largest: LARGEST.with(Cell::get) };
        (out, allocated)
    }

    fn note(grow: isize, asked: usize) {
        // `try_with`: a thread's allocations during its teardown are not counted.
        let _ = ARMED.try_with(|armed| {
            if !armed.get() {
                return;
            }
            let _ = LARGEST.try_with(|l| l.set(l.get().max(asked)));
            let _ = LIVE.try_with(|live| {
                live.set(live.get() + grow);
                let _ = PEAK.try_with(|p| p.set(p.get().max(live.get())));
            });
        });
    }

    /// The system allocator, counting.
    pub struct Counting;

    // SAFETY: every call is forwarded to `System` with the caller's layout and pointer; the
    // counts have no effect on the memory handed out.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            note(layout.size() as isize, layout.size());
            // SAFETY: the caller's contract for `alloc`, passed on.
            unsafe { System.alloc(layout) }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            note(layout.size() as isize, layout.size());
            // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            note(-(layout.size() as isize), 0);
            // SAFETY: the caller's contract for `dealloc`, passed on.
            unsafe { System.dealloc(ptr, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            note(new_size as isize - layout.size() as isize, new_size);
            // SAFETY: the caller's contract for `realloc`, passed on.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }
}

type Target = fn(&[u8]);

/// Each target, and the seed directory it starts from.
const TARGETS: [(&str, Target, &str); 10] = [
    ("ptx_parse", targets::ptx_parse::run, "ptx"),
    ("ptx_inject", targets::ptx_inject::run, "ptx"),
    ("image", targets::image::run, "image"),
    ("elf_object", targets::elf_object::run, "elf_object"),
    ("probe_spec", targets::probe_spec::run, "probe_spec"),
    ("env", targets::env::run, "env"),
    ("control", targets::control::run, "control"),
    ("report_json", targets::report_json::run, "report_json"),
    ("parquet", targets::parquet::run, "parquet"),
    ("trace_check", targets::trace_check::run, "trace_check"),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The files of `dir`, sorted (none when it does not exist).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect())
        .unwrap_or_default();
    found.sort();
    found
}

fn regression(target: &str, name: &str) -> Vec<u8> {
    std::fs::read(root().join("tests/data/fuzz").join(target).join(name)).unwrap()
}

#[test]
fn every_seed_runs_through_its_target() {
    let mut ran = 0;
    for (name, run, seeds) in TARGETS {
        let inputs = files(&root().join("fuzz/seeds").join(seeds));
        assert!(!inputs.is_empty(), "{name}: no seeds in fuzz/seeds/{seeds}");
        for input in inputs {
            run(&std::fs::read(&input).unwrap());
            ran += 1;
        }
    }
    assert!(ran >= 40, "only {ran} seeds");
}

#[test]
fn the_seeds_are_inputs_gmprof_reads() {
    use gmprof::probe::fatbin::{self, Image};
    use gmprof::probe::{host, Module, ProbeSpec};
    let seeds = |kind: &str| -> Vec<(String, Vec<u8>)> {
        files(&root().join("fuzz/seeds").join(kind))
            .into_iter()
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
            .collect()
    };
    for (name, bytes) in seeds("ptx") {
        let module = Module::parse(std::str::from_utf8(&bytes).unwrap()).unwrap();
        assert!(module.kernels().count() >= 1, "{name}");
    }
    let kinds: Vec<(String, &str)> = seeds("image")
        .into_iter()
        .map(|(name, bytes)| {
            let kind = match fatbin::classify(&bytes).unwrap() {
                Image::Ptx(_) => "ptx",
                Image::Fatbin(entries) if fatbin::ptx_of(&entries).0.is_empty() => "fatbin, SASS only",
                Image::Fatbin(_) => "fatbin",
                Image::Elf => "cubin",
                Image::Unknown => "unknown",
            };
            (name, kind)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("probe_kernels_default.fatbin".to_string(), "fatbin"),
            ("probe_kernels_nocompress.fatbin".to_string(), "fatbin"),
            ("probe_kernels_sass_only.fatbin".to_string(), "fatbin, SASS only"),
            ("probe_kernels_sm90.ptx".to_string(), "ptx"),
            ("triton_sm90.cubin".to_string(), "cubin"),
            ("zstd_rle_blocks.fatbin".to_string(), "fatbin"),
        ]
    );
    let object = &seeds("elf_object")[0];
    assert_eq!(object.0, "probe_kernels_host.o");
    let ptx = host::ptx_in_object(object.1.as_slice(), &object.0, 1 << 30).unwrap().unwrap();
    assert_eq!((ptx.fatbins, ptx.texts.len()), (1, 1));
    for (name, bytes) in seeds("probe_spec") {
        let at = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        assert!(ProbeSpec::from_toml(std::str::from_utf8(&bytes[..at]).unwrap()).is_ok(), "{name}");
    }
    for (name, bytes) in seeds("report_json") {
        let path = tempfile::Builder::new().suffix(&format!("-{name}")).tempfile().unwrap();
        std::fs::write(path.path(), &bytes).unwrap();
        let report = gmprof::Report::read_json(path.path()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!report.ranges.is_empty(), "{name}");
    }
    for (name, bytes) in seeds("parquet") {
        let path = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(path.path(), &bytes).unwrap();
        assert!(gmprof::report::parquet::read::report_meta(path.path()).is_ok(), "{name}");
    }
    for (name, bytes) in seeds("control") {
        let first = std::str::from_utf8(&bytes).unwrap().lines().next().unwrap().to_owned();
        let request = gmprof::ways_in::on_demand::protocol::parse_request(&first);
        let response = gmprof::ways_in::on_demand::protocol::parse_response(&first);
        assert!(request.is_ok() != response.is_ok(), "{name}: a request or a response");
    }
    let events: Vec<(String, usize, usize)> = seeds("trace_check")
        .into_iter()
        .map(|(name, bytes)| {
            let check =
                gmprof::trace_check::check_trace_json(std::str::from_utf8(&bytes).unwrap(), &Default::default());
            (name, check.events, check.violations.len())
        })
        .collect();
    assert_eq!(
        events,
        [
            ("multi_gpu_late_trace.trace.json".to_string(), 27, 0),
            ("pm_trace_200us.trace.json".to_string(), 56, 0),
            ("trace.json".to_string(), 37, 0),
        ]
    );
}

#[test]
fn every_saved_crash_runs_through_its_target_without_crashing() {
    let mut ran = 0;
    for (name, run, _) in TARGETS {
        for input in files(&root().join("tests/data/fuzz").join(name)) {
            run(&std::fs::read(&input).unwrap());
            ran += 1;
        }
    }
    assert!(ran > 0, "no saved crashes in tests/data/fuzz");
}

// ---- What gmprof makes of each input that crashed it (each test failed before its fix).

#[test]
fn ptx_with_an_unterminated_string_is_a_parse_error() {
    // `."`: the cursor stepped past the end of the input looking for the closing quote, and
    // the error's line count sliced past it (ptx.rs).
    let input = regression("ptx_parse", "unterminated_string_at_top_level.ptx");
    let e = gmprof::probe::Module::parse(std::str::from_utf8(&input).unwrap()).unwrap_err();
    assert_eq!(e.line, 1);
    assert_eq!(e.message, "expected one of \";{\" before the end of the input");
    let e = gmprof::probe::probe_ptx(".version 9.0\n.target sm_90\n.entry k(\"", "k", &[]).unwrap_err();
    assert_eq!(e.to_string(), "PTX line 3: expected one of \";{\" before the end of the input");
    targets::ptx_parse::run(&input);
    targets::ptx_inject::run(&input);
}

#[test]
fn an_elf_whose_header_tables_lie_past_the_address_space_is_not_identified() {
    // e_phoff = 2^64 - 1: `phoff + phentsize * phnum` overflowed in `elf_extent`, which the
    // module-load hook calls on a cubin in the program's memory (found by the image target).
    use gmprof::probe::fatbin::{self, Image};
    let input = regression("image", "elf_program_headers_past_the_address_space.cubin");
    assert_eq!(fatbin::elf_extent(&input), None);
    // Sound headers still give the cubin's size.
    let cubin = std::fs::read(
        root().join("tests/data/ptx/triton_cache/JPMUXDQUMFBMSOZF3SQVSES6ODJDH5QURY7JVQAXRVZBQALFZHHA/triton_poi_fused_add_mul_relu_0.cubin"),
    )
    .unwrap();
    let tables = fatbin::elf_extent(&cubin[..64]).unwrap();
    assert_eq!(fatbin::elf_extent(&cubin[..tables]), Some(cubin.len()));
    assert_eq!(fatbin::classify(&input), Ok(Image::Elf));
    // A section whose offset is 2^64 - 1 (the sum the fuzzer's input overflowed first).
    let mut bad = cubin.clone();
    let shoff = u64::from_le_bytes(bad[0x28..0x30].try_into().unwrap()) as usize;
    let shentsize = u16::from_le_bytes([bad[0x3a], bad[0x3b]]) as usize;
    let offset = shoff + shentsize + 0x18;
    bad[offset..offset + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(fatbin::elf_extent(&bad[..64]), Some(tables));
    assert_eq!(fatbin::elf_extent(&bad[..tables]), None);
    targets::image::run(&input);
    targets::image::run(&bad);
}

#[test]
fn fatbin_sizes_past_the_address_space_are_errors() {
    // The same overflow in a fatbin's header and an entry's size (the sizes' sums in
    // `fatbin_len`, `parse_fatbin` and `host::fatbins_in` were unchecked too).
    use gmprof::probe::fatbin::{self, FatbinError};
    use gmprof::probe::host;
    let mut fatbin = std::fs::read(root().join("tests/data/ptx/probe_kernels_default.fatbin")).unwrap();
    // The header's size of what follows, 2^64 - 1: the total overflowed.
    let mut huge = fatbin.clone();
    huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(fatbin::fatbin_len(&huge), None);
    assert_eq!(fatbin::parse_fatbin(&huge), Err(FatbinError("the header's size does not fit in memory".into())));
    // The first entry's padded size, 2^64 - 1: its end overflowed.
    let header = u16::from_le_bytes([fatbin[6], fatbin[7]]) as usize;
    fatbin[header + 8..header + 16].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(fatbin::parse_fatbin(&fatbin), Err(FatbinError("an entry runs past the end".into())));
    // In a section, such a fatbin is kept as far as the section goes (a truncated one), and
    // its parser says what is wrong.
    let mut section = huge.clone();
    section.extend_from_slice(&huge);
    let found = host::fatbins_in(&section);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].len(), section.len());
    assert!(fatbin::parse_fatbin(found[0]).is_err());
    targets::image::run(&huge);
    targets::image::run(&fatbin);
    targets::elf_object::run(&section);
}

#[test]
fn a_probe_field_whose_total_passes_u64_has_no_total() {
    // block_sched's map of two blocks: their inverted start times (near 2^64) summed past
    // u64 in `decode::field_total`, which the probe engine calls on every field of every
    // probed launch. The probe_spec target's seed itself crashed on its first run.
    use gmprof::probe::decode;
    use gmprof::probe::ProbeSpec;
    let input = regression("probe_spec", "block_sched_times_sum_past_u64");
    let at = input.iter().position(|&b| b == 0).unwrap();
    let spec = ProbeSpec::from_toml(std::str::from_utf8(&input[..at]).unwrap()).unwrap();
    let map = &input[at + 1..];
    assert_eq!(map.len(), 3 * 24);
    assert_eq!(decode::field_total(&spec, map, "start_ns_inverted"), None);
    assert_eq!(decode::field_total(&spec, map, "end_ns"), Some(1500 + 1700));
    assert_eq!(decode::field_total(&spec, map, "smid"), Some(3 + 4));
    assert_eq!(decode::field_total(&spec, map, "entries"), Some(2));
    targets::probe_spec::run(&input);
}

#[test]
fn a_signed_probe_field_has_no_total() {
    // A custom probe's 4-byte s32 field was read as 8 bytes, past its 4-byte record (found
    // while fixing the sum above, before the fuzzer reached it).
    use gmprof::probe::decode::{self, LaunchInfo};
    use gmprof::probe::ProbeSpec;
    let input = regression("probe_spec", "s32_field_summed_as_8_bytes");
    let at = input.iter().position(|&b| b == 0).unwrap();
    let spec = ProbeSpec::from_toml(std::str::from_utf8(&input[..at]).unwrap()).unwrap();
    let map = &input[at + 1..];
    assert_eq!(spec.record_layout(), (vec![0], 4));
    assert_eq!(decode::field_total(&spec, map, "delta"), None);
    let launch = LaunchInfo { correlation_id: 1, kernel: "k".into(), blocks: 2, threads: 32 };
    let values: Vec<String> = decode::rows(&spec, &launch, map).unwrap().into_iter().map(|r| r.value).collect();
    assert_eq!(values, ["-3", "5"]);
    targets::probe_spec::run(&input);
}

#[test]
fn a_parquet_file_with_a_malformed_arrow_schema_is_read_by_its_parquet_schema() {
    // The Arrow schema embedded in the file's metadata has an integer of bit width 0, on
    // which the Arrow IPC decoder panics: `gmprof merge` crashed instead of leaving the
    // process out (found by the parquet target). The reader now takes the columns' types
    // from the Parquet schema.
    use gmprof::report::rank_ranges::RankRanges;
    let input = regression("parquet", "arrow_schema_int_of_bit_width_0.parquet");
    let dir = tempfile::tempdir().unwrap();
    let rank = dir.path().join("node0-0");
    std::fs::create_dir(&rank).unwrap();
    std::fs::copy(root().join("tests/golden/ranges.parquet"), rank.join("ranges.parquet")).unwrap();
    std::fs::write(rank.join("kernels.parquet"), &input).unwrap();
    let read = RankRanges::read(dir.path(), &rank).unwrap();
    let kernels = read.kernels.unwrap();
    let golden = RankRanges::read(root(), &root().join("tests/golden")).unwrap();
    assert_eq!(read.ranges.len(), golden.ranges.len());
    assert_eq!(kernels, golden.kernels.unwrap());
    targets::parquet::run(&input);
}

#[test]
fn a_parquet_page_whose_rle_bit_width_is_past_32_is_the_files_error() {
    // A dictionary-index page whose RLE bit width is over 32: the `parquet` crate asserts
    // (`num_bits <= size_of::<T>() * 8`) instead of returning an error, and `gmprof merge`
    // stopped with a panic (exit 2; found by the parquet target). The reader now turns the
    // decoder's panic into the file's error, and the rank is left out with it named.
    use gmprof::report::rank_ranges::RankRanges;
    let input = regression("parquet", "rle_bit_width_over_32.parquet");
    let dir = tempfile::tempdir().unwrap();
    let rank = dir.path().join("node0-0");
    std::fs::create_dir(&rank).unwrap();
    std::fs::copy(root().join("tests/golden/ranges.parquet"), rank.join("ranges.parquet")).unwrap();
    std::fs::write(rank.join("kernels.parquet"), &input).unwrap();
    let Err(err) = RankRanges::read(dir.path(), &rank) else { panic!("a malformed kernels.parquet is an error") };
    let err = err.to_string();
    assert!(err.contains("kernels.parquet") && err.contains("its data is malformed"), "{err}");
    assert!(!gmprof::report::parquet::read::in_guarded_decode(), "the guard is released after the panic");
    targets::parquet::run(&input);
}

#[test]
fn a_parquet_dictionary_page_claiming_more_values_than_its_bytes_hold_is_refused_before_any_reserve() {
    // A 22 KB kernels.parquet whose dictionary page claims 67 637 280 values: the `parquet`
    // crate (59.3.2) reserved 4 bytes of offsets for each (270 549 120 bytes, over the fuzz
    // target's 256 MiB limit; the i32 count allows about 8 GiB) before it found the page
    // short (found by the parquet target). gmprof now reads the page headers of the columns
    // it reads first, and refuses a claim that the page's bytes cannot hold.
    use gmprof::report::rank_ranges::RankRanges;
    let input = regression("parquet", "dictionary_of_67_million_values.parquet");
    assert_eq!(input.len(), 21_986);
    let dir = tempfile::tempdir().unwrap();
    let rank = dir.path().join("node0-0");
    std::fs::create_dir(&rank).unwrap();
    std::fs::copy(root().join("tests/golden/ranges.parquet"), rank.join("ranges.parquet")).unwrap();
    std::fs::write(rank.join("kernels.parquet"), &input).unwrap();
    let (read, allocated) = counting::allocations_of(|| RankRanges::read(dir.path(), &rank));
    let Err(err) = read else { panic!("a kernels.parquet whose dictionary lies is an error") };
    let err = err.to_string();
    assert!(err.contains("kernels.parquet: not a readable Parquet file (column '"), "{err}");
    assert!(err.contains("its dictionary page claims 67637280 value(s) in "), "{err}");
    assert!(allocated.largest < 4 << 20, "{allocated:?}: the claim was reserved for");
    assert!(allocated.peak < 16 << 20, "{allocated:?}");
    // The golden tables beside it read as before, within the same bounds.
    let (golden, allocated) = counting::allocations_of(|| RankRanges::read(root(), &root().join("tests/golden")));
    assert!(golden.unwrap().kernels.is_some());
    assert!(allocated.largest < 4 << 20, "{allocated:?}");
    targets::parquet::run(&input);
}

#[test]
fn a_parquet_footer_claiming_more_row_groups_than_its_bytes_hold_is_refused_before_any_reserve() {
    // A 31-byte file whose footer's list of row groups claims 4 194 304 of them: the crate
    // reserves room for every one before it reads the first (`Vec::with_capacity` of the
    // claimed count; the count allows 2^31). Found by reading the crate's footer decoder
    // while fixing the dictionary above. gmprof now walks the footer first and refuses a
    // count its bytes cannot hold.
    let input = regression("parquet", "row_groups_claimed_past_the_footer.parquet");
    assert_eq!(input.len(), 31);
    let path = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(path.path(), &input).unwrap();
    let (read, allocated) = counting::allocations_of(|| gmprof::report::parquet::read::row_count(path.path()));
    let err = read.unwrap_err().to_string();
    assert!(
        err.contains("not a readable Parquet file (its footer is malformed: a list claims 4194304 element(s)"),
        "{err}"
    );
    assert!(allocated.largest < 1 << 20, "{allocated:?}: the claim was reserved for");
    targets::parquet::run(&input);
}

#[test]
fn a_pm_sample_whose_times_sum_past_u64_is_drawn() {
    // A PM sample ending at 1.8e19 ns: the HTML report's PM plot took the middle of its
    // bucket as `(start + end) / 2` in u64, which overflowed (`gmprof report --html`; found
    // by the report_json target).
    let input = regression("report_json", "pm_sample_times_sum_past_u64.json");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    std::fs::write(&path, &input).unwrap();
    let report = gmprof::Report::read_json(&path).unwrap();
    let pm = report.pm.as_ref().unwrap();
    assert_eq!(pm.samples[5].end_ns, 17_954_395_395_711_730_745);
    let html = report.to_html(&Default::default()).unwrap();
    assert!(html.contains("1319 PM samples every 200.0 µs"), "the PM plot is drawn");
    targets::report_json::run(&input);
}

#[test]
fn a_capture_longer_than_a_timer_can_wait_is_refused() {
    // GMPROF_CAPTURE_DURATION=2.3e20 was accepted (finite and positive), and the signal's
    // capture would have started a timer thread whose Duration::from_secs_f64 panics past
    // 1.8e19 s (found by the env target, which holds what was accepted to that); a request
    // over the control socket for 1e300 s was accepted the same way.
    use gmprof::ways_in::on_demand::protocol::{self, Request, Span};
    use gmprof::ways_in::on_demand::OnDemandConfig;
    let input = regression("env", "capture_duration_no_timer_can_wait");
    let text = std::str::from_utf8(&input).unwrap();
    let vars: Vec<(&str, &str)> = text.lines().filter_map(|l| l.split_once('=')).collect();
    let lookup = |k: &str| vars.iter().rev().find(|(key, _)| *key == k).map(|(_, v)| v.to_string());
    let e = OnDemandConfig::from_lookup(&lookup).unwrap_err().to_string();
    assert!(e.contains("GMPROF_CAPTURE_DURATION=233333333333333333333.5: longer than a capture can last"), "{e}");
    // With GMPROF_ON_DEMAND=1 the capture signal's captures last that long.
    let on_demand = |seconds: &str| {
        OnDemandConfig::from_lookup(&|k: &str| match k {
            "GMPROF_ON_DEMAND" => Some("1".into()),
            "GMPROF_CAPTURE_DURATION" => Some(seconds.into()),
            _ => None,
        })
    };
    assert!(on_demand("1e20").is_err());
    assert_eq!(on_demand("86400").unwrap().unwrap().signal_span, Span::Seconds(86400.0));
    let line = regression("control", "capture_of_1e300_seconds");
    let request = protocol::parse_request(std::str::from_utf8(&line).unwrap()).unwrap();
    let Request::Capture { span, .. } = request else { panic!("a capture request") };
    assert_eq!(span, Span::Seconds(1e300));
    let e = span.validate().unwrap_err().to_string();
    assert!(e.contains("--duration 1e300 is longer than a capture can last"), "{e}");
    assert!(Span::Seconds(3600.0 * 24.0 * 365.0 * 100.0).validate().is_ok(), "a century is fine");
    targets::env::run(&input);
    targets::control::run(&line);
}

#[test]
fn a_fatbin_payload_is_decompressed_to_64_mib_at_most() {
    // 16 KB of fatbin whose PTX entry is a zstd frame of 4 000 run-length blocks: gmprof
    // decompressed all 500 MiB at the module load, in the program's memory. Found by reading
    // `parse_fatbin` while fuzzing it (the image target's 10 M executions had not reached
    // it); the target's allocation limit aborted on it. Now a fatbin's PTX is decompressed
    // to 64 MiB at most, and compressed SASS, which gmprof does not read, not at all.
    use gmprof::probe::fatbin::{self, EntryKind, MAX_DECOMPRESSED_BYTES};
    let input = regression("image", "zstd_payload_of_500_mib.fatbin");
    assert_eq!(input.len(), 16_088);
    let entries = fatbin::parse_fatbin(&input).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!((entries[0].kind, entries[0].sm), (EntryKind::Ptx, 90));
    let decompressed = entries[0].payload.as_ref().map(Vec::len);
    assert_eq!(decompressed, None, "bytes decompressed");
    assert_eq!(
        entries[0].problem.as_deref(),
        Some("zstd: it decompresses to more than the 67108864 bytes gmprof decompresses of a fatbin")
    );
    assert_eq!(MAX_DECOMPRESSED_BYTES, 64 << 20);
    let (ptx, problems) = fatbin::ptx_of(&entries);
    assert!(ptx.is_empty());
    assert_eq!(
        problems,
        ["PTX for sm_90: zstd: it decompresses to more than the 67108864 bytes gmprof decompresses of a fatbin"]
    );
    // The same frame as a SASS entry is not decompressed at all.
    let mut sass = input.clone();
    sass[16..18].copy_from_slice(&2u16.to_le_bytes());
    let entries = fatbin::parse_fatbin(&sass).unwrap();
    assert_eq!((entries[0].kind, entries[0].payload.as_ref().map(Vec::len)), (EntryKind::Elf, None));
    assert_eq!(entries[0].problem.as_deref(), Some("compressed SASS, not decompressed: gmprof reads only PTX"));
    // nvcc's fatbin: its zstd PTX (5 270 bytes, as its header says) decompressed as before,
    // its SASS stored as is.
    let nvcc = std::fs::read(root().join("tests/data/ptx/probe_kernels_default.fatbin")).unwrap();
    let entries = fatbin::parse_fatbin(&nvcc).unwrap();
    let sizes: Vec<_> = entries.iter().map(|e| (e.kind, e.payload.as_ref().map(Vec::len))).collect();
    assert_eq!(sizes, [(EntryKind::Ptx, Some(5_270)), (EntryKind::Elf, Some(13_584))]);
    let (ptx, problems) = fatbin::ptx_of(&entries);
    assert_eq!((ptx.len(), problems.len()), (1, 0));
    assert!(ptx[0].contains(".entry _Z9histogramPjPKhi("));
    targets::image::run(&input);
}

#[test]
fn a_module_of_many_functions_parses_in_linear_time() {
    // The parser counted the lines from the start of the module at every function body:
    // quadratic, 2.8 s for 8 000 functions (575 KB) in a release build, where the probe
    // engine parses a module's PTX at a probed kernel's first launch (a PyTorch translation
    // unit holds thousands of kernels). Found by reading the parser while fuzzing it.
    let mut ptx = String::from(".version 8.0\n.target sm_90\n.address_size 64\n\n");
    for i in 0..16_000 {
        ptx.push_str(&format!(".visible .entry k{i}(\n\t.param .u64 p\n)\n{{\n\tmov.u32 %r1, %tid.x;\n\tret;\n}}\n"));
    }
    ptx.push_str(".visible .entry broken(\n)\n{\n\tret;\n");
    let start = std::time::Instant::now();
    let e = gmprof::probe::Module::parse(&ptx).unwrap_err();
    let (ok, _) = ptx.split_at(ptx.find(".visible .entry broken").unwrap());
    let module = gmprof::probe::Module::parse(ok).unwrap();
    let took = start.elapsed();
    assert_eq!(module.kernels().count(), 16_000);
    // The error's line is still the line where the input ran out.
    assert_eq!(e.line, ptx.lines().count() + 1);
    assert!(took < std::time::Duration::from_secs(20), "{took:?} for 2 × 1.2 MB of PTX");
}
