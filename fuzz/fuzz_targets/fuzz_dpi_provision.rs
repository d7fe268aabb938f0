//! The subscriber bulk-provisioning stream on arbitrary bytes: every line
//! is applied or reported, never a panic; the table stays consistent;
//! every record (caps and quota action too) round-trips through its line.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut db = dpi::subscriber::SubscriberDb::new(64);
    let mode = if data.first().is_some_and(|b| b & 1 == 1) {
        dpi::provision::Mode::SkipErrors
    } else {
        dpi::provision::Mode::Atomic
    };
    let r = dpi::provision::load(&mut db, std::io::Cursor::new(data), mode);
    let _ = r.render();
    assert_eq!(r.subscribers as usize, db.len());
    // Every provisioned address finds its owner in the published view.
    let view = db.published().load_full();
    for (s, link) in db.iter() {
        for p in &s.prefixes {
            let found = view.lookup(p.addr, p.v6).expect("provisioned prefix found");
            assert!(found.slot == link.slot || p.len < if p.v6 { 128 } else { 32 });
        }
        // A record written back reads as the same subscriber (caps and
        // quota action included), and the data path sees its caps.
        let line = dpi::provision::format_line(s);
        match dpi::provision::parse_line(&line) {
            Ok(Some(dpi::provision::Record::Set(back))) => assert_eq!(&back, s),
            other => panic!("{line:?} read back as {other:?}"),
        }
        for d in 0..2 {
            let cap = s.limits.cap_bps[d];
            assert!(link.cap_bytes(d) * 8 >= cap && link.cap_bytes(d) * 8 < cap + 1000);
        }
    }
});
