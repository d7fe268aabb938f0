//! Fuzz the SNMP subagent's handling of whatever the AgentX master sends:
//! one PDU (header and payload, either byte order) decoded by the
//! `agentx` crate and answered from a small IF-MIB view. Nothing may
//! panic, and a reply is always a whole PDU (20-byte header + its length).
//! The same bytes as a Response from the master (its sysUpTime, status).
#![no_main]

use snmp::{answer, IfMib, Row};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mib = IfMib::from_rows(&[
        Row {
            index: 1,
            name: "sw1".into(),
            in_octets: u64::MAX,
            ..Row::default()
        },
        Row {
            index: 2,
            name: "sw2".into(),
            ..Row::default()
        },
    ]);
    let _ = snmp::master_response(data);
    if let snmp::Answer::Reply(b) = answer(data, &mib) {
        assert!(b.len() >= 20);
        let len = u32::from_le_bytes([b[16], b[17], b[18], b[19]]) as usize;
        assert_eq!(b.len(), 20 + len);
    }
});
