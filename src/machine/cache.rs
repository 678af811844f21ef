//! The last-level cache's size, read from sysfs: the memory probe sizes its arrays against it
//! and says when they are too small to leave it.

use std::path::Path;

/// Where Linux describes CPU 0's caches, one `index*` folder per cache.
const CACHES: &str = "/sys/devices/system/cpu/cpu0/cache";

/// Bytes of CPU 0's last-level data (or unified) cache; `None` where sysfs does not say.
pub fn last_level_cache_bytes() -> Option<u64> {
    last_level_in(Path::new(CACHES))
}

/// The largest `size` among the data and unified caches of the highest `level` under `dir`.
fn last_level_in(dir: &Path) -> Option<u64> {
    let read = |index: &Path, file: &str| std::fs::read_to_string(index.join(file)).ok();
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("index"))
        })
        .filter(|p| read(p, "type").is_some_and(|t| t.trim() != "Instruction"))
        .filter_map(|p| {
            let level: u32 = read(&p, "level")?.trim().parse().ok()?;
            Some((level, parse_size(&read(&p, "size")?)?))
        })
        .max()
        .map(|(_, bytes)| bytes)
}

/// A sysfs cache size: "491520K", "32M", "1G" or plain bytes.
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, scale) = match text.char_indices().last()? {
        (at, 'K') => (&text[..at], 1u64 << 10),
        (at, 'M') => (&text[..at], 1 << 20),
        (at, 'G') => (&text[..at], 1 << 30),
        _ => (text, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_their_unit() {
        let read = ["491520K\n", "32M", "1G", "4096"].map(parse_size);
        assert_eq!(read, [491_520 << 10, 32 << 20, 1 << 30, 4096].map(Some));
        let refused = ["K", "lots", "99999999999999999999G"].map(parse_size);
        assert_eq!(refused, [None; 3]);
    }

    #[test]
    fn the_last_level_is_the_highest_data_or_unified_cache() {
        let dir = tempfile::tempdir().unwrap();
        for (i, level, kind, size) in [
            (0, "1", "Data", "48K"),
            (1, "1", "Instruction", "64K"),
            (2, "2", "Unified", "2048K"),
            (3, "3", "Unified", "30M"),
            (4, "4", "Instruction", "1G"),
        ] {
            let index = dir.path().join(format!("index{i}"));
            std::fs::create_dir(&index).unwrap();
            std::fs::write(index.join("level"), level).unwrap();
            std::fs::write(index.join("type"), kind).unwrap();
            std::fs::write(index.join("size"), size).unwrap();
        }
        assert_eq!(last_level_in(dir.path()), Some(30 << 20));
        assert_eq!(last_level_in(&dir.path().join("missing")), None);
    }
}
