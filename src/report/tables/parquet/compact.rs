//! A walker of Thrift's compact protocol, the encoding of a Parquet file's footer and page
//! headers, that trusts no count it reads: every length and element count must fit in the
//! bytes that are left, structs nest at most [`MAX_DEPTH`] deep, and nothing is allocated for
//! what it skips. [`claims`](super::claims) runs it over a file before the `parquet` crate
//! decodes the same bytes, so that a count the crate would reserve memory for is known to be
//! one the bytes can hold.
//!
//! Only what gmprof checks is read ([`Walker::read_struct`] hands each integer field to a
//! visitor, by its path of field ids, narrowed to its type as the crate narrows it);
//! everything else is skipped. Imports nothing.

/// How deep structs, lists and maps may nest (Parquet's deepest is about 6).
pub const MAX_DEPTH: usize = 64;

/// Why the bytes are not a well-formed compact struct.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WalkError {
    /// The bytes ended inside the struct.
    Truncated,
    /// The struct is malformed (an unknown type, a count past the bytes left, too deep).
    Malformed(String),
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Truncated => f.write_str("it ends inside a Thrift struct"),
            WalkError::Malformed(why) => f.write_str(why),
        }
    }
}

type Walk<T> = Result<T, WalkError>;

// The compact protocol's types (Thrift's TCompactProtocol).
const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;
const UUID: u8 = 13;

