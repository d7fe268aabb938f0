//! Fuzz the ethtool netlink cable-test notification decoders (`io::cable`):
//! any bytes from the kernel's monitor group decode to a result or an
//! error, never a panic; every reported pair appears once; a TDR trace
//! has one sample per amplitude.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(n) = io::cable::decode_notification(data) {
        let mut pairs: Vec<u8> = n.pairs.iter().map(|p| p.pair).collect();
        pairs.dedup();
        assert_eq!(pairs.len(), n.pairs.len(), "one entry per pair");
        for p in &n.pairs {
            let _ = (p.pair_name(), p.status.map(|s| s.as_str()));
        }
    }
    if let Ok(t) = io::cable::decode_tdr_notification(data) {
        if let Some((first, last, _)) = t.steps {
            let _ = last.checked_sub(first);
        }
        let _ = t.samples.iter().map(|s| s.distance_cm).max();
    }
});
