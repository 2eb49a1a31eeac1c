//! Folds a recorded PC sampling capture into its recorded report and writes the report, as
//! `gmprof run --pc-sampling` would have written it (`report.json` with its `pc` section), so
//! that `gmprof report` reads a PC-sampled run on a machine without a GPU:
//!
//! ```text
//! cargo run --example pc_attach -- tests/data/pc/h100_llmc_3steps_report.json.zst \
//!     tests/data/pc/h100_llmc_3steps_pc_capture.json.zst OUT/report.json
//! ```
//!
//! `scripts/check/check-figures.sh` draws the stall mix figure of the llm.c run this way.
use std::error::Error;
use std::io::Read;

use gmprof::model::pc::PcCapture;
use gmprof::report::Report;

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [report, capture, out] = args.as_slice() else {
        return Err("usage: pc_attach REPORT.json[.zst] PC_CAPTURE.json[.zst] OUT.json".into());
    };
    let mut report = Report::read_json(report)?;
    let mut text = String::new();
    let file = std::fs::File::open(capture)?;
    if capture.ends_with(".zst") {
        ruzstd::decoding::StreamingDecoder::new(file)?.read_to_string(&mut text)?;
    } else {
        std::io::BufReader::new(file).read_to_string(&mut text)?;
    }
    let capture: PcCapture = serde_json::from_str(&text)?;
    report.attach_pc(&capture);
    report.write_json(out)?;
    let samples = report.pc.as_ref().map_or(0, |p| p.total_samples);
    eprintln!("pc_attach: wrote {out} ({samples} PC samples)");
    Ok(())
}
