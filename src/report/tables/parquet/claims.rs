//! What a Parquet file claims about its own sizes, checked before the `parquet` crate
//! decodes it.
//!
//! The crate sizes some buffers by counts read from the file, before it has read what they
//! count: it reserves room for a dictionary page's `num_values` (4 bytes a value for text,
//! 8 for an `Int64`: fuzzing found a 22 KB file that made `gmprof merge` reserve 270 MB, and
//! the count allows about 8 GiB), a decompressed page's `uncompressed_page_size` (up to
//! 2 GiB), a page's `compressed_page_size` within a column chunk whose length the footer
//! states, and a list of row groups by the count the footer states. `gmprof merge`, `report`
//! and `diff` read files that users' runs wrote (or that a copy cut short), so each claim is
//! held against the bytes that back it, with the file and column named when one is
//! impossible:
//!
//! - the footer: every list, map and binary it holds fits in the footer's bytes
//!   (`check_footer`);
//! - each column chunk that is read lies inside the file, and each of its page headers
//!   (`check_pages`, which reads only the headers) fits in the chunk, says a compressed
//!   size inside the chunk and an uncompressed size of at most [`MAX_PAGE_BYTES`], and, for a
//!   dictionary page, no more values than its bytes can hold at the smallest size a value of
//!   the column's type takes.
//!
//! No option of the crate (59.x) bounds these reservations. Imports `compact`; `read` calls it.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use parquet::basic::{Compression, Type as PhysicalType};
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};

use super::compact::{WalkError, Walker};

/// The largest uncompressed page gmprof reads (64 MiB). Writers cut pages at about 1 MiB
/// (the `parquet` crate's and pyarrow's default page size); a page of long kernel names
/// written a batch of rows at a time stays far below this.
pub const MAX_PAGE_BYTES: u64 = 64 << 20;

/// The largest page header gmprof reads (1 MiB; a header holds sizes, counts and at most
/// the page's truncated statistics).
const MAX_HEADER_BYTES: u64 = 1 << 20;

/// What is wrong with a file's claims: the message of the file's error.
pub type Claim = String;

/// Checks the footer of the Parquet file `file` (of `len` bytes): each list, map and binary
/// it holds must fit in the footer's bytes. A file too short to have a footer, or without
/// Parquet's magic, is left to the crate, which says so.
fn check_footer(file: &mut File, len: u64) -> std::io::Result<Result<(), Claim>> {
    if len < 12 {
        return Ok(Ok(()));
    }
    let mut tail = [0u8; 8];
    file.seek(SeekFrom::Start(len - 8))?;
    file.read_exact(&mut tail)?;
    let footer_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if &tail[4..] != b"PAR1" || footer_len + 12 > len {
        return Ok(Ok(()));
    }
    let mut footer = vec![0u8; footer_len as usize];
    file.seek(SeekFrom::Start(len - 8 - footer_len))?;
    file.read_exact(&mut footer)?;
    Ok(Walker::new(&footer).read_struct(&mut |_, _| {}).map_err(|e| format!("its footer is malformed: {e}")))
}

/// A page header's fields that gmprof checks (parquet.thrift's `PageHeader`).
#[derive(Debug, Default)]
struct PageHeader {
    page_type: Option<i64>,
    uncompressed: Option<i64>,
    compressed: Option<i64>,
    /// `dictionary_page_header.num_values`.
    dictionary_values: Option<i64>,
}

const DICTIONARY_PAGE: i64 = 2;

/// Reads the page header at the start of `bytes`: its fields and its length.
fn page_header(bytes: &[u8]) -> Result<(PageHeader, u64), WalkError> {
    let mut header = PageHeader::default();
    let mut walker = Walker::new(bytes);
    walker.read_struct(&mut |path, value| match path {
        [1] => header.page_type = Some(value),
        [2] => header.uncompressed = Some(value),
        [3] => header.compressed = Some(value),
        [7, 1] => header.dictionary_values = Some(value),
        _ => {}
    })?;
    Ok((header, walker.position() as u64))
}

