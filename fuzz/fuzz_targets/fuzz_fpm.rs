//! Fuzz the FPM stream path: arbitrary bytes through the frame reader (fed
//! in chunks whose size the first byte picks) and the netlink decoder, the
//! updates applied to a `Rib` and resolved; plus the decoder on the raw
//! bytes. Nothing may panic.
#![no_main]

use routing::frr::fpm::{FpmStats, FrameReader, StreamDecoder};
use routing::frr::{netlink, Rib, RouteUpdate};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = netlink::decode(data);

    let Some((&chunk, rest)) = data.split_first() else {
        return;
    };
    let chunk = (chunk as usize).max(1);
    let mut reader = FrameReader::new();
    let stats = FpmStats::default();
    let mut decoder = StreamDecoder::default();
    let mut rib = Rib::new();
    for piece in rest.chunks(chunk) {
        reader.extend(piece);
        let mut out = Vec::new();
        let res = decoder.drain(&mut reader, &stats, &mut out);
        for u in &out {
            rib.apply(u);
            if let RouteUpdate::Add { nexthops, .. } = u {
                let _ = rib.resolve(nexthops);
            }
        }
        if res.is_err() {
            // What the server does: drop the connection, start afresh.
            reader.reset();
            rib.mark_stale();
        }
    }
    let _ = rib.sweep_stale();
    let _ = stats.snapshot();
});
