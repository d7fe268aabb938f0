//! Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Sums are kept as `u32` accumulators of 16-bit big-endian words and folded
//! at the end, so partial sums (pseudo-header + header + payload) combine by
//! plain addition.

/// One's-complement sum of `data` as big-endian 16-bit words (an odd last
/// byte is padded with zero), not folded and not complemented.
pub fn sum(data: &[u8]) -> u32 {
    // 32-bit big-endian words into a 64-bit accumulator: a word
    // hi·2¹⁶ + lo is congruent to hi + lo modulo 2¹⁶ − 1, so this is the
    // 16-bit one's-complement sum, at half the additions (2⁴⁰ bytes before
    // the accumulator could overflow).
    let mut acc: u64 = 0;
    let mut words = data.chunks_exact(4);
    for c in &mut words {
        acc += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = words.remainder();
    let mut pairs = rest.chunks_exact(2);
    for c in &mut pairs {
        acc += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = pairs.remainder() {
        acc += u64::from(*last) << 8;
    }
    fold64(acc)
}

fn fold64(mut acc: u64) -> u32 {
    while acc > 0xffff_ffff {
        acc = (acc & 0xffff_ffff) + (acc >> 32);
    }
    acc as u32
}

/// Adds two partial sums.
pub fn combine(a: u32, b: u32) -> u32 {
    fold64(u64::from(a) + u64::from(b))
}

/// Folds a partial sum to 16 bits (still not complemented).
pub fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The checksum field value for data whose partial sum is `acc`
/// (with the checksum field itself counted as zero).
pub fn finish(acc: u32) -> u16 {
    !fold(acc)
}

/// True when a region that *includes* its checksum field sums to `0xffff`.
pub fn verifies(acc: u32) -> bool {
    fold(acc) == 0xffff
}

/// RFC 1624 eqn. 3: new checksum after one 16-bit word of the covered data
/// changed from `old` to `new`: `HC' = ~(~HC + ~m + m')`.
pub fn update(checksum: u16, old: u16, new: u16) -> u16 {
    let acc = u32::from(!checksum) + u32::from(!old) + u32::from(new);
    !fold(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 32-bit-word sum folds to the same 16-bit sum as word-by-word
    /// addition, for every length and alignment of the tail.
    #[test]
    fn word_sum_equals_the_16_bit_reference() {
        fn reference(d: &[u8]) -> u16 {
            let mut acc: u64 = 0;
            for c in d.chunks(2) {
                acc += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
            }
            while acc > 0xffff {
                acc = (acc & 0xffff) + (acc >> 16);
            }
            acc as u16
        }
        let mut x: u32 = 12345;
        let data: Vec<u8> = (0..3000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        for len in 0..300 {
            assert_eq!(
                fold(sum(&data[..len])),
                reference(&data[..len]),
                "len {len}"
            );
        }
        let ones = vec![0xffu8; 2999];
        assert_eq!(fold(sum(&ones)), reference(&ones));
        assert_eq!(fold(sum(&data)), reference(&data));
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data)), 0xddf2);
        assert_eq!(finish(sum(&data)), !0xddf2);
    }

    #[test]
    fn odd_length_pads() {
        assert_eq!(sum(&[0x12]), 0x1200);
        assert_eq!(sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn incremental_matches_full() {
        let mut data = [0x45u8, 0x00, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01];
        let before = finish(sum(&data));
        let old = u16::from_be_bytes([data[8], data[9]]);
        data[8] = 0x3f;
        let new = u16::from_be_bytes([data[8], data[9]]);
        assert_eq!(update(before, old, new), finish(sum(&data)));
    }
}