/// The fewest bits a value of `column`'s type takes in a PLAIN-encoded dictionary page.
fn min_value_bits(column: &ColumnChunkMetaData) -> u64 {
    match column.column_type() {
        PhysicalType::BOOLEAN => 1,
        PhysicalType::INT32 | PhysicalType::FLOAT => 32,
        PhysicalType::INT64 | PhysicalType::DOUBLE => 64,
        PhysicalType::INT96 => 96,
        // A length prefix of 4 bytes.
        PhysicalType::BYTE_ARRAY => 32,
        PhysicalType::FIXED_LEN_BYTE_ARRAY => 8 * column.column_descr().type_length().max(1) as u64,
    }
}

/// Checks the page headers of column chunk `column` of the file `file` (of `len` bytes),
/// reading only the headers.
fn check_chunk(file: &mut File, len: u64, column: &ColumnChunkMetaData) -> std::io::Result<Result<(), Claim>> {
    let start = column.dictionary_page_offset().unwrap_or_else(|| column.data_page_offset());
    let size = column.compressed_size();
    let (Ok(start), Ok(size)) = (u64::try_from(start), u64::try_from(size)) else {
        return Ok(Err(format!("its column chunk claims offset {start} and size {size}")));
    };
    if start.checked_add(size).is_none_or(|end| end > len) {
        return Ok(Err(format!(
            "its column chunk claims bytes {start}..{} of a file of {len} bytes",
            start.saturating_add(size)
        )));
    }
    let compressed = column.compression() != Compression::UNCOMPRESSED;
    let (mut at, mut left) = (start, size);
    let mut buf = Vec::new();
    let mut page = 0u64;
    while left > 0 {
        // Most headers are tens of bytes: read a little first, more only when it ends inside.
        let mut header = None;
        for want in [4096, MAX_HEADER_BYTES] {
            let n = want.min(left);
            buf.resize(n as usize, 0);
            file.seek(SeekFrom::Start(at))?;
            file.read_exact(&mut buf)?;
            match page_header(&buf) {
                Ok(h) => {
                    header = Some(h);
                    break;
                }
                Err(WalkError::Truncated) if n < left && n < MAX_HEADER_BYTES => continue,
                Err(WalkError::Truncated) if n == MAX_HEADER_BYTES => {
                    return Ok(Err(format!("page {page}'s header is longer than {MAX_HEADER_BYTES} bytes")))
                }
                Err(e) => return Ok(Err(format!("page {page}'s header is malformed: {e}"))),
            }
        }
        let Some((h, header_len)) = header else {
            return Ok(Err(format!("page {page}'s header is malformed: it runs past the column chunk")));
        };
        left -= header_len;
        at += header_len;
        let (Some(page_type), Some(uncompressed), Some(stored)) = (h.page_type, h.uncompressed, h.compressed) else {
            return Ok(Err(format!("page {page}'s header lacks its type or sizes")));
        };
        if stored < 0 || stored as u64 > left {
            return Ok(Err(format!(
                "page {page} claims {stored} stored byte(s), where its column chunk has {left} left"
            )));
        }
        if uncompressed < 0 || (compressed && uncompressed as u64 > MAX_PAGE_BYTES) {
            return Ok(Err(format!(
                "page {page} claims {uncompressed} byte(s) uncompressed (gmprof reads pages of at most \
                 {MAX_PAGE_BYTES} bytes)"
            )));
        }
        if page_type == DICTIONARY_PAGE {
            // What the decoder reads the dictionary from: the decompressed page, or the stored one.
            let bytes = if compressed { uncompressed as u64 } else { stored as u64 };
            let values = h.dictionary_values.unwrap_or(0);
            let bits = min_value_bits(column);
            if values < 0 || (values as u64).saturating_mul(bits) > bytes.saturating_mul(8) {
                return Ok(Err(format!(
                    "its dictionary page claims {values} value(s) in {bytes} byte(s), more than a page of \
                     {:?} values that size holds",
                    column.column_type()
                )));
            }
        }
        left -= stored as u64;
        at += stored as u64;
        page += 1;
    }
    Ok(Ok(()))
}

