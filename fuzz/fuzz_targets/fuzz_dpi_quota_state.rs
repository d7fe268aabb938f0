//! The quota state file (`dpi::quota_state`) on arbitrary bytes: refused
//! with a message or read, never a panic; what is read writes back to the
//! same accounts, and restoring them into a subscriber table keeps the
//! table consistent.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let accounts = match dpi::quota_state::parse(data) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let text = dpi::quota_state::format(&accounts);
    assert_eq!(
        dpi::quota_state::parse(text.as_bytes()).as_ref(),
        Ok(&accounts)
    );
    // Restored into a table that has some of the ids: the rest wait, and
    // what the table writes back is what it was given.
    let mut db = dpi::subscriber::SubscriberDb::new(64);
    for (i, a) in accounts.iter().enumerate().step_by(2).take(64) {
        let s = dpi::subscriber::Subscriber {
            id: a.id.clone(),
            package: dpi::subscriber::Package::Gold,
            quota_bytes: Some(1),
            prefixes: vec![dpi::subscriber::Prefix {
                addr: i as u128,
                len: 128,
                v6: true,
            }],
            limits: Default::default(),
        };
        db.upsert(s, false).expect("fresh id and address");
    }
    db.publish();
    let r = db.restore_accounts(accounts.clone());
    assert_eq!(r.restored + r.unknown, accounts.len());
    assert_eq!(db.quota_accounts().len(), r.restored);
    for a in db.quota_accounts() {
        assert!(accounts.contains(&a));
    }
});
