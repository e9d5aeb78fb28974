//! Byte counts as people write them (`256MiB`), read the same way from
//! flags and from the file.

/// Parses a byte count: digits with an optional binary unit (KiB, MiB, GiB,
/// TiB; also K, M, G, T, KB, MB, GB, TB as the same powers of 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a byte count like 1048576 or 256MiB"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("unknown unit '{other}' in '{s}'")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("'{s}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_take_binary_units() {
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("256MiB"), Ok(256 << 20));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert_eq!(parse_bytes("1 kb"), Ok(1024));
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("MiB").is_err());
        assert!(parse_bytes("99999999999TiB").is_err());
    }
}