/// Checks the page headers of the column chunks `leaves` (leaf column indices) of every row
/// group of the file `file` (of `len` bytes, whose footer is `metadata`). The error names the
/// column and the row group.
fn check_pages(
    file: &mut File,
    len: u64,
    metadata: &ParquetMetaData,
    leaves: &[usize],
) -> std::io::Result<Result<(), Claim>> {
    for (group, row_group) in metadata.row_groups().iter().enumerate() {
        for &leaf in leaves {
            let Some(column) = row_group.columns().get(leaf) else { continue };
            if let Err(why) = check_chunk(file, len, column)? {
                return Ok(Err(format!("column '{}', row group {group}: {why}", column.column_path())));
            }
        }
    }
    Ok(Ok(()))
}

/// Whether the footer of the file at `path` holds only counts its bytes can hold (before the
/// crate reads it); the claim that does not hold, as the file's error message.
pub fn footer_claims(path: &Path) -> std::io::Result<Result<(), Claim>> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    check_footer(&mut file, len)
}

/// Whether the page headers of the column chunks `leaves` (leaf column indices) of every row
/// group of the file at `path`, whose footer the crate read into `metadata`, claim only what
/// their chunks can hold; the claim that does not hold, naming the column and row group.
pub fn page_claims(path: &Path, metadata: &ParquetMetaData, leaves: &[usize]) -> std::io::Result<Result<(), Claim>> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    check_pages(&mut file, len, metadata, leaves)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parquet::schema::types::{ColumnDescriptor, ColumnPath, Type};

    use super::*;

    /// A compact-protocol page header: type, uncompressed and stored sizes, and for a
    /// dictionary page its number of values.
    fn header(page_type: i32, uncompressed: i32, stored: i32, dictionary_values: Option<i32>) -> Vec<u8> {
        fn varint(out: &mut Vec<u8>, v: i32) {
            let mut z = ((v << 1) ^ (v >> 31)) as u32;
            while z >= 0x80 {
                out.push((z as u8) | 0x80);
                z >>= 7;
            }
            out.push(z as u8);
        }
        let mut h = Vec::new();
        for (field, v) in [(0x15, page_type), (0x15, uncompressed), (0x15, stored)] {
            h.push(field);
            varint(&mut h, v);
        }
        match dictionary_values {
            // Field 7 (delta 4 from field 3), a struct: num_values, encoding PLAIN.
            Some(n) => {
                h.push(0x4c);
                h.push(0x15);
                varint(&mut h, n);
                h.extend([0x15, 0x00, 0x00]);
            }
            // Field 5 (delta 2), a data page header: num_values, encodings.
            None => h.extend([0x2c, 0x15, 0x02, 0x15, 0x00, 0x15, 0x00, 0x15, 0x00, 0x00]),
        }
        h.push(0);
        h
    }

    /// A file holding `pages` (each a header and its stored bytes) as one column chunk of a
    /// column of type `ty`, and the chunk's metadata (of `chunk_len` bytes when given).
    fn chunk(
        ty: PhysicalType,
        compression: Compression,
        pages: &[(Vec<u8>, usize)],
        chunk_len: Option<i64>,
    ) -> (tempfile::NamedTempFile, ColumnChunkMetaData) {
        let mut bytes = b"PAR1".to_vec();
        for (h, stored) in pages {
            bytes.extend(h);
            bytes.extend(std::iter::repeat_n(0u8, *stored));
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &bytes).unwrap();
        let primitive = Arc::new(Type::primitive_type_builder("name", ty).build().unwrap());
        let descr = Arc::new(ColumnDescriptor::new(primitive, 0, 0, ColumnPath::new(vec!["name".into()])));
        let meta = ColumnChunkMetaData::builder(descr)
            .set_compression(compression)
            .set_dictionary_page_offset(Some(4))
            .set_data_page_offset(4)
            .set_total_compressed_size(chunk_len.unwrap_or(bytes.len() as i64 - 4))
            .build()
            .unwrap();
        (file, meta)
    }

    fn check(file: &tempfile::NamedTempFile, meta: &ColumnChunkMetaData) -> Result<(), Claim> {
        let mut f = File::open(file.path()).unwrap();
        let len = f.metadata().unwrap().len();
        check_chunk(&mut f, len, meta).unwrap()
    }

    #[test]
    fn a_sound_chunk_passes() {
        let zstd = Compression::ZSTD(Default::default());
        let pages = [(header(2, 400, 30, Some(100)), 30), (header(0, 2000, 50, None), 50)];
        let (file, meta) = chunk(PhysicalType::BYTE_ARRAY, zstd, &pages, None);
        assert_eq!(check(&file, &meta), Ok(()));
        // An Int64 dictionary of 50 values in 400 bytes; 8 booleans in a byte.
        let (file, meta) = chunk(PhysicalType::INT64, zstd, &[(header(2, 400, 30, Some(50)), 30)], None);
        assert_eq!(check(&file, &meta), Ok(()));
        let plain = Compression::UNCOMPRESSED;
        let (file, meta) = chunk(PhysicalType::BOOLEAN, plain, &[(header(2, 1, 1, Some(8)), 1)], None);
        assert_eq!(check(&file, &meta), Ok(()));
    }

    #[test]
    fn a_dictionary_of_more_values_than_its_bytes_hold_is_refused() {
        let zstd = Compression::ZSTD(Default::default());
        let (file, meta) = chunk(PhysicalType::BYTE_ARRAY, zstd, &[(header(2, 400, 30, Some(101)), 30)], None);
        assert_eq!(
            check(&file, &meta),
            Err("its dictionary page claims 101 value(s) in 400 byte(s), more than a page of BYTE_ARRAY values \
                 that size holds"
                .into())
        );
        let (file, meta) = chunk(PhysicalType::INT64, zstd, &[(header(2, 400, 30, Some(51)), 30)], None);
        assert!(check(&file, &meta).is_err());
        // Uncompressed: the stored bytes are what the values are read from.
        let plain = Compression::UNCOMPRESSED;
        let (file, meta) = chunk(PhysicalType::INT32, plain, &[(header(2, 4000, 40, Some(11)), 40)], None);
        assert_eq!(
            check(&file, &meta),
            Err("its dictionary page claims 11 value(s) in 40 byte(s), more than a page of INT32 values that \
                 size holds"
                .into())
        );
        let (file, meta) = chunk(PhysicalType::INT32, plain, &[(header(2, 40, 40, Some(-1)), 40)], None);
        assert!(check(&file, &meta).is_err(), "a negative count");
    }

    #[test]
    fn pages_past_their_chunk_or_past_64_mib_are_refused() {
        let zstd = Compression::ZSTD(Default::default());
        let big = (MAX_PAGE_BYTES + 1) as i32;
        let (file, meta) = chunk(PhysicalType::INT64, zstd, &[(header(0, big, 30, None), 30)], None);
        assert_eq!(
            check(&file, &meta),
            Err(format!("page 0 claims {big} byte(s) uncompressed (gmprof reads pages of at most 67108864 bytes)"))
        );
        // Stored bytes past the chunk, and a header running past it.
        let (file, meta) = chunk(PhysicalType::INT64, zstd, &[(header(0, 30, 31, None), 30)], None);
        assert_eq!(
            check(&file, &meta),
            Err("page 0 claims 31 stored byte(s), where its column chunk has 30 left".into())
        );
        let (file, meta) = chunk(PhysicalType::INT64, zstd, &[(header(0, 30, 30, None), 30)], Some(5));
        let e = check(&file, &meta).unwrap_err();
        assert_eq!(e, "page 0's header is malformed: it ends inside a Thrift struct");
        // A chunk past the end of the file.
        let (file, meta) = chunk(PhysicalType::INT64, zstd, &[(header(0, 30, 30, None), 30)], Some(1 << 40));
        let e = check(&file, &meta).unwrap_err();
        assert!(e.starts_with("its column chunk claims bytes 4..1099511627780 of a file of "), "{e}");
        // A header with a binary field that claims a terabyte (as page statistics could).
        let mut h = header(0, 30, 30, None);
        h.truncate(h.len() - 1);
        h.extend([0x28, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x00]);
        let (file, meta) = chunk(PhysicalType::INT64, zstd, &[(h, 30)], None);
        let e = check(&file, &meta).unwrap_err();
        assert!(e.starts_with("page 0's header is malformed: a binary claims 1099511627776 byte(s)"), "{e}");
    }
}