/// A cursor over compact-protocol bytes.
pub struct Walker<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Walker<'a> {
    /// A walker at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Walker<'a> {
        Walker { bytes, at: 0 }
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.at
    }

    fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn byte(&mut self) -> Walk<u8> {
        let b = *self.bytes.get(self.at).ok_or(WalkError::Truncated)?;
        self.at += 1;
        Ok(b)
    }

    fn skip_bytes(&mut self, n: u64) -> Walk<()> {
        if n > self.left() as u64 {
            return Err(WalkError::Truncated);
        }
        self.at += n as usize;
        Ok(())
    }

    fn varint(&mut self) -> Walk<u64> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err(WalkError::Malformed("a varint longer than 64 bits".into()));
            }
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WalkError::Malformed("a varint longer than 64 bits".into()))
    }

    fn zigzag(&mut self) -> Walk<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A count read from the bytes (a list's or map's size, a binary's length), refused when
    /// the bytes left cannot hold `count × at_least` bytes.
    fn count(&mut self, count: u64, at_least: u64, what: &str) -> Walk<u64> {
        if count.saturating_mul(at_least) > self.left() as u64 {
            let unit = if what == "binary" { "byte(s)" } else { "element(s)" };
            return Err(WalkError::Malformed(format!(
                "a {what} claims {count} {unit}, more than the {} byte(s) left can hold",
                self.left()
            )));
        }
        Ok(count)
    }

    /// Reads a struct from here to its stop field, calling `visit(path, value)` for each
    /// integer field (`path`: the field ids from the outermost struct down); lists, sets and
    /// maps are checked and skipped.
    pub fn read_struct(&mut self, visit: &mut dyn FnMut(&[i16], i64)) -> Walk<()> {
        let mut path = Vec::new();
        self.struct_body(&mut path, visit)
    }

    fn struct_body(&mut self, path: &mut Vec<i16>, visit: &mut dyn FnMut(&[i16], i64)) -> Walk<()> {
        if path.len() >= MAX_DEPTH {
            return Err(WalkError::Malformed(format!("structs nested deeper than {MAX_DEPTH}")));
        }
        let mut last_id: i16 = 0;
        loop {
            let header = self.byte()?;
            if header == 0 {
                return Ok(());
            }
            let (delta, ty) = (header >> 4, header & 0x0f);
            let id = if delta == 0 {
                i16::try_from(self.zigzag()?).map_err(|_| WalkError::Malformed("a field id past i16".into()))?
            } else {
                last_id.wrapping_add(i16::from(delta))
            };
            last_id = id;
            path.push(id);
            match ty {
                BYTE => {
                    let v = self.byte()? as i8;
                    visit(path, i64::from(v));
                }
                // Narrowed as the `parquet` crate narrows them (it reads every integer as an
                // i64 and casts), so a check sees the value the crate will use.
                I16 => {
                    let v = self.zigzag()? as i16;
                    visit(path, i64::from(v));
                }
                I32 => {
                    let v = self.zigzag()? as i32;
                    visit(path, i64::from(v));
                }
                I64 => {
                    let v = self.zigzag()?;
                    visit(path, v);
                }
                STRUCT => self.struct_body(path, visit)?,
                _ => self.skip(ty, path.len())?,
            }
            path.pop();
        }
    }

    /// Skips a value of type `ty` at nesting `depth`.
    fn skip(&mut self, ty: u8, depth: usize) -> Walk<()> {
        if depth >= MAX_DEPTH {
            return Err(WalkError::Malformed(format!("values nested deeper than {MAX_DEPTH}")));
        }
        match ty {
            BOOL_TRUE | BOOL_FALSE => Ok(()),
            BYTE => self.skip_bytes(1),
            I16 | I32 | I64 => self.varint().map(|_| ()),
            DOUBLE => self.skip_bytes(8),
            UUID => self.skip_bytes(16),
            BINARY => {
                let n = self.varint()?;
                let n = self.count(n, 1, "binary")?;
                self.skip_bytes(n)
            }
            LIST | SET => {
                let header = self.byte()?;
                let (short, element) = (header >> 4, header & 0x0f);
                let n = if short == 15 { self.varint()? } else { u64::from(short) };
                // Every element takes a byte at least (a boolean in a list is a byte).
                let n = self.count(n, 1, "list")?;
                for _ in 0..n {
                    match element {
                        BOOL_TRUE | BOOL_FALSE => self.skip_bytes(1)?,
                        _ => self.skip(element, depth + 1)?,
                    }
                }
                Ok(())
            }
            MAP => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                let n = self.count(n, 2, "map")?;
                let types = self.byte()?;
                let (key, value) = (types >> 4, types & 0x0f);
                for _ in 0..n {
                    self.skip(key, depth + 1)?;
                    self.skip(value, depth + 1)?;
                }
                Ok(())
            }
            STRUCT => {
                let mut path = vec![0; depth];
                self.struct_body(&mut path, &mut |_, _| {})
            }
            other => Err(WalkError::Malformed(format!("an unknown Thrift compact type {other}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_visited_by_their_path_and_the_rest_is_skipped() {
        // { 1: i32 -3, 2: binary "ab", 7: { 1: i32 300 }, 8: list<i32> [1, 2], 20: i64 5 }
        let bytes = [
            0x15, 0x05, // field 1, i32, zigzag(-3) = 5
            0x18, 0x02, b'a', b'b', // field 2, binary of 2
            0x5c, // field 7 (delta 5), struct
            0x15, 0xd8, 0x04, // field 1, i32, zigzag(300) = 600
            0x00, // end of field 7
            0x19, 0x25, 0x02, 0x04, // field 8, list of 2 i32: 1, 2
            0x06, 0x28, 0x0a, // field 20 (long form: id zigzag 40), i64 zigzag(5) = 10
            0x00,
        ];
        let mut seen = Vec::new();
        let mut w = Walker::new(&bytes);
        w.read_struct(&mut |path, v| seen.push((path.to_vec(), v))).unwrap();
        assert_eq!(w.position(), bytes.len());
        assert_eq!(seen, [(vec![1], -3), (vec![7, 1], 300), (vec![20], 5)]);
    }

    #[test]
    fn counts_past_the_bytes_left_are_refused_before_anything_is_skipped() {
        // A binary of 2^40 bytes, a list of 2^31 elements, a map of 2^31 entries.
        let binary = [0x18, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0x00];
        let e = Walker::new(&binary).read_struct(&mut |_, _| {}).unwrap_err();
        assert!(matches!(&e, WalkError::Malformed(m) if m.starts_with("a binary claims 1099511627776")), "{e}");
        let list = [0x19, 0xfc, 0x80, 0x80, 0x80, 0x80, 0x08, 0x00];
        let e = Walker::new(&list).read_struct(&mut |_, _| {}).unwrap_err();
        assert!(matches!(&e, WalkError::Malformed(m) if m.starts_with("a list claims 2147483648")), "{e}");
        let map = [0x1b, 0x80, 0x80, 0x80, 0x80, 0x08, 0x55, 0x00];
        let e = Walker::new(&map).read_struct(&mut |_, _| {}).unwrap_err();
        assert!(matches!(&e, WalkError::Malformed(m) if m.starts_with("a map claims 2147483648")), "{e}");
        assert_eq!(Walker::new(&[0x15]).read_struct(&mut |_, _| {}), Err(WalkError::Truncated));
    }

    #[test]
    fn integers_are_narrowed_to_their_type_as_the_crate_reads_them() {
        // An i32 field whose varint holds -36275226144736: the crate reads 67637280.
        let mut bytes = vec![0x15];
        let mut v = ((-36_275_226_144_736i64 << 1) ^ (-36_275_226_144_736i64 >> 63)) as u64;
        while v >= 0x80 {
            bytes.push((v as u8) | 0x80);
            v >>= 7;
        }
        bytes.extend([v as u8, 0]);
        let mut seen = Vec::new();
        Walker::new(&bytes).read_struct(&mut |_, v| seen.push(v)).unwrap();
        assert_eq!(seen, [67_637_280]);
    }

    #[test]
    fn nesting_is_bounded() {
        let mut bytes = vec![0x1c; 1000];
        bytes.extend(std::iter::repeat_n(0, 1001));
        let e = Walker::new(&bytes).read_struct(&mut |_, _| {}).unwrap_err();
        assert_eq!(e, WalkError::Malformed(format!("structs nested deeper than {MAX_DEPTH}")));
    }
}
