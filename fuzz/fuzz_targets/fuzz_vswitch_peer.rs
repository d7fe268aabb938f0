//! Fuzz the virtual-switch peer-protocol decoder (`wire::vswitch`).
//!
//! Nothing may panic; whatever decodes must encode back to the same bytes
//! (up to its length) and decode again to the same message.
#![no_main]

use wire::vswitch::{
    decode, encode, encode_group_filter, encode_groups, encode_neighbors, Message, HEADER_LEN,
    MAX_PAYLOAD,
};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok((domain, msg)) = decode(data) {
        let mut out = [0u8; HEADER_LEN + MAX_PAYLOAD];
        let n = encode(domain, &msg, &mut out).expect("a decoded message encodes");
        assert_eq!(&out[..n], &data[..n], "encoding differs from the input");
        assert_eq!(decode(&out[..n]), Ok((domain, msg)), "round trip");
        // Entry lists rebuilt from their decoded fields give the same bytes.
        let rebuilt = match msg {
            Message::Neighbors(m) => {
                Some(encode_neighbors(domain, &m.iter().collect::<Vec<_>>(), &mut out))
            }
            Message::Groups(m) => Some(encode_groups(domain, &m.iter().collect::<Vec<_>>(), &mut out)),
            Message::GroupFilter(f) => Some(encode_group_filter(
                domain,
                f.group,
                f.vlan,
                f.channel,
                f.mode,
                &f.sources().collect::<Vec<_>>(),
                &mut out,
            )),
            _ => None,
        };
        if let Some(r) = rebuilt {
            let k = r.expect("decoded entries encode");
            assert_eq!(&out[..k], &data[..k], "entries rebuilt differ");
        }
    }
});
